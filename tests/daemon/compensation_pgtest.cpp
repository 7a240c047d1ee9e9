// Compensation against the harness's real PostgreSQL server, with real
// `cairn run` daemons and the `cairn` CLI: a failed, timed-out or cancelled
// run undoes its committed steps in reverse order, each compensation
// committed once, even across a kill -9. Workflows:
// tests/workflows/compensation.yaml.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "daemon_fixture.hpp"
#include "history_sql.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

class Compensation : public DaemonTest {
 protected:
  Compensation() : DaemonTest("tests/workflows/compensation.yaml") {}

  void SetUp() override {
    DaemonTest::SetUp();
    // id orders the journal: which steps and compensations committed, when.
    Sql("CREATE TABLE {s}.journal (id bigserial PRIMARY KEY, run_id text NOT NULL, "
        "step text NOT NULL, attempt int NOT NULL)");
    Sql("CREATE TABLE {s}.writes (run_id text NOT NULL, attempt int NOT NULL)");
    Sql("CREATE TABLE {s}.gate (open boolean NOT NULL); INSERT INTO {s}.gate VALUES (false)");
  }

  // A short lease, so that the run of a killed daemon is recovered within
  // the test's timeouts.
  DaemonOptions Options(int concurrency) const override {
    DaemonOptions o = DaemonTest::Options(concurrency);
    o.lease = "2s";
    return o;
  }

  // The input every workflow of compensation.yaml reads.
  Json Input(Json extra = Json::object()) const {
    Json input = {{"journal", schema() + ".journal"},
                  {"table", schema() + ".writes"},
                  {"gate", schema() + ".gate"}};
    input.update(extra);
    return input;
  }

  // The steps that committed a journal row for the run, in commit order.
  std::string Journal(const std::string& id) const {
    return Sql(
        "SELECT coalesce(string_agg(step, ' ' ORDER BY id), '') FROM {s}.journal "
        "WHERE run_id = '" +
        id + "'");
  }

  // The run's lifecycle events (no context events), in order.
  std::string Lifecycle(const std::string& id) const {
    return Sql(
        "SELECT string_agg(kind || coalesce('(' || step || ')', ''), ' ' ORDER BY position) "
        "FROM {s}.run_events WHERE run_id = '" +
        id + "' AND kind <> 'context'");
  }

  bool WaitForEvent(const std::string& id, const std::string& kind,
                    std::chrono::milliseconds timeout = 20s) const {
    return PollUntil([&] { return RunEventCount(id, kind) > 0; }, timeout, 20ms);
  }
};

// A cancel that races a step in flight wins: the step's transactional row
// rolls back, its checkpoint is refused, and the compensations of the steps
// that committed run in reverse order before the run ends cancelled.
TEST_F(Compensation, CancelDuringAStepInFlightUnwindsInReverseOrder) {
  auto daemon = StartDaemon(2);
  const std::string id = StartRun("comp_cancel", Input({{"sleep_ms", 2500}}));
  // b committed, so c is sleeping inside its transaction with its row written.
  ASSERT_TRUE(PollUntil([&] { return Journal(id) == "a b"; }, 20s)) << daemon->Log();
  std::this_thread::sleep_for(500ms);
  ASSERT_EQ(RunColumn(id, "status"), "running");

  auto cancel = Cli({"cancel", id, "--reason", "customer changed their mind"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.out << cancel.err;
  EXPECT_NE(cancel.out.find("compensations run now"), std::string::npos) << cancel.out;
  EXPECT_EQ(RunColumn(id, "final_status"), "cancelled");

  ASSERT_TRUE(WaitForStatus(id, "cancelled")) << Lifecycle(id) << daemon->Log();
  EXPECT_EQ(Journal(id), "a b undo_b undo_a");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.writes"), 0) << "c's row must roll back";
  EXPECT_EQ(Sql("SELECT string_agg(step || '>' || (value->>'for'), ' ' ORDER BY position) "
                "FROM {s}.run_events WHERE run_id = '" +
                id + "' AND kind = 'compensated'"),
            "undo_b>b undo_a>a");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + id + "' AND " +
                   kStepCommits + " AND step = 'c'"),
            0);
  EXPECT_EQ(RunEventCount(id, "compensations_done"), 1);
  EXPECT_EQ(RunColumn(id, "compensations"), "[]");
  EXPECT_EQ(RunColumn(id, "cancel_reason"), "customer changed their mind");
  EXPECT_NE(RunColumn(id, "finished_at"), "");

  // The step in flight finished after the cancel: it changed nothing.
  std::this_thread::sleep_for(2500ms);
  EXPECT_EQ(RunColumn(id, "status"), "cancelled");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.writes"), 0);
  EXPECT_EQ(Journal(id), "a b undo_b undo_a");

  auto again = Cli({"cancel", id});
  EXPECT_EQ(again.exit_code, 5) << again.out << again.err;
  Stop(*daemon);
}

