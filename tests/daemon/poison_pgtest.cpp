// Poison steps against real daemons: a step that aborts, dereferences null,
// runs out of memory or never returns. On the daemon's threads such a step
// takes the daemon down, and the run fails with code "crashed" once its
// lease expired maintenance.crash_limit times in a row, so it cannot
// crash-loop a fleet; under process isolation only its step process dies,
// the attempt fails with code "crashed" or "timeout", and the daemon's other
// runs go on.
#include <dirent.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "daemon_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

class Poison : public DaemonTest {
 protected:
  Poison() : DaemonTest("tests/workflows/poison.yaml") {}

  void SetUp() override {
    DaemonTest::SetUp();
    Sql("CREATE TABLE {s}.journal (id bigserial PRIMARY KEY, run_id text NOT NULL, "
        "step text NOT NULL, attempt int NOT NULL)");
  }

  // A short lease, so that the run of a dead daemon is taken over quickly.
  DaemonOptions Options(int concurrency) const override {
    DaemonOptions o = DaemonTest::Options(concurrency);
    o.lease = "1s";
    o.reaper_interval = "200ms";
    return o;
  }

  std::unique_ptr<DaemonProcess> StartDaemonWith(const std::string& isolation,
                                                 const std::string& memory_limit = "0") {
    DaemonOptions o = Options(2);
    o.isolation = isolation;
    o.memory_limit = memory_limit;
    auto daemon = std::make_unique<DaemonProcess>(o);
    if (!daemon->StartAndWaitReady()) ADD_FAILURE() << "daemon did not start:\n" << daemon->Log();
    return daemon;
  }

  std::string Journal(const std::string& id) const {
    return Sql(
        "SELECT coalesce(string_agg(step, ' ' ORDER BY id), '') FROM {s}.journal "
        "WHERE run_id = '" +
        id + "'");
  }

  // The value of the run's last event of a kind, as JSON (null when none).
  Json LastEvent(const std::string& id, const std::string& kind) const {
    const std::string value = Sql("SELECT value FROM {s}.run_events WHERE run_id = '" + id +
                                  "' AND kind = '" + kind + "' ORDER BY position DESC LIMIT 1");
    return value.empty() ? Json() : Json::parse(value);
  }

  static int Threads(pid_t pid) {
    int count = 0;
    DIR* dir = ::opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
    if (dir == nullptr) return -1;
    while (dirent* entry = ::readdir(dir)) count += entry->d_name[0] != '.';
    ::closedir(dir);
    return count;
  }

  std::string Input() const { return Json{{"journal", schema() + ".journal"}}.dump(); }
};

TEST_F(Poison, OnThreadsACrashingStepFailsItsRunAsCrashedOnceTheCrashLimitIsReached) {
  // A daemon registers the workflows, and leaves.
  Stop(*StartDaemonWith("process"));
  const std::string id = StartRun("poison_abort", Json::parse(Input()));
  // Each daemon claims the run and dies with the step; the next one takes
  // the run over when the lease expires. The third expiry fails the run.
  int deaths = 0;
  std::string takeover_log;
  for (int round = 0; round < 6 && RunColumn(id, "status") != "failed"; ++round) {
    auto daemon = StartDaemonWith("thread");
    const bool died = PollUntil([&] { return !daemon->Running(); }, 15s, 50ms);
    if (died) {
      ++deaths;
      takeover_log += daemon->Log();
      continue;
    }
    ASSERT_TRUE(WaitForStatus(id, "failed", 15s)) << daemon->Log();
    takeover_log += daemon->Log();
    Stop(*daemon);
  }
  ASSERT_EQ(RunColumn(id, "status"), "failed");
  EXPECT_EQ(deaths, 3);
  EXPECT_EQ(LastEvent(id, "failed")["code"], "crashed");
  EXPECT_NE(RunColumn(id, "error").find("crashed its worker"), std::string::npos);
  EXPECT_EQ(RunEventCount(id, "lease_expired"), 3);
  // It failed after committing `reserve`: the compensation ran.
  EXPECT_EQ(Journal(id), "reserve undo_a");
  EXPECT_EQ(RunEventCount(id, "compensated"), 1);
  // Each takeover named the run, its workflow, step and attempt.
  EXPECT_NE(
      takeover_log.find("run " + id + " workflow poison_abort step boom attempt 1: taken over"),
      std::string::npos)
      << takeover_log;
  EXPECT_NE(takeover_log.find("(code crashed)"), std::string::npos) << takeover_log;

  // A healthy run after it completes.
  auto daemon = StartDaemonWith("thread");
  const std::string healthy = StartRun("healthy");
  EXPECT_TRUE(WaitForStatus(healthy, "completed")) << daemon->Log();
  Stop(*daemon);
}

