// Wake hints against a real PostgreSQL: a start or a signal notifies the
// daemons' channel as it commits, while a daemon holds its queue's wake gate
// open, unless the session set cairn.wake_hints to off (notifying commits
// are serialised by the server), one commit at a time. A value other than on
// or off refuses the call and changes nothing. Opening a gate, and reading a
// hint, wait for the commits that skipped theirs, so that the claim after
// it sees their runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <latch>
#include <memory>
#include <string>
#include <thread>

#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

class WakeHints : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (HasFatalFailure()) return;
    Sql("INSERT INTO {s}.workflow_definitions (hash, workflow, version, first_step, definition) "
        "VALUES ('h1', 'wf', 1, 's1', '{\"queue\": \"mail\"}')");
    listener_ = std::make_unique<store::WakeListener>(ListenerOptions());
    ASSERT_TRUE(listener_->OpenGates({"mail"}));
  }

  store::ConnectionOptions ListenerOptions() const {
    store::ConnectionOptions options;
    options.url = url();
    options.schema = schema();
    options.application_name = "cairn-test listener";
    return options;
  }

  // A run started in a transaction that decides on its hint at once (SET
  // CONSTRAINTS ... IMMEDIATE) and then stays open, as a slow commit
  // would, until `commit` counts down.
  std::thread StartAndHoldTheCommit(std::latch& decided, std::latch& commit) {
    return std::thread([this, &decided, &commit] {
      auto producer = Open("cairn-test producer");
      producer->Transact([&](store::Tx& tx) {
        store::ExecuteStepSql(tx, InSchema("SELECT {s}.start_run('wf')"), nullptr);
        store::ExecuteStepSql(tx, InSchema("SET CONSTRAINTS {s}.wake_at_commit IMMEDIATE"),
                              nullptr);
        decided.count_down();
        commit.wait();
      });
    });
  }

  store::WakeListener& listener() { return *listener_; }

  // Whether a wake-up arrived within the time; a hint is sent at commit, and
  // psql has returned by then, so a short wait only covers delivery.
  bool Woken(milliseconds within = milliseconds(2000)) { return listener_->Wait(within); }

  // A waiting run of workflow wf with a wait on `key`, as a daemon leaves it.
  void WaitingRun(const std::string& key) {
    const std::string id = Sql("SELECT {s}.start_run('wf', p_key => '" + key + "')");
    while (Woken(milliseconds(200))) {
    }
    Sql("UPDATE {s}.runs SET status = 'waiting' WHERE id = '" + id + "'");
    SaveWait(id, key);
  }

 private:
  std::unique_ptr<store::WakeListener> listener_;
};

TEST_F(WakeHints, AStartNotifiesTheDaemonsOfItsQueue) {
  Sql("SELECT {s}.start_run('wf')");
  EXPECT_TRUE(Woken());
}

TEST_F(WakeHints, ASessionWithHintsOffStartsRunsWithoutNotifying) {
  Sql("SET cairn.wake_hints = off; SELECT {s}.start_run('wf'); "
      "SELECT count(*) FROM {s}.start_runs('wf', '[{}, {}]')");
  EXPECT_FALSE(Woken(milliseconds(500)));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'ready'"), 3);
  // Only that session: the next one notifies again.
  Sql("SELECT {s}.start_run('wf')");
  EXPECT_TRUE(Woken());
}

TEST_F(WakeHints, HintsTurnedOffForOneTransactionComeBackAfterIt) {
  Sql("BEGIN; SET LOCAL cairn.wake_hints = off; SELECT {s}.start_run('wf'); COMMIT;");
  EXPECT_FALSE(Woken(milliseconds(500)));
  Sql("BEGIN; SET LOCAL cairn.wake_hints = off; COMMIT; SELECT {s}.start_run('wf');");
  EXPECT_TRUE(Woken());
}

TEST_F(WakeHints, ASignalWithHintsOffResumesItsRunWithoutNotifying) {
  WaitingRun("order-1");
  EXPECT_EQ(Sql("SET cairn.wake_hints = off; SELECT {s}.signal('order-1')"), "delivered");
  EXPECT_FALSE(Woken(milliseconds(500)));
  WaitingRun("order-2");
  EXPECT_EQ(Sql("SELECT {s}.signal('order-2')"), "delivered");
  EXPECT_TRUE(Woken());
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'ready'"), 2);
}