// A step that fails for good unwinds the steps before it; the run ends
// failed, with its error, and cannot be retried forward.
TEST_F(Compensation, FailureForGoodRunsTheCompensationsThenEndsFailed) {
  auto daemon = StartDaemon(2);
  const std::string id = StartRun("comp_fail", Input());
  ASSERT_TRUE(WaitForStatus(id, "failed")) << Lifecycle(id) << daemon->Log();
  EXPECT_EQ(Journal(id), "a b undo_b undo_a");
  EXPECT_EQ(Lifecycle(id),
            "step_committed(a) step_committed(b) failed(c) compensating(c) compensated(undo_b) "
            "compensated(undo_a) compensations_done(undo_a)");
  EXPECT_EQ(RunColumn(id, "final_status"), "failed");
  EXPECT_EQ(RunColumn(id, "error"), "fail_permanent never succeeds");
  EXPECT_EQ(RunColumn(id, "cursor"), "c");

  auto retry = Cli({"retry", id});
  EXPECT_EQ(retry.exit_code, 4) << retry.out << retry.err;
  EXPECT_NE(retry.err.find("compensations undid"), std::string::npos) << retry.err;
  EXPECT_EQ(RunColumn(id, "status"), "failed");
  Stop(*daemon);
}

// One compensation shared by two steps learns which of them it undoes
// (ctx.compensates(), ABI 1.4), in step processes and on threads alike;
// ctx.step() names the workflow step forward and the compensation's plugin
// step when unwinding.
TEST_F(Compensation, ASharedCompensationLearnsWhichStepItUndoes) {
  for (const std::string isolation : {"process", "thread"}) {
    DaemonOptions options = Options(2);
    options.isolation = isolation;
    auto daemon = std::make_unique<DaemonProcess>(options);
    ASSERT_TRUE(daemon->StartAndWaitReady()) << isolation << daemon->Log();
    const std::string id = StartRun("comp_shared", Input());
    ASSERT_TRUE(WaitForStatus(id, "failed")) << isolation << Lifecycle(id) << daemon->Log();
    EXPECT_EQ(Journal(id), "a>none b>none undo_shared>b undo_shared>a") << isolation;
    EXPECT_EQ(Sql("SELECT string_agg(step || '>' || (value->>'for'), ' ' ORDER BY position) "
                  "FROM {s}.run_events WHERE run_id = '" +
                  id + "' AND kind = 'compensated'"),
              "undo_shared>b undo_shared>a")
        << isolation;
    Stop(*daemon);
  }
}

