// Wake hints against a real PostgreSQL: a start or a signal notifies the
// daemons' channel in its transaction, unless the session set
// cairn.wake_hints to off (a producer that starts runs from many sessions:
// notifying commits are serialised by the server). A value other than on or
// off refuses the call and changes nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

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
    store::ConnectionOptions options;
    options.url = url();
    options.schema = schema();
    options.application_name = "cairn-test listener";
    listener_ = std::make_unique<store::WakeListener>(options);
  }

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
