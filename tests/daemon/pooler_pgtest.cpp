// cairn behind a real PgBouncer: in transaction mode the daemon's sessions
// are shared with other clients, which breaks stack locks (session advisory
// locks), LISTEN and prepared statements; the daemon must refuse to start
// with a message that says so and what to do, not crash or busy-loop. In
// session mode it works as it does on a direct connection.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "daemon_fixture.hpp"
#include "pgbouncer.hpp"

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
