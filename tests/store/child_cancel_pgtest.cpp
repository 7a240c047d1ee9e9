// Children cancelled with their parent, as they asked when they started
// (schema 11), against a real PostgreSQL: every way a run fails cancels the
// children that asked for it (cancel_when_parent_fails) in the statement that
// fails it, and the commit that resumes a parent from a wait for the first
// child cancels the other children of that wait that asked for it
// (cancel_when_first_done). Children that asked for nothing keep running.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>

#include "store_fixture.hpp"

namespace cairn::test {
namespace {

constexpr ChildOptions kWhenParentFails{true, false};
constexpr ChildOptions kWhenFirstDone{false, true};
constexpr ChildOptions kNothing{false, false};

class StoreChildCancel : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (HasFatalFailure()) return;
    Sql("INSERT INTO {s}.workflow_definitions (hash, workflow, version, first_step, definition) "
        "VALUES ('h1', 'orders', 1, 'reserve', '{}'), ('h2', 'sub', 1, 'work', '{}')");
  }

  std::string StartChild(const std::string& parent, ChildOptions options,
                         const std::optional<std::string>& wait_key = std::nullopt) {
    return conn().Transact([&](store::Tx& tx) {
      return store::StartChildRun(tx, parent, wait_key, ChildStart{"sub", Json::object(), options});
    });
  }

  // A wait of the parent for children (the parent's status becomes waiting).
  void WaitForChildren(const std::string& parent, const std::string& key, ChildWait mode,
                       std::optional<int64_t> timeout_ms = std::nullopt) {
    NewWait wait;
    wait.correlation_key = key;
    wait.run_id = parent;
    wait.event = "children";
    wait.continuation_step = "ship";
    wait.timeout_ms = timeout_ms;
    wait.children = mode;
    conn().Transact([&](store::Tx& tx) { store::SaveWait(tx, wait); });
  }

  int64_t Events(const std::string& run, const std::string& kind) const {
    return SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + run + "' AND kind = '" +
                  kind + "'");
  }

  std::string ChildrenCancelled(const std::string& parent) const {
    return Sql(
        "SELECT string_agg(value::text, ' ' ORDER BY position) FROM {s}.run_events "
        "WHERE run_id = '" +
        parent + "' AND kind = 'children_cancelled'");
  }

  // A parent with three children: one that asked to be cancelled if it
  // fails (itself the parent of a child that asked for nothing), one that
  // asked for nothing, and one that asked only for a `first` wait.
  struct Family {
    std::string parent, asking, grandchild, plain, first_only;
  };
  Family MakeFamily() {
    Family f;
    f.parent = CreateRunningRun("orders").id;
    f.asking = StartChild(f.parent, kWhenParentFails);
    f.grandchild = StartChild(f.asking, kNothing);
    f.plain = StartChild(f.parent, kNothing);
    f.first_only = StartChild(f.parent, kWhenFirstDone);
    return f;
  }

  void ExpectOnlyTheAskingBranchCancelled(const Family& f) {
    EXPECT_EQ(RunColumn(f.asking, "status"), "cancelled");
    EXPECT_EQ(RunColumn(f.asking, "cancel_reason"), "parent run " + f.parent + " failed");
    EXPECT_EQ(Events(f.asking, "cancelled"), 1);
    EXPECT_EQ(Sql("SELECT value->>'reason' FROM {s}.run_events WHERE run_id = '" + f.asking +
                  "' AND kind = 'cancelled'"),
              "parent run " + f.parent + " failed");
    // Its own unfinished children go with it, as cancelling any run does.
    EXPECT_EQ(RunColumn(f.grandchild, "status"), "cancelled");
    EXPECT_EQ(RunColumn(f.grandchild, "cancel_reason"),
              "parent run " + f.asking + " was cancelled");
    for (const std::string& other : {f.plain, f.first_only}) {
      EXPECT_EQ(RunColumn(other, "status"), "ready") << other;
      EXPECT_EQ(Events(other, "cancelled"), 0) << other;
    }
    EXPECT_EQ(ChildrenCancelled(f.parent),
              "{\"ids\": [\"" + f.asking + "\"], \"because\": \"parent_failed\"}");
  }
};

