// Whole-run deadlines in the store, against a real PostgreSQL: start_run
// fixes deadline_at in database time (its old calls unchanged), the
// sweeper's query fails ready and waiting runs past it, and a checkpoint
// committed after it lands but ends the run with code deadline_exceeded.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "errors.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr const char* kPast = "2000-01-01 00:00:00+00";
constexpr const char* kFuture = "2999-01-01 00:00:00+00";

class StoreDeadlines : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (HasFatalFailure()) return;
    Sql("INSERT INTO {s}.workflow_definitions (hash, workflow, version, first_step, definition) "
        "VALUES ('h1', 'wf', 1, 's1', '{}'), "
        "('h2', 'wf_deadline', 1, 's1', '{\"deadline_ms\": 60000}')");
  }

  // deadline_at - created_at, as interval text.
  std::string DeadlineAfterStart(const std::string& id) const {
    return RunColumn(id, "deadline_at - created_at");
  }

  cairn::Run CreateRunWithDeadline(const std::string& deadline_at, const std::string& run_at = "") {
    NewRun run = MakeRun("wf");
    run.deadline_at = deadline_at;
    if (!run_at.empty()) run.run_at = run_at;
    return CreateRun(run);
  }

  // Setting a run up commits checkpoints, which a passed deadline would
  // judge: runs start with a far deadline that this moves into the past.
  void PassDeadline(const std::string& id) {
    Sql("UPDATE {s}.runs SET deadline_at = '" + std::string(kPast) + "' WHERE id = '" + id + "'");
  }

  int64_t FailedEvents(const std::string& id, const std::string& code) const {
    return SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + id +
                  "' AND kind = 'failed' AND value->>'code' = '" + code + "'");
  }

  std::vector<store::DeadlineRun> Expire() {
    return conn().Transact([&](store::Tx& tx) { return store::ExpireDeadlines(tx, 100); });
  }

  // A checkpoint of a running run at its current version, going on at s2.
  Checkpoint Next(const std::string& run_id, RunStatus status) {
    cairn::Run run = *conn().Transact([&](store::Tx& tx) { return store::GetRun(tx, run_id); });
    Checkpoint c;
    c.run_id = run_id;
    c.expected_version = run.version;
    c.context = {{"done", "s1"}};
    c.cursor = "s2";
    c.status = status;
    c.lease_owner = "worker-1";
    c.compensations = run.compensations;
    return c;
  }

  CheckpointResult Save(const Checkpoint& c, const std::vector<RunEvent>& events = {}) {
    return conn().Transact([&](store::Tx& tx) { return store::SaveCheckpoint(tx, c, events); });
  }
};

TEST_F(StoreDeadlines, StartRunKeepsItsOldCallsAndFixesTheDeadlineInDatabaseTime) {
  // Existing callers, positional and named, start runs without a deadline.
  const std::string plain = Sql("SELECT {s}.start_run('wf')");
  const std::string positional =
      Sql("SELECT {s}.start_run('wf', '{}'::jsonb, NULL, NULL, 0, NULL, 'default', NULL)");
  const std::string named = Sql("SELECT {s}.start_run('wf', p_queue => 'other')");
  for (const auto& id : {plain, positional, named}) EXPECT_EQ(RunColumn(id, "deadline_at"), "");

  // An explicit deadline counts from the start.
  EXPECT_EQ(DeadlineAfterStart(Sql("SELECT {s}.start_run('wf', p_deadline => '30 minutes')")),
            "00:30:00");
  // The definition's deadline applies when the start gives none, and yields to one it gives.
  EXPECT_EQ(DeadlineAfterStart(Sql("SELECT {s}.start_run('wf_deadline')")), "00:01:00");
  EXPECT_EQ(DeadlineAfterStart(Sql("SELECT {s}.start_run('wf_deadline', p_deadline => '5m')")),
            "00:05:00");
  // A delayed start's deadline counts from when it is due.
  const std::string delayed =
      Sql("SELECT {s}.start_run('wf', p_run_at => now() + interval '1 hour', "
          "p_deadline => '10 minutes')");
  EXPECT_EQ(RunColumn(delayed, "deadline_at - run_at"), "00:10:00");

  // The store's StartRun passes it through.
  store::StartRequest request;
  request.workflow = "wf";
  request.deadline = 90s;
  const std::string started =
      conn().Transact([&](store::Tx& tx) { return store::StartRun(tx, request).id; });
  EXPECT_EQ(DeadlineAfterStart(started), "00:01:30");
  const cairn::Run run =
      *conn().Transact([&](store::Tx& tx) { return store::GetRun(tx, started); });
  EXPECT_TRUE(run.deadline_at.has_value());
}

