// `cairn workers` against real daemons: a live worker with its host, pid,
// version, queues, slots and the runs it holds; a worker killed with SIGKILL
// shows as dead once its heartbeat is old, and a stopped one as stopped.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "daemon_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

class Workers : public DaemonTest {
 protected:
  Workers() : DaemonTest("tests/workflows/e2e.yaml") {}

  Json List() const {
    const CommandResult result = Cli({"workers", "--json"});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return Json::parse(result.out);
  }

  static Json Find(const Json& workers, const std::string& id) {
    for (const auto& w : workers) {
      if (w["id"] == id) return w;
    }
    return Json();
  }
};

TEST_F(Workers, ListsLiveDeadAndStoppedWorkersAndWhatEachRuns) {
  auto busy = StartDaemon(3);
  auto stopped = StartDaemon(1);
  Stop(*stopped);
  const std::string id = StartRun("e2e_shutdown", {{"sleep_ms", 3000}});
  ASSERT_TRUE(WaitForStatus(id, "running")) << busy->Log();

  const Json live = Find(List(), busy->worker_id());
  ASSERT_FALSE(live.is_null());
  EXPECT_EQ(live["state"], "live");
  EXPECT_EQ(live["pid"], busy->pid());
  EXPECT_FALSE(live["version"].get<std::string>().empty());
  EXPECT_EQ(live["queues"], Json::array({"default"}));
  EXPECT_EQ(live["concurrency"], 3);
  ASSERT_EQ(live["running"].size(), 1u) << live.dump();
  EXPECT_EQ(live["running"][0]["id"], id);
  EXPECT_EQ(live["running"][0]["workflow"], "e2e_shutdown");
  EXPECT_EQ(live["running"][0]["step"], "first");
  EXPECT_EQ(Find(List(), stopped->worker_id())["state"], "stopped");

  // Killed: no stop recorded, and a heartbeat older than the liveness window.
  busy->Kill();
  busy->WaitExit(10s);
  Sql("UPDATE {s}.workers SET heartbeat_at = now() - interval '10 minutes' WHERE id = '" +
      busy->worker_id() + "'");
  EXPECT_EQ(Find(List(), busy->worker_id())["state"], "dead");

  const CommandResult table = Cli({"workers"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("WORKER"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(busy->worker_id()), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("dead"), std::string::npos) << table.out;
}

}  // namespace
}  // namespace cairn::test