TEST_F(StoreChildCancel, StartChildRunKeepsWhatTheChildAskedFor) {
  const std::string parent = CreateRunningRun("orders").id;
  const std::string both = StartChild(parent, ChildOptions{true, true});
  const std::string none = StartChild(parent, kNothing);
  auto run = conn().Transact([&](store::Tx& tx) { return store::GetRun(tx, both); });
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->child_options, (ChildOptions{true, true}));
  EXPECT_EQ(run->parent_run_id, parent);
  run = conn().Transact([&](store::Tx& tx) { return store::GetRun(tx, none); });
  EXPECT_EQ(run->child_options, kNothing);
  // The old call (four arguments) asks for nothing.
  const std::string old =
      Sql("SELECT {s}.start_child_run('" + parent + "'::uuid, NULL, 'sub', '{}'::jsonb)");
  EXPECT_EQ(RunColumn(old, "cancel_when_parent_fails::text || cancel_when_first_done::text"),
            "falsefalse");
}

// The step's failure commits alone (autocommit), as the executor commits it.
TEST_F(StoreChildCancel, AStepThatFailsTheRunCancelsTheChildrenThatAskedInItsOwnStatement) {
  const Family f = MakeFamily();
  conn().Autocommit([&](store::Tx& tx) {
    auto run = store::GetRun(tx, f.parent);
    Checkpoint c;
    c.run_id = f.parent;
    c.expected_version = run->version;
    c.cursor = run->cursor;
    c.status = RunStatus::kFailed;
    c.error = "card declined";
    store::SaveCheckpoint(tx, c, {});
  });
  EXPECT_EQ(RunColumn(f.parent, "status"), "failed");
  ExpectOnlyTheAskingBranchCancelled(f);
}