TEST_F(StoreDeadlines, StartRunRefusesADeadlineThatIsNotLongerThanZero) {
  for (const char* deadline : {"0", "-5 minutes"}) {
    try {
      Sql(std::string("SELECT {s}.start_run('wf', p_deadline => '") + deadline + "')");
      ADD_FAILURE() << "start_run accepted the deadline " << deadline;
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), HasSubstr("the run's deadline must be longer than 0"));
    }
  }
  store::StartRequest request;
  request.workflow = "wf";
  request.deadline = 0ms;
  try {
    conn().Transact([&](store::Tx& tx) { return store::StartRun(tx, request); });
    ADD_FAILURE() << "StartRun accepted a deadline of 0";
  } catch (const DatabaseError& e) {
    EXPECT_EQ(e.sqlstate(), "22023");
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 0);
}

TEST_F(StoreDeadlines, ExpireDeadlinesFailsReadyAndWaitingRunsPastTheirDeadlineOnly) {
  // Sleeping (due far later) and past its deadline, nothing to undo: failed.
  const cairn::Run sleeping = CreateRunWithDeadline(kPast, kFuture);
  // Waiting with a committed compensation: unwinds, its wait cancelled.
  const cairn::Run waiting = CreateRunWithDeadline(kFuture);
  CommitStatus(waiting.id, RunStatus::kRunning);
  SaveWait(waiting.id, "payment:" + waiting.id);
  Checkpoint parked = Next(waiting.id, RunStatus::kWaiting);
  parked.compensations = Json::array({"s1"});
  Save(parked);
  PassDeadline(waiting.id);
  // Untouched: running (its checkpoint judges it), not yet due, no deadline, finished.
  const cairn::Run running = CreateRunWithDeadline(kFuture);
  CommitStatus(running.id, RunStatus::kRunning);
  PassDeadline(running.id);
  const cairn::Run later = CreateRunWithDeadline(kFuture);
  const cairn::Run none = CreateRun("wf");
  const cairn::Run finished = CreateRunWithDeadline(kFuture);
  CommitStatus(finished.id, RunStatus::kCompleted);
  PassDeadline(finished.id);

  const auto failed = Expire();
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(RunColumn(sleeping.id, "status"), "failed");
  EXPECT_EQ(RunColumn(sleeping.id, "finished_at IS NOT NULL"), "t");
  EXPECT_THAT(RunColumn(sleeping.id, "error"),
              HasSubstr("the run passed its deadline of 2000-01-01"));
  EXPECT_EQ(FailedEvents(sleeping.id, "deadline_exceeded"), 1);

  EXPECT_EQ(RunColumn(waiting.id, "status"), "compensating");
  EXPECT_EQ(RunColumn(waiting.id, "final_status"), "failed");
  EXPECT_EQ(RunColumn(waiting.id, "finished_at IS NULL"), "t");
  EXPECT_EQ(RunColumn(waiting.id, "run_at <= now()"), "t");
  EXPECT_EQ(FailedEvents(waiting.id, "deadline_exceeded"), 1);
  EXPECT_EQ(Sql("SELECT string_agg(kind, ' ' ORDER BY position) FROM {s}.run_events "
                "WHERE run_id = '" +
                waiting.id + "' AND kind IN ('failed', 'compensating')"),
            "failed compensating");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records WHERE run_id = '" + waiting.id +
                   "' AND status = 'CANCELLED' AND finished_at IS NOT NULL"),
            1);
  // A late signal finds the wait closed and changes nothing.
  EXPECT_EQ(conn().Transact([&](store::Tx& tx) {
    return store::Signal(tx, "payment:" + waiting.id, Json::object());
  }),
            store::SignalOutcome::kCancelled);
  EXPECT_EQ(RunColumn(waiting.id, "status"), "compensating");

  EXPECT_EQ(RunColumn(running.id, "status"), "running");
  EXPECT_EQ(RunColumn(later.id, "status"), "ready");
  EXPECT_EQ(RunColumn(none.id, "status"), "ready");
  EXPECT_EQ(RunColumn(finished.id, "status"), "completed");
  EXPECT_TRUE(Expire().empty()) << "a second pass finds nothing";
}

