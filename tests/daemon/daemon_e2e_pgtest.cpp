// End-to-end tests: real `cairn run` processes against the harness's real
// PostgreSQL server, driven through SQL and the CLI, with assertions on counts
// in the database. Workflows: tests/workflows/e2e.yaml.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "daemon_process.hpp"
#include "history_sql.hpp"
#include "pg_session.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

class DaemonE2E : public StoreTest {
 protected:
  DaemonOptions Options(int concurrency = 4) const {
    DaemonOptions o = BuiltDaemonOptions(url(), schema(), "e2e.yaml", concurrency);
    return o;
  }

  std::unique_ptr<DaemonProcess> Daemon(DaemonOptions options) const {
    return std::make_unique<DaemonProcess>(std::move(options));
  }

  // "<schema>.<table>", as tx_insert's input.table wants it.
  std::string Table(const std::string& name) const { return schema() + "." + name; }

  // Starts `count` runs of `workflow` with `input` in one statement.
  void StartRuns(const std::string& workflow, int count, const Json& input = Json::object()) {
    Sql("SELECT count({s}.start_run('" + workflow + "', '" + input.dump() +
        "'::jsonb)) FROM generate_series(1, " + std::to_string(count) + ")");
  }

  std::string StartRun(const std::string& workflow, const Json& input = Json::object()) {
    return Sql("SELECT {s}.start_run('" + workflow + "', '" + input.dump() + "'::jsonb)");
  }

  int64_t CountRuns(const std::string& status) const {
    return SqlInt("SELECT count(*) FROM {s}.runs WHERE status = '" + status + "'");
  }

  // Run counts by status, for failure messages.
  std::string StatusSummary() const {
    return Sql(
        "SELECT coalesce(string_agg(status || '=' || n, ', ' ORDER BY status), 'no runs') "
        "FROM (SELECT status, count(*) AS n FROM {s}.runs GROUP BY status) s");
  }

  bool WaitForStatusCount(const std::string& status, int64_t count,
                          std::chrono::milliseconds timeout) const {
    return PollUntil([&] { return CountRuns(status) == count; }, timeout, 50ms);
  }

  // (run, step) pairs with more than one step commit.
  int64_t DoubleCommits() const {
    return SqlInt(
        "SELECT count(*) FROM (SELECT run_id, step FROM {s}.run_events "
        "WHERE " +
        kStepCommits + " GROUP BY run_id, step HAVING count(*) > 1) d");
  }

  int64_t EventCount(const std::string& kind) const {
    return SqlInt("SELECT count(*) FROM {s}.run_events WHERE kind = '" + kind + "'");
  }

  // Step commits: step_committed, or completed for a run's last.
  int64_t CommitCount() const {
    return SqlInt("SELECT count(*) FROM {s}.run_events WHERE " + kStepCommits);
  }

  // Runs leased by nobody's live claim: what a clean stop must leave.
  int64_t LeasedRuns() const {
    return SqlInt(
        "SELECT count(*) FROM {s}.runs WHERE status = 'running' OR lease_owner IS NOT NULL");
  }
};

using Session = cairn::test::PgSession;

// 1,000 runs of three steps through two daemons: every run completes, every
// step commits exactly once, and both daemons took part.
TEST_F(DaemonE2E, TwoDaemonsCompleteAThousandRunsWithEveryStepCommittedOnce) {
  auto a = Daemon(Options(4));
  auto b = Daemon(Options(4));
  ASSERT_TRUE(a->StartAndWaitReady()) << a->Log();
  ASSERT_TRUE(b->StartAndWaitReady()) << b->Log();

  StartRuns("e2e_three", 1000);
  ASSERT_TRUE(WaitForStatusCount("completed", 1000, 90s)) << StatusSummary();

  a->Terminate();
  b->Terminate();
  EXPECT_EQ(a->WaitExit(20s), 0);
  EXPECT_EQ(b->WaitExit(20s), 0);

  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 1000);
  EXPECT_EQ(CommitCount(), 3000);
  EXPECT_EQ(SqlInt("SELECT count(DISTINCT (run_id, step)) FROM {s}.run_events "
                   "WHERE " +
                   kStepCommits),
            3000);
  EXPECT_EQ(DoubleCommits(), 0);
  EXPECT_EQ(EventCount("completed"), 1000);
  EXPECT_EQ(EventCount("retried") + EventCount("failed"), 0);
  EXPECT_EQ(LeasedRuns(), 0);

  // Both daemons did some of the work (a run is claimed once unless handed back).
  const long claimed_a = a->ClaimedAtStop();
  const long claimed_b = b->ClaimedAtStop();
  EXPECT_GT(claimed_a, 0) << a->Log();
  EXPECT_GT(claimed_b, 0) << b->Log();
  EXPECT_GE(claimed_a + claimed_b, 1000);
}

