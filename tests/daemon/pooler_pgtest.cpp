// cairn behind a real PgBouncer: in transaction mode the daemon's sessions
// are shared with other clients, which breaks stack locks (session advisory
// locks), LISTEN and prepared statements; the daemon must refuse to start
// with a message that says so and what to do, not crash or busy-loop. In
// session mode it works as it does on a direct connection.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon_fixture.hpp"
#include "errors.hpp"
#include "pgbouncer.hpp"
#include "store.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;

class Pooler : public DaemonTest {
 protected:
  Pooler() : DaemonTest("tests/workflows/e2e.yaml") {}

  std::unique_ptr<DaemonProcess> DaemonThrough(const PgBouncer& bouncer) const {
    DaemonOptions o = Options(2);
    o.url = bouncer.url();
    return std::make_unique<DaemonProcess>(o);
  }

  // How many of `checks` session checks through `bouncer` passed, while two
  // other clients ran statements through the same pool all along (as the
  // daemon's own start connection does beside its check).
  static int ChecksPassedWhileOthersUseThePool(const PgBouncer& bouncer, int checks) {
    store::ConnectionOptions options;
    options.url = bouncer.url();
    std::atomic<bool> done{false};
    std::vector<std::thread> others;
    for (int i = 0; i < 2; ++i) {
      others.emplace_back([&] {
        while (!done) {
          try {
            store::CheckSessionPooling(options);
          } catch (const std::exception&) {
          }
        }
      });
    }
    const auto stop_others = [&] {
      done = true;
      for (auto& other : others) other.join();
    };
    int passed = 0;
    try {
      for (int i = 0; i < checks; ++i) {
        try {
          store::CheckSessionPooling(options);
          ++passed;
        } catch (const InvalidArgumentError&) {
        }
      }
    } catch (...) {
      stop_others();
      throw;
    }
    stop_others();
    return passed;
  }
};

TEST_F(Pooler, TransactionModeIsRefusedAtStartWithWhatToDo) {
  PgBouncer bouncer(url(), "transaction");
  auto daemon = DaemonThrough(bouncer);
  daemon->Start();
  const auto exit_code = daemon->WaitExit(20s);
  ASSERT_TRUE(exit_code.has_value()) << "the daemon kept running behind a transaction pooler:\n"
                                     << daemon->Log();
  EXPECT_NE(*exit_code, 0);
  const std::string log = daemon->Log();
  EXPECT_NE(log.find("pooler in transaction or statement mode"), std::string::npos) << log;
  EXPECT_NE(log.find("pool_mode=session"), std::string::npos) << log;
  // One clear line, not a loop of warnings.
  EXPECT_LT(std::count(log.begin(), log.end(), '\n'), 20) << log;
}

// Other clients of the pool may hand the check's first server back to it
// between its statements; a check that trusted one round then passed.
TEST_F(Pooler, TheSessionCheckSeesATransactionPoolerThatOtherClientsShare) {
  PgBouncer transaction(url(), "transaction");
  EXPECT_EQ(ChecksPassedWhileOthersUseThePool(transaction, 200), 0);
  PgBouncer session(url(), "session");
  EXPECT_EQ(ChecksPassedWhileOthersUseThePool(session, 50), 50) << session.Log();
}

TEST_F(Pooler, SessionModeRunsWorkflowsAsADirectConnectionDoes) {
  PgBouncer bouncer(url(), "session");
  auto daemon = DaemonThrough(bouncer);
  ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log() << bouncer.Log();
  const std::string id = StartRun("e2e_three");
  EXPECT_TRUE(WaitForStatus(id, "completed")) << daemon->Log();
  Stop(*daemon);
}

}  // namespace
}  // namespace cairn::test
