// Faults all at once, against real daemons and a real PostgreSQL: while two
// daemons work through 500 runs, the test terminates random cairn backends,
// holds one run's row locked, kills a daemon with SIGKILL (and starts it
// again) and restarts PostgreSQL itself. At the end every run has finished,
// its transactional write exists exactly once, and its version moved one
// step at a time: version - 1 equals the number of version-changing updates
// a trigger recorded, with no version skipped or written twice.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>

#include "daemon_process.hpp"
#include "history_sql.hpp"
#include "pg_session.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

class FaultInjection : public StoreTest {
 protected:
  DaemonOptions Options() const {
    DaemonOptions o = BuiltDaemonOptions(url(), schema(), "e2e.yaml", 8);
    o.lease = "2s";
    o.reaper_interval = "300ms";
    o.poll_interval = "100ms";
    return o;
  }

  int64_t Count(const std::string& where) const {
    return SqlInt("SELECT count(*) FROM {s}.runs WHERE " + where);
  }

  std::string StatusSummary() const {
    return Sql(
        "SELECT coalesce(string_agg(status || '=' || n, ', ' ORDER BY status), 'no runs') "
        "FROM (SELECT status, count(*) AS n FROM {s}.runs GROUP BY status) s");
  }

  // Terminates up to n backends of cairn (daemons and their slots).
  void TerminateBackends(int n) const {
    RunPsql(
        "SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity "
        "WHERE application_name LIKE 'cairn%' AND pid <> pg_backend_pid() "
        "ORDER BY random() LIMIT " +
        std::to_string(n) + ") p");
  }
};

TEST_F(FaultInjection, FiveHundredRunsSurviveEveryFaultAtOnce) {
  if (!HarnessOwnsServer()) GTEST_SKIP() << "restarts the server: needs the harness's own";
  Sql("CREATE TABLE {s}.writes (run_id text NOT NULL, attempt int NOT NULL)");
  Sql("CREATE TABLE {s}.transitions (run_id uuid NOT NULL, from_version bigint NOT NULL, "
      "to_version bigint NOT NULL)");
  Sql("CREATE FUNCTION {s}.record_transition() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "INSERT INTO " +
      InSchema("{s}") +
      ".transitions VALUES (NEW.id, OLD.version, NEW.version); "
      "RETURN NEW; END $$");
  Sql("CREATE TRIGGER record_transition AFTER UPDATE ON {s}.runs FOR EACH ROW "
      "WHEN (OLD.version <> NEW.version) EXECUTE FUNCTION {s}.record_transition()");

  auto a = std::make_unique<DaemonProcess>(Options());
  auto b = std::make_unique<DaemonProcess>(Options());
  ASSERT_TRUE(a->StartAndWaitReady()) << a->Log();
  ASSERT_TRUE(b->StartAndWaitReady()) << b->Log();
  // 500 runs of 250 ms on 16 slots take about 8 s: the faults below, about
  // 7 s of them, land while most runs are still under way.
  const Json input = {{"sleep_ms", 250}, {"table", schema() + ".writes"}};
  Sql("SELECT count({s}.start_run('e2e_crash', '" + input.dump() +
      "'::jsonb)) FROM generate_series(1, 500)");

  // The faults, one after the other, while the runs are under way.
  ASSERT_TRUE(PollUntil([&] { return Count("status = 'completed'") >= 20; }, 60s))
      << StatusSummary();
  TerminateBackends(6);
  {
    // An operator holds a running run's row for two leases.
    PgSession operator_session(url());
    const std::string locked = operator_session.Value(
        InSchema("SELECT id FROM {s}.runs WHERE status = 'running' LIMIT 1"));
    operator_session.Value("BEGIN");
    if (!locked.empty()) {
      operator_session.Value(InSchema("SELECT 1 FROM {s}.runs WHERE id = $1 FOR UPDATE"), {locked});
    }
    std::this_thread::sleep_for(4s);
    operator_session.Value("COMMIT");
  }
  b->Kill();
  ASSERT_EQ(b->WaitExit(10s), 128 + SIGKILL);
  std::this_thread::sleep_for(500ms);
  b = std::make_unique<DaemonProcess>(Options());
  ASSERT_TRUE(b->StartAndWaitReady()) << b->Log();
  ASSERT_LT(Count("status = 'completed'"), 500) << "the faults came too late to matter";
  RestartServer();
  TerminateBackends(6);

  ASSERT_TRUE(PollUntil([&] { return Count("status = 'completed'") == 500; }, 180s, 200ms))
      << StatusSummary() << "\n--- a ---\n"
      << a->Log() << "\n--- b ---\n"
      << b->Log();
  a->Terminate();
  b->Terminate();
  EXPECT_EQ(a->WaitExit(30s), 0) << a->Log();
  EXPECT_EQ(b->WaitExit(30s), 0) << b->Log();

  // Each transactional write exactly once, for a run that completed.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.writes"), 500);
  EXPECT_EQ(SqlInt("SELECT count(DISTINCT run_id) FROM {s}.writes"), 500);
  // Every step committed once.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM (SELECT run_id, step FROM {s}.run_events WHERE " +
                   kStepCommits + " GROUP BY run_id, step HAVING count(*) <> 1) d"),
            0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE " + kStepCommits), 1500);
  // Versions moved one at a time, and every move was recorded.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.transitions WHERE to_version <> from_version + 1"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM (SELECT run_id, to_version FROM {s}.transitions GROUP BY "
                   "run_id, to_version HAVING count(*) > 1) d"),
            0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs r WHERE r.version - 1 <> (SELECT count(*) FROM "
                   "{s}.transitions t WHERE t.run_id = r.id)"),
            0);
  EXPECT_EQ(Count("lease_owner IS NOT NULL"), 0);
}

}  // namespace
}  // namespace cairn::test