// kill -9 with steps in flight: a second daemon takes the leased runs over
// once their leases expire and finishes everything; no step commits twice and
// the transactional table holds exactly one row per run.
TEST_F(DaemonE2E, KillNineMidStepLosesNothingAndCommitsNothingTwice) {
  Sql("CREATE TABLE {s}.crash_rows (run_id text NOT NULL, attempt int NOT NULL)");
  const int kRuns = 30;
  DaemonOptions options = Options(4);
  options.lease = "2s";
  options.reaper_interval = "500ms";
  auto victim = Daemon(options);
  ASSERT_TRUE(victim->StartAndWaitReady()) << victim->Log();

  StartRuns("e2e_crash", kRuns, {{"sleep_ms", 200}, {"table", Table("crash_rows")}});
  // Some runs done, some in flight: kill it then.
  ASSERT_TRUE(PollUntil([&] { return CountRuns("completed") >= 4 && CountRuns("running") >= 1; },
                        20s, 20ms))
      << StatusSummary();
  victim->Kill();
  ASSERT_EQ(victim->WaitExit(10s), 128 + SIGKILL);
  const int64_t leased_at_kill = CountRuns("running");
  ASSERT_GE(leased_at_kill, 1);
  ASSERT_LT(CountRuns("completed"), kRuns);

  auto rescuer = Daemon(options);
  ASSERT_TRUE(rescuer->StartAndWaitReady()) << rescuer->Log();
  ASSERT_TRUE(WaitForStatusCount("completed", kRuns, 30s)) << StatusSummary();
  rescuer->Terminate();
  EXPECT_EQ(rescuer->WaitExit(20s), 0);

  // The killed daemon's leases were reaped, not waited out by elapsed time.
  EXPECT_GE(EventCount("lease_expired"), leased_at_kill);
  EXPECT_EQ(CommitCount(), 3 * kRuns);
  EXPECT_EQ(DoubleCommits(), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.crash_rows"), kRuns);
  EXPECT_EQ(SqlInt("SELECT count(DISTINCT run_id) FROM {s}.crash_rows"), kRuns);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.crash_rows c JOIN {s}.runs r ON r.id::text = c.run_id "
                   "WHERE r.status = 'completed'"),
            kRuns);
  // Lease loss does not consume an attempt.
  EXPECT_EQ(EventCount("retried") + EventCount("failed"), 0);
  EXPECT_EQ(LeasedRuns(), 0);
}