TEST_F(Poison, InAStepProcessAnAbortFailsOnlyTheAttemptAndTheDaemonGoesOn) {
  auto daemon = StartDaemonWith("process");
  const std::string id = StartRun("poison_abort", Json::parse(Input()));
  const std::string healthy = StartRun("healthy");
  ASSERT_TRUE(WaitForStatus(id, "failed")) << daemon->Log();
  EXPECT_TRUE(WaitForStatus(healthy, "completed")) << daemon->Log();
  EXPECT_TRUE(daemon->Running());
  // Both attempts failed with code crashed (the policy allows two), and the
  // run unwound: reserve's compensation ran.
  EXPECT_EQ(LastEvent(id, "retried")["code"], "crashed");
  EXPECT_EQ(LastEvent(id, "failed")["code"], "crashed");
  EXPECT_NE(RunColumn(id, "error").find("SIGABRT"), std::string::npos) << RunColumn(id, "error");
  EXPECT_EQ(Journal(id), "reserve undo_a");
  EXPECT_EQ(RunEventCount(id, "lease_expired"), 0);
  // More runs of the daemon keep going.
  const std::string later = StartRun("healthy");
  EXPECT_TRUE(WaitForStatus(later, "completed")) << daemon->Log();
  Stop(*daemon);
}

TEST_F(Poison, InAStepProcessANullDereferenceFailsTheAttemptAsCrashed) {
  auto daemon = StartDaemonWith("process");
  const std::string id = StartRun("poison_segv");
  ASSERT_TRUE(WaitForStatus(id, "failed")) << daemon->Log();
  EXPECT_EQ(LastEvent(id, "failed")["code"], "crashed");
  EXPECT_NE(RunColumn(id, "error").find("SIGSEGV"), std::string::npos) << RunColumn(id, "error");
  EXPECT_TRUE(daemon->Running());
  Stop(*daemon);
}

TEST_F(Poison, InAStepProcessRunningOutOfMemoryFailsTheAttemptAsCrashed) {
  auto daemon = StartDaemonWith("process", "256MiB");
  const std::string id = StartRun("poison_oom");
  ASSERT_TRUE(WaitForStatus(id, "failed")) << daemon->Log();
  EXPECT_EQ(LastEvent(id, "failed")["code"], "crashed");
  EXPECT_NE(RunColumn(id, "error").find("ran out of memory"), std::string::npos)
      << RunColumn(id, "error");
  EXPECT_TRUE(daemon->Running());
  const std::string healthy = StartRun("healthy");
  EXPECT_TRUE(WaitForStatus(healthy, "completed")) << daemon->Log();
  Stop(*daemon);
}

TEST_F(Poison, InAStepProcessAStepThatNeverReturnsLeavesNoThreadBehind) {
  auto daemon = StartDaemonWith("process");
  const std::string warm = StartRun("healthy");
  ASSERT_TRUE(WaitForStatus(warm, "completed")) << daemon->Log();
  const int threads_before = Threads(daemon->pid());
  const std::string id = StartRun("poison_hang");
  ASSERT_TRUE(WaitForStatus(id, "failed", 30s)) << daemon->Log();
  EXPECT_EQ(LastEvent(id, "failed")["code"], "timeout");
  EXPECT_EQ(RunEventCount(id, "retried"), 19);
  // Twenty timed-out attempts, each in a step process that was killed: the
  // daemon has as many threads as before.
  EXPECT_LE(Threads(daemon->pid()), threads_before) << "threads before: " << threads_before;
  Stop(*daemon);
}

}  // namespace
}  // namespace cairn::test
