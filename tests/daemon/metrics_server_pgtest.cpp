// End-to-end tests of the daemon's HTTP side: a real `cairn run` with
// metrics.listen and health.listen on 127.0.0.1 and free ports, runs
// started through SQL, and /metrics, /healthz and /readyz fetched with a
// plain socket client. The scrape is checked with promtool.
// Workflows: tests/workflows/e2e.yaml.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon_process.hpp"
#include "http_get.hpp"
#include "store_fixture.hpp"
#include "test_paths.hpp"

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

std::string Address(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

// promtool's verdict on an exposition: "" when it passes, else its output.
std::string PromtoolCheckMetrics(const std::string& text) {
  TempDir dir("cairn-scrape");
  const std::string file = dir.Write("metrics.txt", text);
  CommandResult result =
      RunCommand("/bin/sh", {"-c", cairn::test::Promtool() + " check metrics < " + file + " 2>&1"});
  return result.exit_code == 0 ? "" : result.out + result.err;
}

class MetricsE2E : public StoreTest {
 protected:
  // A daemon of the e2e workflows with the given HTTP addresses ("" disables).
  std::unique_ptr<DaemonProcess> Daemon(const std::string& metrics_listen,
                                        const std::string& health_listen) const {
    DaemonOptions o = BuiltDaemonOptions(url(), schema(), "e2e.yaml", 4);
    o.metrics_listen = metrics_listen;
    o.health_listen = health_listen;
    o.backlog_interval = "200ms";
    return std::make_unique<DaemonProcess>(o);
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

TEST_F(MetricsE2E, CountersFollowTheRunsAndTheScrapePassesPromtool) {
  const uint16_t port = static_cast<uint16_t>(FindFreePort());
  auto daemon = Daemon(Address(port), Address(port));
  ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log();
  ASSERT_TRUE(PollUntil([&] { return HttpGet(port, "/readyz").status == 200; }, 10s))
      << HttpGet(port, "/readyz").body;
  EXPECT_EQ(HttpGet(port, "/healthz").status, 200);
  EXPECT_EQ(HttpGet(port, "/healthz").body, "ok\n");
  EXPECT_EQ(HttpGet(port, "/readyz").body, "ready\n");
  EXPECT_EQ(HttpGet(port, "/nothing-here").status, 404);

  StartRuns("e2e_three", 5);
  Sql("SELECT {s}.start_run('e2e_retry', '{}'::jsonb)");
  ASSERT_TRUE(PollUntil(
      [&] {
        return CountRuns("e2e_three", "completed") == 5 && CountRuns("e2e_retry", "failed") == 1;
      },
      30s));

  // The executor records after its commit: allow it a moment to catch up.
  // Labels come sorted by name.
  const std::string s1 =
      "cairn_steps_total{outcome=\"committed\",step=\"s1\",workflow=\"e2e_three\"}";
  const std::string s3 =
      "cairn_steps_total{outcome=\"committed\",step=\"s3\",workflow=\"e2e_three\"}";
  const std::string completed =
      "cairn_runs_finished_total{status=\"completed\",workflow=\"e2e_three\"}";
  HttpResult metrics;
  ASSERT_TRUE(PollUntil(
      [&] {
        metrics = HttpGet(port, "/metrics");
        return Value(metrics.body, completed) == 5.0 &&
               Value(metrics.body,
                     "cairn_runs_finished_total{status=\"failed\",workflow=\"e2e_retry\"}") ==
                   1.0 &&
               Value(metrics.body, "cairn_executor_slots{state=\"busy\"}") == 0.0 &&
               // The backlog is read every 200 ms: a reading taken while
               // the last run was still running is stale until the next one.
               Value(metrics.body, "cairn_queue_runs{queue=\"default\",state=\"ready\"}") == 0.0 &&
               Value(metrics.body, "cairn_queue_runs{queue=\"default\",state=\"running\"}") == 0.0;
      },
      10s))
      << metrics.body;
  ASSERT_EQ(metrics.status, 200);
  const std::string& text = metrics.body;
  EXPECT_EQ(Value(text, s1), 5.0) << text;
  EXPECT_EQ(Value(text, s3), 5.0) << text;
  // Retried and failed attempts match the run's history (three attempts).
  EXPECT_EQ(
      Value(text, "cairn_steps_total{outcome=\"retried\",step=\"boom\",workflow=\"e2e_retry\"}"),
      static_cast<double>(EventCount("retried")))
      << text;
  EXPECT_EQ(EventCount("retried"), 2);
  EXPECT_EQ(
      Value(text, "cairn_steps_total{outcome=\"failed\",step=\"boom\",workflow=\"e2e_retry\"}"),
      1.0)
      << text;
  EXPECT_EQ(Value(text, "cairn_step_duration_seconds_count{step=\"s2\",workflow=\"e2e_three\"}"),
            5.0)
      << text;
  EXPECT_EQ(
      Value(text,
            "cairn_step_duration_seconds_bucket{step=\"s2\",workflow=\"e2e_three\",le=\"+Inf\"}"),
      5.0)
      << text;
  // Each claim is one run turn; a retried run is claimed again.
  EXPECT_GE(Value(text, "cairn_runs_claimed_total{queue=\"default\"}").value_or(0),
            6.0 + static_cast<double>(EventCount("retried")))
      << text;
  EXPECT_GE(Value(text, "cairn_claim_duration_seconds_count").value_or(0), 1.0) << text;
  EXPECT_GE(Value(text, "cairn_claim_batch_size_sum").value_or(0), 8.0) << text;
  EXPECT_EQ(Value(text, "cairn_executor_slots{state=\"idle\"}"), 4.0) << text;
  EXPECT_EQ(Value(text, "cairn_worker_healthy"), 1.0) << text;
  EXPECT_EQ(Value(text, "cairn_worker_ready"), 1.0) << text;
  EXPECT_EQ(Value(text, "cairn_leases_reaped_total"), 0.0) << text;
  EXPECT_EQ(Value(text, "cairn_leases_lost_total"), 0.0) << text;
  EXPECT_EQ(Value(text, "cairn_database_errors_total{class=\"permanent\"}"), 0.0) << text;
  // Poller, keeper, listener, backlog monitor, schedules, busy slots: some sessions.
  EXPECT_GE(Value(text, "cairn_database_connections").value_or(0), 3.0) << text;
  EXPECT_NE(text.find("cairn_build_info{abi_version=\""), std::string::npos) << text;
  // The one daemon of this fleet reads the backlog: the retried run failed
  // for good, nothing is left.
  EXPECT_EQ(Value(text, "cairn_backlog_reader"), 1.0) << text;
  EXPECT_EQ(Value(text, "cairn_queue_runs{queue=\"default\",state=\"running\"}"), 0.0) << text;
  EXPECT_EQ(Value(text, "cairn_queue_oldest_due_age_seconds{queue=\"default\"}"), 0.0) << text;
  EXPECT_EQ(Value(text, "cairn_stranded_runs{queue=\"default\"}"), 0.0) << text;
  EXPECT_NE(text.find("# TYPE cairn_step_duration_seconds histogram\n"), std::string::npos);
  // Label values never carry run ids.
  EXPECT_EQ(text.find(Sql("SELECT id FROM {s}.runs LIMIT 1")), std::string::npos);
  EXPECT_EQ(PromtoolCheckMetrics(text), "") << text;

  // More runs: the counters go up.
  StartRuns("e2e_three", 3);
  ASSERT_TRUE(PollUntil([&] { return CountRuns("e2e_three", "completed") == 8; }, 30s));
  ASSERT_TRUE(PollUntil([&] { return Value(HttpGet(port, "/metrics").body, s3) == 8.0; }, 10s))
      << HttpGet(port, "/metrics").body;
  EXPECT_EQ(Value(HttpGet(port, "/metrics").body, s1), 8.0);

  daemon->Terminate();
  EXPECT_EQ(daemon->WaitExit(20s), 0) << daemon->Log();
  EXPECT_NE(daemon->Log().find("http: serving on http://127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << daemon->Log();
  // Stopped with the daemon.
  EXPECT_EQ(HttpGet(port, "/healthz").status, 0);
}

TEST_F(MetricsE2E, RunsOfAQueueNoWorkerServesShowInTheBacklogGauges) {
  const uint16_t port = static_cast<uint16_t>(FindFreePort());
  auto daemon = Daemon(Address(port), "");
  ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log();
  // Runs of a queue no daemon here serves, one due a minute ago.
  Sql("SELECT {s}.start_run('e2e_three', '{}'::jsonb, p_queue => 'elsewhere', "
      "p_run_at => now() - interval '60 seconds')");
  HttpResult metrics;
  ASSERT_TRUE(PollUntil(
      [&] {
        metrics = HttpGet(port, "/metrics");
        return Value(metrics.body, "cairn_queue_runs{queue=\"elsewhere\",state=\"ready\"}") == 1.0;
      },
      10s))
      << metrics.body;
  EXPECT_GE(
      Value(metrics.body, "cairn_queue_oldest_due_age_seconds{queue=\"elsewhere\"}").value_or(0),
      60.0)
      << metrics.body;
  // No live worker serves that queue: the run is stranded.
  EXPECT_EQ(Value(metrics.body, "cairn_stranded_runs{queue=\"elsewhere\"}"), 1.0) << metrics.body;
  daemon->Terminate();
  EXPECT_EQ(daemon->WaitExit(20s), 0) << daemon->Log();
}

TEST_F(MetricsE2E, HealthEndpointsWorkWithMetricsDisabledOrOnAPortOfTheirOwn) {
  const uint16_t health_port = static_cast<uint16_t>(FindFreePort());
  {
    auto daemon = Daemon("", Address(health_port));
    ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log();
    ASSERT_TRUE(PollUntil([&] { return HttpGet(health_port, "/readyz").status == 200; }, 10s));
    EXPECT_EQ(HttpGet(health_port, "/healthz").status, 200);
    EXPECT_EQ(HttpGet(health_port, "/metrics").status, 404);
    daemon->Terminate();
    EXPECT_EQ(daemon->WaitExit(20s), 0) << daemon->Log();
  }
  const uint16_t metrics_port = static_cast<uint16_t>(FindFreePort());
  auto daemon = Daemon(Address(metrics_port), Address(health_port));
  ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log();
  ASSERT_TRUE(PollUntil([&] { return HttpGet(health_port, "/readyz").status == 200; }, 10s));
  EXPECT_EQ(HttpGet(metrics_port, "/metrics").status, 200);
  EXPECT_EQ(HttpGet(metrics_port, "/healthz").status, 404);
  EXPECT_EQ(HttpGet(health_port, "/metrics").status, 404);
  daemon->Terminate();
  EXPECT_EQ(daemon->WaitExit(20s), 0) << daemon->Log();
}

TEST_F(MetricsE2E, ReadyzSaysDrainingWhileStepsInFlightFinish) {
  const uint16_t port = static_cast<uint16_t>(FindFreePort());
  auto daemon = Daemon("", Address(port));
  ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log();
  Sql("SELECT {s}.start_run('e2e_shutdown', '{\"sleep_ms\": 3000}'::jsonb)");
  // A slot holds the run's stack lock: its step is running. A run the
  // poller has claimed is running too, but a daemon told to stop before a
  // slot takes it gives it back at once, and exits with nothing to drain.
  ASSERT_TRUE(PollUntil([&] { return StackLocksOfSlots(daemon->worker_id()) == 1; }, 10s, 10ms));
  ASSERT_EQ(CountRuns("e2e_shutdown", "running"), 1);
  daemon->Terminate();
  HttpResult readyz;
  ASSERT_TRUE(PollUntil(
      [&] {
        readyz = HttpGet(port, "/readyz");
        return readyz.status == 503;
      },
      5s))
      << readyz.status << " " << readyz.body;
  EXPECT_EQ(readyz.body, "not ready: draining\n");
  // Alive all the same: its loops are finishing their work.
  EXPECT_EQ(HttpGet(port, "/healthz").status, 200);
  EXPECT_EQ(daemon->WaitExit(20s), 0) << daemon->Log();
}

TEST_F(MetricsE2E, FiftyIdleConnectionsDoNotDelayHealthz) {
  const uint16_t port = static_cast<uint16_t>(FindFreePort());
  auto daemon = Daemon(Address(port), Address(port));
  ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log();
  ASSERT_TRUE(PollUntil([&] { return HttpGet(port, "/healthz").status == 200; }, 10s));
  std::vector<int> idle;
  for (int i = 0; i < 50; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = Loopback(port);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    idle.push_back(fd);
  }
  std::this_thread::sleep_for(200ms);  // the server has taken them up
  auto best = std::chrono::steady_clock::duration::max();
  for (int i = 0; i < 10; ++i) {
    const auto started = std::chrono::steady_clock::now();
    const HttpResult health = HttpGet(port, "/healthz");
    const auto took = std::chrono::steady_clock::now() - started;
    EXPECT_EQ(health.status, 200) << health.body;
    EXPECT_LT(took, 1s);
    best = std::min(best, took);
  }
  EXPECT_LT(best, 100ms) << std::chrono::duration_cast<std::chrono::milliseconds>(best).count()
                         << " ms";
  for (int fd : idle) ::close(fd);
  daemon->Terminate();
  EXPECT_EQ(daemon->WaitExit(20s), 0) << daemon->Log();
}

TEST_F(MetricsE2E, PortInUseIsAStartUpErrorNamingTheKeyAndTheAddress) {
  BoundSocket taken(true);
  const std::string address = Address(taken.port);
  auto daemon = Daemon(address, "");
  daemon->Start();
  EXPECT_EQ(daemon->WaitExit(20s), 1) << daemon->Log();
  EXPECT_NE(daemon->Log().find("metrics.listen: cannot listen on " + address), std::string::npos)
      << daemon->Log();
  // Nothing was claimed: the worker never started.
  EXPECT_EQ(daemon->Log().find("worker " + daemon->worker_id() + " started"), std::string::npos);
  auto health = Daemon("", address);
  health->Start();
  EXPECT_EQ(health->WaitExit(20s), 1) << health->Log();
  EXPECT_NE(health->Log().find("health.listen: cannot listen on " + address), std::string::npos)
      << health->Log();
}

}  // namespace
}  // namespace cairn::test