// A zombie: the run is taken over while its transactional step is still
// running. The zombie cannot commit; its write rolls back with its
// checkpoint. Once the takeover's lease expires, the run completes with
// exactly one write.
TEST_F(DaemonE2E, ZombieWhoseRunWasTakenOverCannotCommit) {
  Sql("CREATE TABLE {s}.zombie_rows (marker text NOT NULL, attempt int NOT NULL)");
  DaemonOptions options = Options(1);
  // Renewed every second while the step runs: the lease keeper wakes every
  // lease / 3.
  options.lease = "3s";
  auto daemon = Daemon(options);
  ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log();

  const Json input = {{"sql", "WITH ins AS (INSERT INTO " + Table("zombie_rows") +
                                  " (marker, attempt) VALUES ($1, 1) RETURNING 1) "
                                  "SELECT pg_sleep($2::float8) AS slept FROM ins"},
                      {"params", Json::array({"zombie", 1.5})}};
  const std::string id = StartRun("e2e_zombie", input);

  // The step's statement is sleeping inside its transaction, its insert done.
  ASSERT_TRUE(PollUntil(
      [&] {
        return SqlInt(
                   "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                   "AND query LIKE '%pg_sleep%' AND application_name LIKE 'cairn slot% " +
                   daemon->worker_id() + "'") == 1;
      },
      10s, 10ms))
      << daemon->Log();
  // Another worker takes the run over: what a reaper or a claim would do.
  const int64_t taken_version = SqlInt(
      "UPDATE {s}.runs SET version = version + 1, lease_owner = 'other-worker', "
      "lease_expires_at = now() + interval '1 hour' WHERE id = '" +
      id + "' AND status = 'running' RETURNING version");

  ASSERT_TRUE(daemon->WaitForLog("lost the run", 10s)) << daemon->Log();
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.zombie_rows"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + id + "'"), 0);
  EXPECT_EQ(RunColumn(id, "version"), std::to_string(taken_version));
  EXPECT_EQ(RunColumn(id, "lease_owner"), "other-worker");
  EXPECT_EQ(RunColumn(id, "status"), "running");

  // The other worker dies: its lease expires, the reaper hands the run back
  // and the daemon executes it again, this time committing once.
  Sql("UPDATE {s}.runs SET lease_expires_at = now() - interval '1 second' WHERE id = '" + id + "'");
  ASSERT_TRUE(WaitForStatusCount("completed", 1, 20s)) << StatusSummary() << daemon->Log();
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.zombie_rows"), 1);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE " + kStepCommits +
                   " "
                   "AND step = 'write_then_sleep'"),
            1);
  EXPECT_EQ(EventCount("lease_expired"), 1);
  daemon->Terminate();
  EXPECT_EQ(daemon->WaitExit(20s), 0);
}

// Retries back off per the policy, stop at max_attempts, and fail the run
// with the last error in its history.
TEST_F(DaemonE2E, RetriesBackOffThenFailTheRunWithTheLastError) {
  auto daemon = Daemon(Options(2));
  ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log();
  const std::string id = StartRun("e2e_retry");
  ASSERT_TRUE(WaitForStatusCount("failed", 1, 20s)) << StatusSummary();

  auto show = RunCommand(CairnBinary(),
                         {"show", id, "--json", "--database-url", url(), "--schema", schema()});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  Json run = Json::parse(show.out);
  EXPECT_EQ(run["status"], "failed");
  EXPECT_EQ(run["error"], "fail_always failed on attempt 3");
  EXPECT_EQ(run["error_code"], "boom") << show.out;
  EXPECT_EQ(run["cursor"], "boom");
  auto text =
      RunCommand(CairnBinary(), {"show", id, "--database-url", url(), "--schema", schema()});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("error_code          boom\n"), std::string::npos) << text.out;

  auto history = RunCommand(
      CairnBinary(), {"history", id, "--json", "--database-url", url(), "--schema", schema()});
  ASSERT_EQ(history.exit_code, 0) << history.err;
  std::vector<std::pair<std::string, int>> lifecycle;
  Json failed_value;
  const Json events = Json::parse(history.out)["events"];
  for (const auto& event : events) {
    if (event["kind"] == "context") continue;
    lifecycle.emplace_back(event["kind"].get<std::string>(), event["attempt"].get<int>());
    if (event["kind"] == "failed") failed_value = event["value"];
  }
  const std::vector<std::pair<std::string, int>> expected = {
      {"retried", 1}, {"retried", 2}, {"failed", 3}};
  EXPECT_EQ(lifecycle, expected) << history.out;
  EXPECT_EQ(failed_value["error"], "fail_always failed on attempt 3");
  EXPECT_EQ(failed_value["code"], "boom");

  // Spaced by at least the backoff, in database time: 100 ms, then 200 ms.
  const std::string gaps =
      Sql("SELECT string_agg(gap::text, ',' ORDER BY position) FROM ("
          "  SELECT position, round(extract(epoch FROM created_at - lag(created_at) "
          "    OVER (ORDER BY position)) * 1000) AS gap"
          "  FROM {s}.run_events WHERE run_id = '" +
          id +
          "' AND kind IN ('retried', 'failed')) g "
          "WHERE gap IS NOT NULL");
  auto comma = gaps.find(',');
  ASSERT_NE(comma, std::string::npos) << gaps;
  EXPECT_GE(std::stod(gaps.substr(0, comma)), 100) << gaps;
  EXPECT_GE(std::stod(gaps.substr(comma + 1)), 200) << gaps;
  EXPECT_EQ(CommitCount(), 0);

  daemon->Terminate();
  EXPECT_EQ(daemon->WaitExit(20s), 0);
}