TEST_F(WakeHints, AStartNotifiesOnlyWhileADaemonHoldsItsQueuesGateOpen) {
  EXPECT_EQ(OpenGateStripes("cairn-test listener"), 32);
  listener().CloseGates();
  EXPECT_EQ(OpenGateStripes("cairn-test listener"), 0);
  Sql("SELECT {s}.start_run('wf')");
  EXPECT_FALSE(Woken(milliseconds(500)));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'ready'"), 1);

  // Another queue's gate does not open this one.
  ASSERT_TRUE(listener().OpenGates({"other"}));
  Sql("SELECT {s}.start_run('wf')");
  EXPECT_FALSE(Woken(milliseconds(500)));

  ASSERT_TRUE(listener().OpenGates({"mail"}));
  Sql("SELECT {s}.start_run('wf')");
  EXPECT_TRUE(Woken());
  // Requests live only in the transaction that made them.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wake_requests"), 0);
}

TEST_F(WakeHints, OpeningTheGateWaitsForTheCommitOfAStartThatSkippedItsHint) {
  listener().CloseGates();
  std::latch decided(1);
  std::latch commit(1);
  std::thread producer = StartAndHoldTheCommit(decided, commit);
  decided.wait();
  auto opened = std::async(std::launch::async, [&] { return listener().OpenGates({"mail"}); });
  EXPECT_EQ(opened.wait_for(milliseconds(500)), std::future_status::timeout);
  commit.count_down();
  producer.join();
  EXPECT_TRUE(opened.get());
  // It skipped its hint; a claim from here on sees its run.
  EXPECT_FALSE(Woken(milliseconds(500)));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'ready'"), 1);
}

// With the gate open, one commit notifies at a time: a start that commits
// while another is notifying leaves the hint to it, and the listener, before
// its claim on that hint, waits for its commit.
TEST_F(WakeHints, AStartLeavesItsHintToOneInFlightAndTheListenerWaitsForIt) {
  std::latch notifier_decided(1);
  std::latch notifier_commits(1);
  std::thread notifier = StartAndHoldTheCommit(notifier_decided, notifier_commits);
  notifier_decided.wait();
  std::latch waiter_decided(1);
  std::latch waiter_commits(1);
  std::thread waiter = StartAndHoldTheCommit(waiter_decided, waiter_commits);
  waiter_decided.wait();

  notifier_commits.count_down();
  notifier.join();
  EXPECT_TRUE(Woken());
  auto awaited = std::async(std::launch::async, [&] { return listener().AwaitWaiters({"mail"}); });
  EXPECT_EQ(awaited.wait_for(milliseconds(500)), std::future_status::timeout);
  waiter_commits.count_down();
  waiter.join();
  EXPECT_TRUE(awaited.get());
  EXPECT_FALSE(Woken(milliseconds(300)));  // the waiter sent none
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'ready'"), 2);
}

TEST_F(WakeHints, AGateThatCannotOpenWithinTheLockTimeoutIsLeftClosed) {
  listener().CloseGates();
  store::ConnectionOptions options = ListenerOptions();
  options.application_name = "cairn-test impatient listener";
  options.lock_timeout = milliseconds(100);
  store::WakeListener impatient(options);
  std::latch decided(1);
  std::latch commit(1);
  std::thread producer = StartAndHoldTheCommit(decided, commit);
  decided.wait();
  EXPECT_FALSE(impatient.OpenGates({"mail"}));
  EXPECT_EQ(OpenGateStripes("cairn-test impatient listener"), 0);
  commit.count_down();
  producer.join();
  // Opened later, it works.
  EXPECT_TRUE(impatient.OpenGates({"mail"}));
  EXPECT_EQ(OpenGateStripes("cairn-test impatient listener"), 32);
}

TEST_F(WakeHints, AMisspeltSettingRefusesTheStartAndChangesNothing) {
  try {
    Sql("SET cairn.wake_hints = 'of'; SELECT {s}.start_run('wf')");
    ADD_FAILURE() << "a start with cairn.wake_hints = 'of' was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cairn.wake_hints is \"of\": set it to on or off"));
  }
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 0);
  EXPECT_FALSE(Woken(milliseconds(200)));
}

}  // namespace
}  // namespace cairn::test