TEST_F(StoreDeadlines, ACheckpointAfterTheDeadlineLandsButEndsTheRun) {
  const cairn::Run run = CreateRunWithDeadline(kFuture);
  CommitStatus(run.id, RunStatus::kRunning);
  PassDeadline(run.id);
  Checkpoint step = Next(run.id, RunStatus::kRunning);
  step.compensations = Json::array({"s1"});
  RunEvent committed;
  committed.run_id = run.id;
  committed.step = "s1";
  committed.kind = "step_committed";
  const CheckpointResult result = Save(step, {committed});
  EXPECT_EQ(result.status, RunStatus::kCompensating);
  // The step that ran committed, so that its compensation undoes it.
  EXPECT_EQ(RunColumn(run.id, "context->>'done'"), "s1");
  EXPECT_EQ(RunColumn(run.id, "compensations"), "[\"s1\"]");
  EXPECT_EQ(RunColumn(run.id, "final_status"), "failed");
  EXPECT_EQ(RunColumn(run.id, "lease_owner"), "");
  EXPECT_THAT(RunColumn(run.id, "error"), HasSubstr("deadline"));
  EXPECT_EQ(Sql("SELECT string_agg(kind || ':' || coalesce(value->>'code', ''), ' ' "
                "ORDER BY position) FROM {s}.run_events WHERE run_id = '" +
                run.id + "'"),
            "step_committed: failed:deadline_exceeded compensating:");
  // Compensations are not held to the deadline.
  Checkpoint compensated = Next(run.id, RunStatus::kRunning);
  compensated.final_status = RunStatus::kFailed;
  compensated.compensations = Json::array();
  EXPECT_EQ(Save(compensated).status, RunStatus::kRunning);
}

TEST_F(StoreDeadlines, ACompletionAfterTheDeadlineFailsAndAFailureKeepsItsOwnCode) {
  const cairn::Run completing = CreateRunWithDeadline(kFuture);
  CommitStatus(completing.id, RunStatus::kRunning);
  PassDeadline(completing.id);
  Checkpoint complete = Next(completing.id, RunStatus::kCompleted);
  complete.output = Json{{"shipped", true}};
  EXPECT_EQ(Save(complete).status, RunStatus::kFailed);
  EXPECT_EQ(RunColumn(completing.id, "output"), "");
  EXPECT_EQ(RunColumn(completing.id, "finished_at IS NOT NULL"), "t");
  EXPECT_EQ(FailedEvents(completing.id, "deadline_exceeded"), 1);

  const cairn::Run failing = CreateRunWithDeadline(kFuture);
  CommitStatus(failing.id, RunStatus::kRunning);
  PassDeadline(failing.id);
  Checkpoint fail = Next(failing.id, RunStatus::kFailed);
  fail.error = "card declined";
  EXPECT_EQ(Save(fail).status, RunStatus::kFailed);
  EXPECT_EQ(RunColumn(failing.id, "error"), "card declined");
  EXPECT_EQ(FailedEvents(failing.id, "deadline_exceeded"), 0);

  // Before the deadline nothing changes.
  const cairn::Run early = CreateRunWithDeadline(kFuture);
  CommitStatus(early.id, RunStatus::kRunning);
  EXPECT_EQ(Save(Next(early.id, RunStatus::kCompleted)).status, RunStatus::kCompleted);
}

TEST_F(StoreDeadlines, LockStackAndLoadRunSaysWhetherTheDeadlinePassed) {
  const cairn::Run past = CreateRunWithDeadline(kPast);
  const cairn::Run future = CreateRunWithDeadline(kFuture);
  const cairn::Run none = CreateRun("wf");
  auto load = [&](const std::string& id) {
    store::StackLockedRun locked = store::LockStackAndLoadRun(conn(), id);
    conn().UnlockStack(id);
    return locked.run;
  };
  EXPECT_TRUE(load(past.id)->past_deadline);
  EXPECT_FALSE(load(future.id)->past_deadline);
  EXPECT_FALSE(load(none.id)->past_deadline);
  EXPECT_EQ(load(past.id)->run.deadline_at.value_or("").substr(0, 10), "2000-01-01");
}

}  // namespace
}  // namespace cairn::test