// SIGTERM with steps in flight: they finish and commit, their runs are handed
// back (ready, attempt unchanged), nothing stays leased, and the exit is 0.
TEST_F(DaemonE2E, SigtermLetsStepsInFlightFinishAndReleasesEverything) {
  DaemonOptions options = Options(4);
  options.shutdown_grace = "10s";
  auto daemon = Daemon(options);
  ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log();
  StartRuns("e2e_shutdown", 8, {{"sleep_ms", 1000}});

  // Four slots each hold a run's stack lock: their steps are running.
  ASSERT_TRUE(PollUntil([&] { return StackLocksOfSlots(daemon->worker_id()) == 4; }, 10s, 10ms))
      << StatusSummary() << daemon->Log();
  const std::string in_flight =
      Sql("SELECT string_agg(id::text, ',' ORDER BY id) FROM {s}.runs WHERE status = 'running'");
  ASSERT_EQ(CountRuns("running"), 4);
  daemon->Terminate();
  ASSERT_EQ(daemon->WaitExit(15s), 0) << daemon->Log();

  EXPECT_EQ(LeasedRuns(), 0);
  EXPECT_EQ(CountRuns("ready"), 8) << StatusSummary();
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE attempt <> 0"), 0);
  // The four steps in flight finished and committed; nothing else ran.
  EXPECT_EQ(Sql("SELECT string_agg(run_id::text, ',' ORDER BY run_id) FROM {s}.run_events "
                "WHERE " +
                kStepCommits + " AND step = 'first'"),
            in_flight);
  EXPECT_EQ(CommitCount(), 4);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE cursor = 'second'"), 4);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE cursor = 'first'"), 4);
  EXPECT_EQ(EventCount("retried") + EventCount("failed"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.workers WHERE id = '" + daemon->worker_id() +
                   "' AND stopped_at IS NOT NULL"),
            1);
}

// A transactional step's writes commit exactly once, with the checkpoint;
// a step that fails after writing leaves nothing behind.
TEST_F(DaemonE2E, TransactionalWritesCommitExactlyOnceWithTheCheckpoint) {
  Sql("CREATE TABLE {s}.tx_rows (run_id text NOT NULL, attempt int NOT NULL)");
  auto daemon = Daemon(Options(4));
  ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log();
  const int kRuns = 50;
  StartRuns("e2e_tx", kRuns, {{"table", Table("tx_rows")}});
  const std::string rolled_back =
      StartRun("e2e_tx_rollback", {{"table", Table("tx_rows")}, {"fail_after_insert", true}});
  ASSERT_TRUE(WaitForStatusCount("completed", kRuns, 30s)) << StatusSummary();
  ASSERT_TRUE(WaitForStatusCount("failed", 1, 10s)) << StatusSummary();

  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.tx_rows"), kRuns);
  EXPECT_EQ(SqlInt("SELECT count(DISTINCT run_id) FROM {s}.tx_rows t JOIN {s}.runs r "
                   "ON r.id::text = t.run_id WHERE r.status = 'completed'"),
            kRuns);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE " + kStepCommits +
                   " "
                   "AND step = 'insert'"),
            kRuns);
  EXPECT_EQ(DoubleCommits(), 0);

  // Both attempts of the failing step inserted, and both rolled back.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.tx_rows WHERE run_id = '" + rolled_back + "'"), 0);
  EXPECT_EQ(Sql("SELECT string_agg(kind || ':' || attempt, ',' ORDER BY position) "
                "FROM {s}.run_events WHERE run_id = '" +
                rolled_back + "'"),
            "retried:1,failed:2");
  EXPECT_EQ(RunColumn(rolled_back, "error"), "tx_insert failed after its insert");

  daemon->Terminate();
  EXPECT_EQ(daemon->WaitExit(20s), 0);
}