TEST_F(StoreChildCancel, AFailureRolledBackCancelsNothing) {
  const Family f = MakeFamily();
  try {
    conn().Transact([&](store::Tx& tx) {
      auto run = store::GetRun(tx, f.parent);
      Checkpoint c;
      c.run_id = f.parent;
      c.expected_version = run->version;
      c.cursor = run->cursor;
      c.status = RunStatus::kFailed;
      store::SaveCheckpoint(tx, c, {});
      throw std::runtime_error("the commit is lost");
    });
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(RunColumn(f.parent, "status"), "running");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'cancelled'"), 0);
}

// A run with compensations fails by starting to unwind: its children that
// asked are cancelled then, and not again when the unwinding ends failed.
TEST_F(StoreChildCancel, AnUnwindingRunCancelsAtTheFailureNotWhenItsUnwindingEnds) {
  const Family f = MakeFamily();
  auto commit = [&](RunStatus status, std::optional<RunStatus> final_status, Json stack) {
    conn().Transact([&](store::Tx& tx) {
      auto run = store::GetRun(tx, f.parent);
      Checkpoint c;
      c.run_id = f.parent;
      c.expected_version = run->version;
      c.cursor = run->cursor;
      c.status = status;
      c.lease_owner = "worker-1";
      c.compensations = std::move(stack);
      c.final_status = final_status;
      store::SaveCheckpoint(tx, c, {});
    });
  };
  commit(RunStatus::kRunning, std::nullopt, Json::array({"reserve"}));  // a compensation owed
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'cancelled'"), 0);
  commit(RunStatus::kCompensating, RunStatus::kFailed, Json::array({"reserve"}));
  ExpectOnlyTheAskingBranchCancelled(f);

  // A child started now (cannot happen from a compensation, but may from
  // SQL) asked too; the unwinding ending failed is no new failure.
  const std::string late = StartChild(f.parent, kWhenParentFails);
  commit(RunStatus::kFailed, RunStatus::kFailed, Json::array());
  EXPECT_EQ(RunColumn(f.parent, "status"), "failed");
  EXPECT_EQ(RunColumn(late, "status"), "ready");
  EXPECT_EQ(Events(f.parent, "children_cancelled"), 1);
}

TEST_F(StoreChildCancel, ACrashedRunCancelsTheChildrenThatAsked) {
  const Family f = MakeFamily();
  Sql("UPDATE {s}.runs SET lease_expires_at = now() - interval '1 second', lease_expiries = 2 "
      "WHERE id = '" +
      f.parent + "'");
  auto reaped = conn().Transact([&](store::Tx& tx) { return store::ReapExpiredLeases(tx, 3); });
  ASSERT_EQ(reaped.size(), 1u);
  EXPECT_TRUE(reaped[0].crashed);
  EXPECT_EQ(RunColumn(f.parent, "status"), "failed");
  ExpectOnlyTheAskingBranchCancelled(f);
}

TEST_F(StoreChildCancel, ARunPastItsDeadlineCancelsTheChildrenThatAsked) {
  const Family f = MakeFamily();
  Sql("UPDATE {s}.runs SET status = 'ready', lease_owner = NULL, lease_expires_at = NULL, "
      "deadline_at = now() - interval '1 second' WHERE id = '" +
      f.parent + "'");
  auto failed = conn().Transact([&](store::Tx& tx) { return store::ExpireDeadlines(tx, 100); });
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(RunColumn(f.parent, "status"), "failed");
  ExpectOnlyTheAskingBranchCancelled(f);
}

// A parent waiting for its children whose wait times out without a timeout
// step fails; the children of the wait that asked are cancelled and report
// to nobody (the wait is closed).
TEST_F(StoreChildCancel, AWaitThatTimesOutAndFailsTheRunCancelsTheChildrenThatAsked) {
  const std::string parent = CreateRunningRun("orders").id;
  const std::string key = "children:" + parent + ":1";
  WaitForChildren(parent, key, ChildWait::kAll, 0);
  const std::string asking = StartChild(parent, kWhenParentFails, key);
  const std::string plain = StartChild(parent, kNothing, key);
  CommitStatus(parent, RunStatus::kWaiting);
  EXPECT_EQ(conn().Transact([&](store::Tx& tx) { return store::ExpireWaits(tx, 100); }), 1);

  EXPECT_EQ(RunColumn(parent, "status"), "failed");
  EXPECT_EQ(RunColumn(asking, "status"), "cancelled");
  EXPECT_EQ(RunColumn(asking, "cancel_reason"), "parent run " + parent + " failed");
  EXPECT_EQ(RunColumn(plain, "status"), "ready");
  EXPECT_EQ(Sql("SELECT status FROM {s}.wait_records WHERE correlation_key = '" + key + "'"),
            "EXPIRED");
  EXPECT_EQ(Events(parent, "signalled"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 0);
}

// `cairn retry` of a failed parent, then a second failure: children that
// asked since are cancelled too; the ones cancelled before are not again.
TEST_F(StoreChildCancel, ARunThatFailsAgainAfterARetryCancelsAgain) {
  const Family f = MakeFamily();
  CommitStatus(f.parent, RunStatus::kFailed);
  ExpectOnlyTheAskingBranchCancelled(f);
  EXPECT_EQ(Sql("SELECT outcome FROM {s}.retry_run('" + f.parent + "')"), "retried");
  CommitStatus(f.parent, RunStatus::kRunning);
  const std::string later = StartChild(f.parent, kWhenParentFails);
  CommitStatus(f.parent, RunStatus::kFailed);
  EXPECT_EQ(RunColumn(later, "status"), "cancelled");
  EXPECT_EQ(Events(f.asking, "cancelled"), 1);
  EXPECT_EQ(RunColumn(f.plain, "status"), "ready");
  EXPECT_EQ(Events(f.parent, "children_cancelled"), 2);
}

// Cancelling or completing a parent is no failure: cancel_run cancels every
// unfinished child as before, and a completed parent leaves its children.
TEST_F(StoreChildCancel, OnlyAFailureCancelsTheChildrenThatAsked) {
  const Family f = MakeFamily();
  CommitStatus(f.parent, RunStatus::kCompleted);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'cancelled'"), 0);
  EXPECT_EQ(Events(f.parent, "children_cancelled"), 0);
}

// The parent's commit that marks its wait for the first child RESUMED cancels
// the other children of that wait that asked: not those of no wait, not
// those that asked for nothing, and only once.
TEST_F(StoreChildCancel, ResumingFromAFirstWaitCancelsTheOtherChildrenThatAskedOnce) {
  const std::string parent = CreateRunningRun("orders").id;
  const std::string key = "children:" + parent + ":1";
  WaitForChildren(parent, key, ChildWait::kFirst);
  const std::string winner = StartChild(parent, kWhenFirstDone, key);
  const std::string loser = StartChild(parent, ChildOptions{true, true}, key);
  const std::string plain = StartChild(parent, kNothing, key);
  const std::string unwaited = StartChild(parent, kWhenFirstDone);  // reports to no wait
  const std::string failing_only = StartChild(parent, kWhenParentFails, key);
  CommitStatus(parent, RunStatus::kWaiting);

  CommitStatus(winner, RunStatus::kCompleted, Json::object(), Json{{"won", true}});
  // The child's commit resumed the parent (a signal); nothing is cancelled
  // until the parent commits.
  EXPECT_EQ(RunColumn(parent, "status"), "ready");
  EXPECT_EQ(Sql("SELECT status FROM {s}.wait_records WHERE correlation_key = '" + key + "'"),
            "RESUMING");
  EXPECT_EQ(RunColumn(loser, "status"), "ready");

  conn().Transact([&](store::Tx& tx) { store::CompleteWait(tx, key, "signal"); });
  EXPECT_EQ(RunColumn(loser, "status"), "cancelled");
  EXPECT_EQ(RunColumn(loser, "cancel_reason"),
            "child run " + winner + " of parent run " + parent + " finished first");
  EXPECT_EQ(Events(loser, "cancelled"), 1);
  for (const std::string& other : {plain, unwaited, failing_only}) {
    EXPECT_EQ(RunColumn(other, "status"), "ready") << other;
  }
  EXPECT_EQ(RunColumn(winner, "status"), "completed");
  EXPECT_EQ(ChildrenCancelled(parent),
            "{\"ids\": [\"" + loser + "\"], \"because\": \"first_done\"}");

  // Asking again changes nothing.
  EXPECT_EQ(Sql("SELECT {s}.cancel_children_outrun('" + key + "')"), "0");
  EXPECT_EQ(Events(loser, "cancelled"), 1);
  EXPECT_EQ(Events(parent, "children_cancelled"), 1);
}

TEST_F(StoreChildCancel, ResumingFromAWaitForAllCancelsNothing) {
  const std::string parent = CreateRunningRun("orders").id;
  const std::string key = "children:" + parent + ":1";
  WaitForChildren(parent, key, ChildWait::kAll);
  const std::string a = StartChild(parent, kWhenFirstDone, key);
  const std::string b = StartChild(parent, kWhenFirstDone, key);
  CommitStatus(parent, RunStatus::kWaiting);
  CommitStatus(a, RunStatus::kCompleted);
  CommitStatus(b, RunStatus::kFailed);
  conn().Transact([&](store::Tx& tx) { store::CompleteWait(tx, key, "signal"); });
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'cancelled'"), 0);
  EXPECT_EQ(Events(parent, "children_cancelled"), 0);
}

}  // namespace
}  // namespace cairn::test
