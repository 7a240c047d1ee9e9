// End-to-end tests of the metrics endpoint: a real `cairn run` with
// metrics.listen on 127.0.0.1 and a free port, runs started through SQL, and
// /metrics and /healthz fetched with a plain socket client.
// Workflows: tests/workflows/e2e.yaml.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "daemon_process.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// A socket bound to 127.0.0.1 on a free port; listening when asked.
struct BoundSocket {
  int fd = -1;
  uint16_t port = 0;
  explicit BoundSocket(bool listening) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = Loopback(0);
    ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    if (listening) ::listen(fd, 1);
    socklen_t length = sizeof(address);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    port = ntohs(address.sin_port);
  }
  ~BoundSocket() { Close(); }
  void Close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

struct HttpResult {
  int status = 0;  // 0: no connection or no answer
  std::string body;
};

HttpResult HttpGet(uint16_t port, const std::string& path) {
  HttpResult result;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = Loopback(port);
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return result;
  }
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string response;
  char buffer[8192];
  ssize_t got;
  while ((got = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, got);
  ::close(fd);
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return result;
  result.status = std::stoi(response.substr(9, 3));
  const auto body = response.find("\r\n\r\n");
  if (body != std::string::npos) result.body = response.substr(body + 4);
  return result;
}

// The value of the series written exactly as `series` (name and labels), or
// nullopt when the exposition has no such line.
std::optional<double> Value(const std::string& exposition, const std::string& series) {
  std::istringstream lines(exposition);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nullopt;
}

class MetricsE2E : public StoreTest {
 protected:
  // A daemon serving metrics on listen ("127.0.0.1:<port>").
  std::unique_ptr<DaemonProcess> Daemon(const std::string& listen) const {
    DaemonOptions o = BuiltDaemonOptions(url(), schema(), "e2e.yaml", 4);
    auto daemon = std::make_unique<DaemonProcess>(o);
    // DaemonConfigYaml disables metrics; turn them on in the written file.
    std::ifstream in(daemon->config_path());
    std::stringstream text;
    text << in.rdbuf();
    std::string yaml = text.str();
    const std::string disabled = "metrics:\n  listen: \"\"\n";
    const auto at = yaml.find(disabled);
    if (at == std::string::npos) throw std::runtime_error("no metrics section in:\n" + yaml);
    yaml.replace(at, disabled.size(), "metrics:\n  listen: \"" + listen + "\"\n");
    std::ofstream(daemon->config_path(), std::ios::trunc) << yaml;
    return daemon;
  }

  void StartRuns(const std::string& workflow, int count) {
    Sql("SELECT count({s}.start_run('" + workflow + "', '{}'::jsonb)) FROM generate_series(1, " +
        std::to_string(count) + ")");
  }

  int64_t EventCount(const std::string& kind) const {
    return SqlInt("SELECT count(*) FROM {s}.run_events WHERE kind = '" + kind + "'");
  }

  int64_t CountRuns(const std::string& workflow, const std::string& status) const {
    return SqlInt("SELECT count(*) FROM {s}.runs WHERE workflow = '" + workflow +
                  "' AND status = '" + status + "'");
  }
};