// Transaction control belongs to cairn: a plugin's COMMIT or BEGIN fails the
// step with a clear error in its history, and the run goes on being sane.
TEST_F(DaemonE2E, TransactionControlFromAPluginFailsTheStep) {
  auto daemon = Daemon(Options(2));
  ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log();
  const std::string commit = StartRun("e2e_tx_sql", {{"sql", "COMMIT"}});
  const std::string begin =
      StartRun("e2e_tx_sql", {{"sql", "  begin isolation level serializable"}});
  const std::string fine = StartRun("e2e_tx_sql", {{"sql", "SELECT 1 AS one"}});
  ASSERT_TRUE(
      PollUntil([&] { return CountRuns("failed") == 2 && CountRuns("completed") == 1; }, 20s))
      << StatusSummary();

  for (const auto& [id, statement] : {std::pair{commit, "commit"}, std::pair{begin, "begin"}}) {
    SCOPED_TRACE(statement);
    EXPECT_EQ(RunColumn(id, "status"), "failed");
    const std::string error =
        Sql("SELECT lower(value->>'error') FROM {s}.run_events WHERE run_id = '" + id +
            "' AND kind = 'failed'");
    EXPECT_NE(error.find("transaction control"), std::string::npos) << error;
    EXPECT_NE(error.find(statement), std::string::npos) << error;
    EXPECT_NE(RunColumn(id, "error").find("transaction control"), std::string::npos);
    EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + id + "' AND " +
                     kStepCommits),
              0);
  }
  EXPECT_EQ(RunColumn(fine, "context->'rows'"), R"([{"one": 1}])");

  daemon->Terminate();
  EXPECT_EQ(daemon->WaitExit(20s), 0);
}

// A run whose stack lock another session holds is not executed until the
// lock is released; then it completes.
TEST_F(DaemonE2E, RunWhoseStackLockIsHeldWaitsForItsRelease) {
  auto daemon = Daemon(Options(2));
  ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log();

  Session holder(url());
  // Start the run and take its stack lock in one statement: no worker can
  // see the run before the lock is held.
  const std::string key_sql = "hashtextextended('" + schema() + ":stack:' || id::text, 0)";
  const std::string id =
      holder.Value("SELECT id, pg_advisory_lock(" + key_sql + ") FROM (SELECT \"" + schema() +
                   "\".start_run('e2e_one') AS id OFFSET 0) r");
  ASSERT_FALSE(id.empty());

  // The daemon claims it, finds the stack busy and hands it back, more than once.
  ASSERT_TRUE(PollUntil(
      [&] {
        std::string log = daemon->Log();
        size_t first = log.find("stack lock held by another session");
        return first != std::string::npos &&
               log.find("stack lock held by another session", first + 1) != std::string::npos;
      },
      15s))
      << daemon->Log();
  EXPECT_NE(RunColumn(id, "status"), "completed");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + id + "'"), 0);
  EXPECT_EQ(RunColumn(id, "attempt"), "0");

  holder.Value("SELECT pg_advisory_unlock(" + key_sql + ") FROM (SELECT '" + id +
               "'::uuid AS id) r");
  ASSERT_TRUE(WaitForStatusCount("completed", 1, 10s)) << StatusSummary() << daemon->Log();
  EXPECT_EQ(
      SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + id + "' AND " + kStepCommits),
      1);
  EXPECT_EQ(RunColumn(id, "attempt"), "0");

  daemon->Terminate();
  EXPECT_EQ(daemon->WaitExit(20s), 0);
}

