// End-to-end test of liveness and the systemd watchdog: a real `cairn run`
// under a NOTIFY_SOCKET this test listens on (as systemd would, with
// WATCHDOG_USEC set) whose poller is wedged for real: its claim waits for an
// ACCESS EXCLUSIVE lock on the runs table that the test holds (as a stuck
// ALTER TABLE would). The lease keeper and the sweeper bound their
// statements and keep coming round; the poller does not. The daemon must
// report the poller late on /healthz and stop sending WATCHDOG=1, then
// recover when the lock is released. Workflows: tests/workflows/e2e.yaml.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "daemon_process.hpp"
#include "http_get.hpp"
#include "pg_session.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;

// A unix datagram socket bound in a temporary folder: what systemd listens
// on for sd_notify messages.
class NotifySocket {
 public:
  NotifySocket() : dir_("cairn-notify") {
    path_ = dir_.path().string() + "/notify";
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path_.c_str());
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      throw std::runtime_error("cannot bind " + path_);
    }
  }
  ~NotifySocket() { ::close(fd_); }
  const std::string& path() const { return path_; }

  // Messages received within `timeout` (each may hold several lines).
  std::vector<std::string> Receive(std::chrono::milliseconds timeout) {
    std::vector<std::string> messages;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return messages;
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
      char buffer[4096];
      const ssize_t got = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (got > 0) messages.emplace_back(buffer, static_cast<std::size_t>(got));
    }
  }

  // Waits up to `timeout` for a message containing `text`.
  bool WaitFor(const std::string& text, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      for (const auto& message : Receive(100ms)) {
        if (message.find(text) != std::string::npos) return true;
      }
    }
    return false;
  }

 private:
  TempDir dir_;
  std::string path_;
  int fd_ = -1;
};

class WatchdogE2E : public StoreTest {};

TEST_F(WatchdogE2E, AWedgedPollerFailsHealthzAndStopsTheWatchdogUntilItComesRoundAgain) {
  NotifySocket notify;
  const uint16_t port = static_cast<uint16_t>(FindFreePort());
  DaemonOptions o = BuiltDaemonOptions(url(), schema(), "e2e.yaml", 2);
  o.health_listen = "127.0.0.1:" + std::to_string(port);
  o.health_grace = "300ms";
  o.poll_interval = "100ms";  // the poller comes round every 100 ms
  o.environment = {"NOTIFY_SOCKET=" + notify.path(), "WATCHDOG_USEC=400000"};
  DaemonProcess daemon(o);
  ASSERT_TRUE(daemon.StartAndWaitReady()) << daemon.Log();
  ASSERT_TRUE(notify.WaitFor("READY=1", 10s)) << daemon.Log();
  ASSERT_TRUE(notify.WaitFor("WATCHDOG=1", 5s)) << daemon.Log();
  ASSERT_TRUE(PollUntil([&] { return HttpGet(port, "/healthz").status == 200; }, 10s));

  // The poller's claim reads the runs table: lock all of it and hold the lock.
  PgSession blocker(url());
  blocker.Value("BEGIN");
  blocker.Value("LOCK TABLE " + schema() + ".runs IN ACCESS EXCLUSIVE MODE");
  HttpResult health;
  ASSERT_TRUE(PollUntil(
      [&] {
        health = HttpGet(port, "/healthz");
        return health.status == 503;
      },
      10s))
      << health.status << " " << health.body;
  EXPECT_NE(health.body.find("unhealthy: late: poller: no beat for"), std::string::npos)
      << health.body;
  EXPECT_EQ(health.body.find("keeper"), std::string::npos) << health.body;
  EXPECT_TRUE(daemon.WaitForLog("watchdog: not pinging systemd: unhealthy: late: poller", 5s))
      << daemon.Log();
  // The watchdog interval is 400 ms (pinged every 200 ms): nothing for 1.5 s.
  notify.Receive(300ms);  // a ping that raced the check
  for (const auto& message : notify.Receive(1500ms)) {
    EXPECT_EQ(message.find("WATCHDOG=1"), std::string::npos) << message;
  }
  blocker.Value("COMMIT");
  // Work goes on once the lock is gone.
  Sql("SELECT {s}.start_run('e2e_three', '{}'::jsonb)");
  EXPECT_TRUE(PollUntil(
      [&] { return SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'completed'") == 1; },
      10s));
  ASSERT_TRUE(PollUntil([&] { return HttpGet(port, "/healthz").status == 200; }, 10s))
      << HttpGet(port, "/healthz").body;
  EXPECT_TRUE(notify.WaitFor("WATCHDOG=1", 5s)) << daemon.Log();
  EXPECT_TRUE(daemon.WaitForLog("watchdog: the loops come round again", 5s)) << daemon.Log();
  daemon.Terminate();
  EXPECT_EQ(daemon.WaitExit(20s), 0) << daemon.Log();
}

}  // namespace
}  // namespace cairn::test