TEST_F(MetricsE2E, CountersFollowTheRunsAndHealthzSaysOk) {
  uint16_t port;
  {
    BoundSocket probe(false);
    port = probe.port;
  }
  auto daemon = Daemon("127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log();
  ASSERT_TRUE(PollUntil([&] { return HttpGet(port, "/healthz").status == 200; }, 10s))
      << HttpGet(port, "/healthz").body;
  EXPECT_EQ(HttpGet(port, "/healthz").body, "ok\n");
  EXPECT_EQ(HttpGet(port, "/nothing-here").status, 404);

  StartRuns("e2e_three", 5);
  Sql("SELECT {s}.start_run('e2e_retry', '{}'::jsonb)");
  ASSERT_TRUE(PollUntil(
      [&] {
        return CountRuns("e2e_three", "completed") == 5 && CountRuns("e2e_retry", "failed") == 1;
      },
      30s));

  // The executor records after its commit: allow it a moment to catch up.
  const std::string s1 =
      "cairn_steps_total{workflow=\"e2e_three\",step=\"s1\",outcome=\"committed\"}";
  const std::string s3 =
      "cairn_steps_total{workflow=\"e2e_three\",step=\"s3\",outcome=\"committed\"}";
  const std::string completed =
      "cairn_runs_finished_total{workflow=\"e2e_three\",status=\"completed\"}";
  HttpResult metrics;
  ASSERT_TRUE(PollUntil(
      [&] {
        metrics = HttpGet(port, "/metrics");
        return Value(metrics.body, completed) == 5.0 &&
               Value(metrics.body,
                     "cairn_runs_finished_total{workflow=\"e2e_retry\",status=\"failed\"}") ==
                   1.0 &&
               Value(metrics.body, "cairn_executor_slots{state=\"busy\"}") == 0.0;
      },
      10s))
      << metrics.body;
  ASSERT_EQ(metrics.status, 200);
  const std::string& text = metrics.body;
  EXPECT_EQ(Value(text, s1), 5.0) << text;
  EXPECT_EQ(Value(text, s3), 5.0) << text;
  // Retried and failed attempts match the run's history (three attempts).
  EXPECT_EQ(
      Value(text, "cairn_steps_total{workflow=\"e2e_retry\",step=\"boom\",outcome=\"retried\"}"),
      static_cast<double>(EventCount("retried")))
      << text;
  EXPECT_EQ(EventCount("retried"), 2);
  EXPECT_EQ(
      Value(text, "cairn_steps_total{workflow=\"e2e_retry\",step=\"boom\",outcome=\"failed\"}"),
      1.0)
      << text;
  EXPECT_EQ(Value(text, "cairn_step_duration_seconds_count{workflow=\"e2e_three\",step=\"s2\"}"),
            5.0)
      << text;
  EXPECT_EQ(
      Value(text,
            "cairn_step_duration_seconds_bucket{workflow=\"e2e_three\",step=\"s2\",le=\"+Inf\"}"),
      5.0)
      << text;
  // Each claim is one run turn; a retried run is claimed again.
  EXPECT_GE(Value(text, "cairn_runs_claimed_total{queue=\"default\"}").value_or(0),
            6.0 + static_cast<double>(EventCount("retried")))
      << text;
  EXPECT_EQ(Value(text, "cairn_executor_slots{state=\"idle\"}"), 4.0) << text;
  EXPECT_EQ(Value(text, "cairn_worker_up"), 1.0) << text;
  EXPECT_EQ(Value(text, "cairn_leases_reaped_total"), 0.0) << text;
  EXPECT_NE(text.find("# TYPE cairn_step_duration_seconds histogram\n"), std::string::npos);
  // Label values never carry run ids.
  EXPECT_EQ(text.find(Sql("SELECT id FROM {s}.runs LIMIT 1")), std::string::npos);

  // More runs: the counters go up.
  StartRuns("e2e_three", 3);
  ASSERT_TRUE(PollUntil([&] { return CountRuns("e2e_three", "completed") == 8; }, 30s));
  ASSERT_TRUE(PollUntil([&] { return Value(HttpGet(port, "/metrics").body, s3) == 8.0; }, 10s))
      << HttpGet(port, "/metrics").body;
  EXPECT_EQ(Value(HttpGet(port, "/metrics").body, s1), 8.0);

  daemon->Terminate();
  EXPECT_EQ(daemon->WaitExit(20s), 0) << daemon->Log();
  EXPECT_NE(daemon->Log().find("metrics: serving /metrics and /healthz on http://127.0.0.1:" +
                               std::to_string(port)),
            std::string::npos)
      << daemon->Log();
  // Stopped with the daemon.
  EXPECT_EQ(HttpGet(port, "/healthz").status, 0);
}

TEST_F(MetricsE2E, PortInUseIsAStartUpErrorNamingTheAddress) {
  BoundSocket taken(true);
  const std::string address = "127.0.0.1:" + std::to_string(taken.port);
  auto daemon = Daemon(address);
  daemon->Start();
  EXPECT_EQ(daemon->WaitExit(20s), 1) << daemon->Log();
  EXPECT_NE(daemon->Log().find("metrics.listen: cannot listen on " + address), std::string::npos)
      << daemon->Log();
  // Nothing was claimed: the worker never started.
  EXPECT_EQ(daemon->Log().find("worker " + daemon->worker_id() + " started"), std::string::npos);
}

}  // namespace
}  // namespace cairn::test