// SIGHUP gives a daemon with a step in flight other queues, more slots and a
// new workflow, through a drop-in: the new runs are served while the old
// step still runs, that step's run completes exactly once, and a broken
// drop-in changes nothing.
TEST_F(DaemonE2E, SighupReloadsQueuesSlotsAndWorkflowsWithoutDroppingARun) {
  Sql("CREATE TABLE {s}.writes (run_id text NOT NULL, attempt int NOT NULL)");
  auto daemon = Daemon(Options(1));
  ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log();
  const auto reaches = [&](const std::string& run, const std::string& status,
                           std::chrono::milliseconds timeout) {
    return PollUntil([&] { return RunColumn(run, "status") == status; }, timeout);
  };
  const std::string in_flight =
      StartRun("e2e_crash", {{"sleep_ms", 6000}, {"table", Table("writes")}});
  ASSERT_TRUE(reaches(in_flight, "running", 20s)) << daemon->Log();

  TempDir extra("cairn-reload");
  const std::string added = extra.Write("added.yaml",
                                        "workflows:\n  - name: e2e_added\n    version: 1\n"
                                        "    steps:\n      - name: only\n        run: noop\n");
  const std::string drop_ins = daemon->config_path() + ".d";
  ASSERT_EQ(::mkdir(drop_ins.c_str(), 0700), 0);
  const std::string drop_in = drop_ins + "/50-reload.yaml";
  const auto write = [&](const std::string& text) {
    FILE* file = std::fopen(drop_in.c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fputs(text.c_str(), file);
    std::fclose(file);
  };
  write("worker:\n  queues: [default, other]\n  concurrency: 3\nworkflows:\n  paths: [" +
        SourceDir() + "/tests/workflows/e2e.yaml, " + added + "]\n");
  daemon->Signal(SIGHUP);
  ASSERT_TRUE(daemon->WaitForLog("SIGHUP: reloaded", 20s)) << daemon->Log();
  // The drop-in adds one workflow to those the daemon started with, whatever
  // tests/workflows/e2e.yaml holds today.
  const std::regex started(R"(1 slots, (\d+) definitions)");
  std::smatch match;
  const std::string log = daemon->Log();
  ASSERT_TRUE(std::regex_search(log, match, started)) << log;
  const int definitions = std::stoi(match[1].str());
  EXPECT_NE(log.find("queues [default, other], 3 slots, " + std::to_string(definitions + 1) +
                     " definitions"),
            std::string::npos)
      << log;

  // Served at once, while the one slot of before is still busy.
  const std::string added_run = StartRun("e2e_added");
  const std::string other_queue =
      Sql("SELECT {s}.start_run('e2e_one', '{}'::jsonb, NULL, 'other')");
  EXPECT_TRUE(reaches(added_run, "completed", 20s)) << daemon->Log();
  EXPECT_TRUE(reaches(other_queue, "completed", 20s)) << daemon->Log();
  EXPECT_EQ(RunColumn(in_flight, "status"), "running") << "the reload waited for the step";
  EXPECT_EQ(Sql("SELECT concurrency || ' ' || array_to_string(queues, ',') FROM {s}.workers "
                "WHERE id = '" +
                daemon->worker_id() + "'"),
            "3 default,other");

  // The step in flight finishes and its run completes, once.
  ASSERT_TRUE(reaches(in_flight, "completed", 30s)) << daemon->Log();
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.writes"), 1);
  EXPECT_EQ(DoubleCommits(), 0);

  // A broken drop-in: the daemon says so and goes on as it was.
  write("worker:\n  concurrency: 0\n");
  daemon->Signal(SIGHUP);
  ASSERT_TRUE(daemon->WaitForLog("configuration not reloaded", 20s)) << daemon->Log();
  EXPECT_NE(daemon->Log().find("50-reload.yaml:2: worker.concurrency"), std::string::npos)
      << daemon->Log();
  const std::string after_broken = StartRun("e2e_added");
  EXPECT_TRUE(reaches(after_broken, "completed", 20s)) << daemon->Log();

  std::remove(drop_in.c_str());
  ::rmdir(drop_ins.c_str());
  daemon->Terminate();
  EXPECT_EQ(daemon->WaitExit(30s), 0) << daemon->Log();
}

}  // namespace
}  // namespace cairn::test