// A compensation that fails for good (after its retries) ends the run in
// compensation_failed with the compensations still owed; once the cause is
// fixed, `cairn retry` resumes unwinding where it stopped.
TEST_F(Compensation, FailedCompensationIsVisibleAndRetryResumesIt) {
  auto daemon = StartDaemon(2);
  const std::string id = StartRun("comp_gated", Input());
  ASSERT_TRUE(WaitForStatus(id, "compensation_failed")) << Lifecycle(id) << daemon->Log();
  EXPECT_EQ(Journal(id), "a b");
  EXPECT_EQ(RunEventCount(id, "retried"), 1);
  EXPECT_EQ(RunEventCount(id, "compensation_failed"), 1);
  EXPECT_EQ(RunColumn(id, "compensations"), R"(["a", "b"])");
  EXPECT_EQ(RunColumn(id, "final_status"), "failed");
  EXPECT_NE(RunColumn(id, "error").find("gate"), std::string::npos) << RunColumn(id, "error");
  EXPECT_NE(RunColumn(id, "finished_at"), "");

  auto show = Cli({"show", id, "--json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  Json shown = Json::parse(show.out);
  EXPECT_EQ(shown["status"], "compensation_failed");
  EXPECT_EQ(shown["compensations"], Json::array({"a", "b"}));
  EXPECT_EQ(shown["error_code"], "gate_closed") << show.out;
  auto listed = Cli({"list", "--status", "compensation_failed"});
  EXPECT_NE(listed.out.find(id), std::string::npos) << listed.out << listed.err;

  Sql("UPDATE {s}.gate SET open = true");
  auto retry = Cli({"retry", id});
  ASSERT_EQ(retry.exit_code, 0) << retry.out << retry.err;
  EXPECT_NE(retry.out.find("compensations"), std::string::npos) << retry.out;
  ASSERT_TRUE(WaitForStatus(id, "failed")) << Lifecycle(id) << daemon->Log();
  EXPECT_EQ(Journal(id), "a b undo_gated undo_a");
  EXPECT_EQ(RunColumn(id, "compensations"), "[]");
  // Failed again once unwound: the code is the step failure's again.
  auto failed = Cli({"show", id, "--json"});
  ASSERT_EQ(failed.exit_code, 0) << failed.err;
  EXPECT_EQ(Json::parse(failed.out)["error_code"], "permanent") << failed.out;
  Stop(*daemon);
}

// kill -9 while a compensation is in flight: its transaction rolls back with
// the dead session, the lease expires, and another daemon finishes the
// unwinding. Each compensation commits exactly once.
TEST_F(Compensation, KillNineDuringACompensationCompletesAfterRecovery) {
  auto victim = StartDaemon(2);
  const std::string id = StartRun("comp_slow", Input({{"sleep_ms", 3000}}));
  ASSERT_TRUE(WaitForEvent(id, "compensating")) << Lifecycle(id) << victim->Log();
  // tx_insert_slow has written its row and sleeps before its commit.
  ASSERT_TRUE(PollUntil(
      [&] {
        return SqlInt(
                   "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                   "WHERE c.relname = 'writes' AND c.relnamespace = '" +
                   schema() + "'::regnamespace AND l.mode = 'RowExclusiveLock'") > 0;
      },
      10s))
      << Lifecycle(id);
  victim->Kill();
  ASSERT_EQ(victim->WaitExit(10s), 128 + SIGKILL);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.writes"), 0);
  EXPECT_EQ(RunEventCount(id, "compensated"), 0);

  auto rescuer = StartDaemon(2);
  ASSERT_TRUE(WaitForStatus(id, "failed", 30s)) << Lifecycle(id) << rescuer->Log();
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.writes"), 1) << "committed exactly once";
  EXPECT_EQ(Journal(id), "a b undo_a");
  EXPECT_EQ(Sql("SELECT string_agg(step, ' ' ORDER BY position) FROM {s}.run_events "
                "WHERE run_id = '" +
                id + "' AND kind = 'compensated'"),
            "tx_insert_slow undo_a");
  EXPECT_EQ(RunEventCount(id, "lease_expired"), 1);
  EXPECT_EQ(RunEventCount(id, "compensations_done"), 1);
  Stop(*rescuer);
}

// A wait that times out without a timeout step fails the run, which unwinds;
// a cancel of a waiting run (SQL) unwinds it and ends it cancelled.
TEST_F(Compensation, ExpiredWaitAndCancelledWaitBothUnwind) {
  auto daemon = StartDaemon(2);
  const std::string timed_out = StartRun("comp_wait", Input({{"timeout_ms", 300}}));
  const std::string cancelled = StartRun("comp_wait", Input({{"timeout_ms", 600000}}));
  ASSERT_TRUE(WaitForStatus(timed_out, "failed")) << Lifecycle(timed_out) << daemon->Log();
  EXPECT_EQ(Journal(timed_out), "a undo_a");
  EXPECT_EQ(RunColumn(timed_out, "final_status"), "failed");
  EXPECT_NE(RunColumn(timed_out, "error").find("timed out"), std::string::npos);
  // The history and cairn show carry the failure's code, as for a step's.
  EXPECT_EQ(
      Lifecycle(timed_out),
      "step_committed(a) step_committed(wait) waiting(wait) wait_expired(after) failed(after) "
      "compensating(after) compensated(undo_a) compensations_done(undo_a)");
  auto shown = Cli({"show", timed_out, "--json"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(Json::parse(shown.out)["error_code"], "wait_timeout") << shown.out;

  ASSERT_TRUE(WaitForStatus(cancelled, "waiting")) << daemon->Log();
  EXPECT_EQ(Sql("SELECT outcome || '/' || run_status || '/' || waits_cancelled FROM "
                "{s}.cancel_run('" +
                cancelled + "', 'test')"),
            "cancelled/compensating/1");
  const std::string second = Sql("SELECT outcome FROM {s}.cancel_run('" + cancelled + "')");
  EXPECT_TRUE(second == "compensating" || second == "already_finished") << second;
  ASSERT_TRUE(WaitForStatus(cancelled, "cancelled")) << Lifecycle(cancelled) << daemon->Log();
  EXPECT_EQ(Journal(cancelled), "a undo_a");
  EXPECT_EQ(RunEventCount(cancelled, "cancelled"), 1);
  Stop(*daemon);
}

// A transactional step whose outcome cannot be honoured (a jump to a step
// the workflow lacks) fails for good with its own writes rolled back, so
// unwinding undoes exactly the steps that committed.
TEST_F(Compensation, RefusedOutcomeRollsBackTheStepsWritesAndUnwinds) {
  auto daemon = StartDaemon(2);
  const std::string id = StartRun("comp_refused", Input({{"jump_after_insert", "nowhere"}}));
  ASSERT_TRUE(WaitForStatus(id, "failed")) << Lifecycle(id) << daemon->Log();
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.writes"), 0) << "b's row must roll back";
  EXPECT_EQ(Journal(id), "a undo_a");
  EXPECT_NE(RunColumn(id, "error").find("nowhere"), std::string::npos) << RunColumn(id, "error");
  EXPECT_EQ(Sql("SELECT value->>'code' FROM {s}.run_events WHERE run_id = '" + id +
                "' AND kind = 'failed'"),
            "unknown_step");
  Stop(*daemon);
}

// A cancel of a run that used attempts of a step (waiting out its backoff)
// gives its compensations their own full budget and drops the step's error.
TEST_F(Compensation, CancelAfterFailedAttemptsGivesCompensationsAFreshBudget) {
  auto daemon = StartDaemon(2);
  const std::string id = StartRun("comp_backoff", Input());
  ASSERT_TRUE(PollUntil([&] { return RunColumn(id, "attempt") == "1"; }, 20s))
      << Lifecycle(id) << daemon->Log();
  ASSERT_EQ(RunColumn(id, "status"), "ready");
  Stop(*daemon);  // nobody may start the compensation before the checks below
  EXPECT_EQ(Sql("SELECT run_status FROM {s}.cancel_run('" + id + "', 'test')"), "compensating");
  EXPECT_EQ(RunColumn(id, "attempt"), "0");
  EXPECT_EQ(RunColumn(id, "error"), "");

  // The gate is closed: both of the compensation's attempts fail.
  daemon = StartDaemon(2);
  ASSERT_TRUE(WaitForStatus(id, "compensation_failed")) << Lifecycle(id) << daemon->Log();
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + id +
                   "' AND kind = 'retried' AND step = 'undo_gated'"),
            1);
  EXPECT_EQ(RunColumn(id, "attempt"), "2");
  Stop(*daemon);
}

// Retention deletes old finished runs, but not one whose compensation failed:
// it still owes compensations an operator has to see through.
TEST_F(Compensation, RetentionKeepsRunsThatStillOweCompensations) {
  auto daemon = StartDaemon(2);
  const std::string owing = StartRun("comp_gated", Input());
  const std::string done = StartRun("comp_fail", Input());
  ASSERT_TRUE(WaitForStatus(owing, "compensation_failed")) << daemon->Log();
  ASSERT_TRUE(WaitForStatus(done, "failed")) << daemon->Log();
  Stop(*daemon);
  Sql("UPDATE {s}.runs SET finished_at = now() - interval '30 days'");

  const RetentionResult deleted = store::DeleteFinished(conn(), std::chrono::hours(24));
  EXPECT_EQ(deleted.runs, 1);
  EXPECT_EQ(RunColumn(done, "status"), "");
  EXPECT_EQ(RunColumn(owing, "status"), "compensation_failed");
  EXPECT_GT(RunEventCount(owing, "compensation_failed"), 0);
}

}  // namespace
}  // namespace cairn::test
