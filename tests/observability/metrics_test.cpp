// Unit tests of the metrics registry (text format, escaping, histogram
// buckets, bounded label sets), cairn's Metrics and the metrics HTTP server
// on loopback. No database.
#include "metrics.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "metrics_server.hpp"

namespace cairn {
namespace {

using namespace std::chrono_literals;
using metrics::CounterFamily;
using metrics::GaugeFamily;
using metrics::HistogramFamily;
using metrics::Registry;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(MetricsText, EscapesBackslashQuoteAndNewlineInLabelValues) {
  EXPECT_EQ(metrics::EscapeLabelValue(R"(a\b"c)"
                                      "\n"
                                      "d"),
            R"(a\\b\"c\nd)");
  EXPECT_EQ(metrics::EscapeLabelValue("plain"), "plain");
}

TEST(MetricsText, EscapesBackslashAndNewlineButNotQuotesInHelp) {
  EXPECT_EQ(metrics::EscapeHelp("a \"b\" \\ c\nd"), "a \"b\" \\\\ c\\nd");
}

TEST(MetricsText, FormatsValuesAsPrometheusReadsThem) {
  EXPECT_EQ(metrics::FormatValue(0), "0");
  EXPECT_EQ(metrics::FormatValue(42), "42");
  EXPECT_EQ(metrics::FormatValue(-3), "-3");
  EXPECT_EQ(metrics::FormatValue(0.005), "0.005");
  EXPECT_EQ(metrics::FormatValue(2.5), "2.5");
  EXPECT_EQ(metrics::FormatValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(metrics::FormatValue(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(metrics::FormatValue(0.0 / 0.0), "NaN");
}

TEST(MetricsRegistry, RendersHelpTypeAndSortedSeries) {
  Registry registry;
  auto& counter = registry.AddCounter("cairn_things_total", "Things done.", {"queue"});
  counter.Increment({"b"}, 2);
  counter.Increment({"a"});
  counter.Increment({"a"});
  auto& gauge = registry.AddGauge("cairn_level", "A level.");
  gauge.Set({}, 1.5);
  EXPECT_EQ(registry.Render(),
            "# HELP cairn_things_total Things done.\n"
            "# TYPE cairn_things_total counter\n"
            "cairn_things_total{queue=\"a\"} 2\n"
            "cairn_things_total{queue=\"b\"} 2\n"
            "# HELP cairn_level A level.\n"
            "# TYPE cairn_level gauge\n"
            "cairn_level 1.5\n");
}

TEST(MetricsRegistry, EscapesLabelValuesWhenRendering) {
  Registry registry;
  auto& counter = registry.AddCounter("cairn_x_total", "Help with \\ and\nnewline.", {"workflow"});
  counter.Increment({"say \"hi\"\\\n"});
  const std::string text = registry.Render();
  EXPECT_TRUE(Contains(text, "# HELP cairn_x_total Help with \\\\ and\\nnewline.\n")) << text;
  EXPECT_TRUE(Contains(text, "cairn_x_total{workflow=\"say \\\"hi\\\"\\\\\\n\"} 1\n")) << text;
}

TEST(MetricsRegistry, UnlabelledCounterIsRenderedAtZeroBeforeAnyIncrement) {
  Registry registry;
  registry.AddCounter("cairn_leases_reaped_total", "Reaped.");
  EXPECT_TRUE(Contains(registry.Render(), "\ncairn_leases_reaped_total 0\n"));
}

TEST(MetricsRegistry, CounterIgnoresNegativeDeltas) {
  Registry registry;
  auto& counter = registry.AddCounter("cairn_c_total", "C.");
  counter.Increment({}, 3);
  counter.Increment({}, -1);
  EXPECT_EQ(counter.Value(), 3);
}

TEST(MetricsRegistry, RefusesInvalidNamesWrongLabelCountsAndDuplicates) {
  Registry registry;
  EXPECT_THROW(registry.AddCounter("9bad", "x"), std::invalid_argument);
  EXPECT_THROW(registry.AddCounter("cairn_ok_total", "x", {"bad-label"}), std::invalid_argument);
  EXPECT_THROW(registry.AddCounter("cairn_ok2_total", "x", {"__reserved"}), std::invalid_argument);
  EXPECT_THROW(registry.AddHistogram("cairn_h", "x", {"le"}, {1}), std::invalid_argument);
  EXPECT_THROW(registry.AddHistogram("cairn_h2", "x", {}, {2, 1}), std::invalid_argument);
  auto& counter = registry.AddCounter("cairn_c_total", "x", {"a", "b"});
  EXPECT_THROW(counter.Increment({"only one"}), std::invalid_argument);
  EXPECT_THROW(registry.AddGauge("cairn_c_total", "again"), std::invalid_argument);
}

TEST(MetricsRegistry, FoldsLabelSetsBeyondTheBoundIntoOneOverflowSeries) {
  CounterFamily counter("cairn_bounded_total", "Bounded.", {"workflow"}, 3);
  for (int i = 0; i < 10; ++i) counter.Increment({"w" + std::to_string(i)});
  EXPECT_EQ(counter.Value({"w0"}), 1);
  EXPECT_EQ(counter.Value({"w2"}), 1);
  EXPECT_EQ(counter.Value({"w3"}), 0);
  EXPECT_EQ(counter.Value({std::string(metrics::kOverflowLabel)}), 7);
  // Series already known keep counting.
  counter.Increment({"w1"});
  EXPECT_EQ(counter.Value({"w1"}), 2);
  std::string text;
  counter.Render(text);
  EXPECT_TRUE(Contains(text, "cairn_bounded_total{workflow=\"_other\"} 7\n")) << text;
}

TEST(MetricsHistogram, CountsIntoInclusiveCumulativeBuckets) {
  HistogramFamily histogram("cairn_d_seconds", "D.", {"step"}, {0.1, 1, 10});
  for (double v : {0.05, 0.1, 0.5, 1.0, 5.0, 100.0}) histogram.Observe({"s"}, v);
  auto snapshot = histogram.Get({"s"});
  ASSERT_EQ(snapshot.cumulative.size(), 4u);
  EXPECT_EQ(snapshot.cumulative[0], 2u);  // 0.05, 0.1 (le is inclusive)
  EXPECT_EQ(snapshot.cumulative[1], 4u);  // + 0.5, 1.0
  EXPECT_EQ(snapshot.cumulative[2], 5u);  // + 5.0
  EXPECT_EQ(snapshot.cumulative[3], 6u);  // + 100 in +Inf
  EXPECT_EQ(snapshot.count, 6u);
  EXPECT_DOUBLE_EQ(snapshot.sum, 106.65);
}

TEST(MetricsHistogram, RendersBucketsWithLeLastThenSumAndCount) {
  HistogramFamily histogram("cairn_d_seconds", "D.", {"workflow", "step"}, {0.5, 2.5});
  histogram.Observe({"w", "s"}, 0.25);
  histogram.Observe({"w", "s"}, 3);
  std::string text;
  histogram.Render(text);
  EXPECT_EQ(text,
            "# HELP cairn_d_seconds D.\n"
            "# TYPE cairn_d_seconds histogram\n"
            "cairn_d_seconds_bucket{workflow=\"w\",step=\"s\",le=\"0.5\"} 1\n"
            "cairn_d_seconds_bucket{workflow=\"w\",step=\"s\",le=\"2.5\"} 1\n"
            "cairn_d_seconds_bucket{workflow=\"w\",step=\"s\",le=\"+Inf\"} 2\n"
            "cairn_d_seconds_sum{workflow=\"w\",step=\"s\"} 3.25\n"
            "cairn_d_seconds_count{workflow=\"w\",step=\"s\"} 2\n");
}

TEST(MetricsHistogram, StepDurationBucketsIncreaseFromMillisecondsToMinutes) {
  auto buckets = StepDurationBuckets();
  ASSERT_GE(buckets.size(), 10u);
  EXPECT_LE(buckets.front(), 0.005);
  EXPECT_GE(buckets.back(), 300);
  for (size_t i = 1; i < buckets.size(); ++i) EXPECT_LT(buckets[i - 1], buckets[i]);
}

TEST(MetricsConcurrency, CountsEveryIncrementFromManyThreads) {
  CounterFamily counter("cairn_c_total", "C.", {"q"});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) counter.Increment({i % 2 ? "a" : "b"});
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(counter.Value({"a"}) + counter.Value({"b"}), 40000);
}

TEST(StepOutcomeLabel, NamesRetriedFailedOrCommittedFromThePlanEvents) {
  auto event = [](std::string kind) {
    RunEvent e;
    e.kind = std::move(kind);
    return e;
  };
  EXPECT_EQ(StepOutcomeLabel({event("retried")}), "retried");
  EXPECT_EQ(StepOutcomeLabel({event("failed")}), "failed");
  EXPECT_EQ(StepOutcomeLabel({event("context"), event("step_committed"), event("completed")}),
            "committed");
}

TEST(CairnMetrics, RendersEveryFamilyWithCairnNames) {
  Metrics m;
  m.RunsClaimed("default", 3);
  m.StepEnded("orders", "reserve", kStepCommitted, 20ms, RunStatus::kRunning);
  m.StepEnded("orders", "charge", kStepCommitted, 30ms, RunStatus::kCompleted);
  m.StepEnded("orders", "charge", kStepRetried, 1ms, RunStatus::kReady);
  m.StepEnded("orders", "charge", kStepLost, 1ms, RunStatus::kRunning);
  m.StepEnded("orders", "charge", kStepFailed, 1ms, RunStatus::kFailed);
  m.LeasesReaped(2);
  m.SetSlots(1, 7);
  const std::string text = m.Render();
  for (const char* line : {
           "# TYPE cairn_runs_claimed_total counter\n",
           "cairn_runs_claimed_total{queue=\"default\"} 3\n",
           "cairn_steps_total{workflow=\"orders\",step=\"charge\",outcome=\"committed\"} 1\n",
           "cairn_steps_total{workflow=\"orders\",step=\"charge\",outcome=\"retried\"} 1\n",
           "cairn_steps_total{workflow=\"orders\",step=\"charge\",outcome=\"lost\"} 1\n",
           "cairn_steps_total{workflow=\"orders\",step=\"charge\",outcome=\"failed\"} 1\n",
           "cairn_steps_total{workflow=\"orders\",step=\"reserve\",outcome=\"committed\"} 1\n",
           "# TYPE cairn_step_duration_seconds histogram\n",
           "cairn_step_duration_seconds_bucket{workflow=\"orders\",step=\"reserve\",le=\"0.025\"} "
           "1\n",
           "cairn_step_duration_seconds_count{workflow=\"orders\",step=\"charge\"} 4\n",
           "cairn_runs_finished_total{workflow=\"orders\",status=\"completed\"} 1\n",
           "cairn_runs_finished_total{workflow=\"orders\",status=\"failed\"} 1\n",
           "cairn_leases_reaped_total 2\n",
           "# TYPE cairn_executor_slots gauge\n",
           "cairn_executor_slots{state=\"busy\"} 1\n",
           "cairn_executor_slots{state=\"idle\"} 7\n",
           "# TYPE cairn_worker_up gauge\n",
           "cairn_worker_up 0\n",
       }) {
    EXPECT_TRUE(Contains(text, line)) << "missing: " << line << "in:\n" << text;
  }
  // Only final statuses count as finished.
  EXPECT_FALSE(Contains(text, "status=\"ready\"")) << text;
  EXPECT_FALSE(Contains(text, "status=\"running\"")) << text;
}

TEST(CairnMetrics, IsHealthyOnlyWhileThePollerReachedTheDatabaseRecently) {
  Metrics m(std::chrono::milliseconds(0));  // window: 0 poll intervals + 1 s slack
  EXPECT_FALSE(m.Healthy());
  EXPECT_TRUE(Contains(m.HealthDetail(), "not reached the database yet"));
  m.PollerReachedDatabase();
  EXPECT_TRUE(m.Healthy());
  EXPECT_EQ(m.HealthDetail(), "ok");
  EXPECT_TRUE(Contains(m.Render(), "\ncairn_worker_up 1\n"));
  std::this_thread::sleep_for(1100ms);
  EXPECT_FALSE(m.Healthy());
  EXPECT_TRUE(Contains(m.HealthDetail(), "ms ago")) << m.HealthDetail();
  m.PollerReachedDatabase();
  EXPECT_TRUE(m.Healthy());
  m.MarkStopping();
  EXPECT_FALSE(m.Healthy());
  EXPECT_TRUE(Contains(m.HealthDetail(), "stopping"));
}

TEST(MetricsRoute, AnswersMetricsHealthAndNotFound) {
  Metrics m;
  auto metrics = RouteMetricsRequest("GET", "/metrics", m);
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_TRUE(Contains(metrics.body, "cairn_worker_up"));
  EXPECT_EQ(RouteMetricsRequest("GET", "/metrics?x=1", m).status, 200);
  EXPECT_EQ(RouteMetricsRequest("GET", "/healthz", m).status, 503);
  m.PollerReachedDatabase();
  auto health = RouteMetricsRequest("GET", "/healthz", m);
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  EXPECT_EQ(RouteMetricsRequest("GET", "/", m).status, 404);
  EXPECT_EQ(RouteMetricsRequest("GET", "/metrics/x", m).status, 404);
  EXPECT_EQ(RouteMetricsRequest("POST", "/metrics", m).status, 405);
  auto head = RouteMetricsRequest("HEAD", "/metrics", m);
  EXPECT_EQ(head.status, 200);
  const std::string bytes = SerializeResponse(head);
  EXPECT_TRUE(Contains(bytes, "Content-Length: " + std::to_string(head.body.size()) + "\r\n"));
  EXPECT_TRUE(bytes.size() >= 4 && bytes.substr(bytes.size() - 4) == "\r\n\r\n");
}

// A plain socket client: sends `request` as is, returns everything the server
// sent until it closed the connection.
std::string Exchange(int family, uint16_t port, const std::string& request) {
  int fd = ::socket(family, SOCK_STREAM, 0);
  if (fd < 0) return "";
  int rc;
  if (family == AF_INET6) {
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_port = htons(port);
    address.sin6_addr = in6addr_loopback;
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  }
  std::string response;
  if (rc == 0) {
    ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    char buffer[4096];
    ssize_t got;
    while ((got = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, got);
  }
  ::close(fd);
  return response;
}

std::string Get(int family, uint16_t port, const std::string& path) {
  return Exchange(family, port, "GET " + path + " HTTP/1.1\r\nHost: test\r\n\r\n");
}

TEST(MetricsServer, ServesMetricsHealthAndNotFoundOnIpv4) {
  Metrics m;
  m.RunsClaimed("default");
  MetricsServer server({"127.0.0.1:0"}, m);
  server.Start();
  ASSERT_GT(server.port(), 0);
  EXPECT_EQ(server.address(), "127.0.0.1:" + std::to_string(server.port()));

  const std::string metrics = Get(AF_INET, server.port(), "/metrics");
  EXPECT_EQ(metrics.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << metrics;
  EXPECT_TRUE(Contains(metrics, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  EXPECT_TRUE(Contains(metrics, "Connection: close\r\n"));
  EXPECT_TRUE(Contains(metrics, "cairn_runs_claimed_total{queue=\"default\"} 1\n")) << metrics;

  EXPECT_EQ(Get(AF_INET, server.port(), "/healthz").rfind("HTTP/1.1 503 ", 0), 0u);
  m.PollerReachedDatabase();
  const std::string health = Get(AF_INET, server.port(), "/healthz");
  EXPECT_EQ(health.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << health;
  EXPECT_EQ(health.substr(health.size() - 3), "ok\n");
  EXPECT_EQ(Get(AF_INET, server.port(), "/nope").rfind("HTTP/1.1 404 ", 0), 0u);
  EXPECT_EQ(Exchange(AF_INET, server.port(), "garbage\r\n\r\n").rfind("HTTP/1.1 400 ", 0), 0u);
  server.Stop();
  server.Stop();  // idempotent
}

TEST(MetricsServer, RefusesOversizedRequests) {
  Metrics m;
  MetricsServer server({"127.0.0.1:0"}, m);
  server.Start();
  for (std::size_t padding : {9000, 64 * 1024}) {
    const std::string huge =
        "GET /metrics HTTP/1.1\r\nX-Padding: " + std::string(padding, 'x') + "\r\n\r\n";
    EXPECT_EQ(Exchange(AF_INET, server.port(), huge).rfind("HTTP/1.1 431 ", 0), 0u) << padding;
  }
  // And keeps serving.
  EXPECT_EQ(Get(AF_INET, server.port(), "/metrics").rfind("HTTP/1.1 200 ", 0), 0u);
}

TEST(MetricsServer, ASilentClientTimesOutWithoutBlockingTheServerForever) {
  Metrics m;
  MetricsServerOptions options{"127.0.0.1:0"};
  options.io_timeout = 200ms;
  MetricsServer server(options, m);
  server.Start();
  int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(server.port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(silent, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(Get(AF_INET, server.port(), "/metrics").rfind("HTTP/1.1 200 ", 0), 0u);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
  ::close(silent);
}

TEST(MetricsServer, ServesOnIpv6Loopback) {
  int probe = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 any{};
  any.sin6_family = AF_INET6;
  any.sin6_addr = in6addr_loopback;
  const bool has_ipv6 =
      probe >= 0 && ::bind(probe, reinterpret_cast<sockaddr*>(&any), sizeof(any)) == 0;
  if (probe >= 0) ::close(probe);
  if (!has_ipv6) GTEST_SKIP() << "no IPv6 loopback here";
  Metrics m;
  MetricsServer server({"[::1]:0"}, m);
  server.Start();
  EXPECT_EQ(server.address(), "[::1]:" + std::to_string(server.port()));
  EXPECT_EQ(Get(AF_INET6, server.port(), "/metrics").rfind("HTTP/1.1 200 ", 0), 0u);
}

TEST(MetricsServer, BindFailureNamesTheAddress) {
  Metrics m;
  MetricsServer first({"127.0.0.1:0"}, m);
  first.Start();
  const std::string taken = "127.0.0.1:" + std::to_string(first.port());
  MetricsServer second({taken}, m);
  try {
    second.Start();
    FAIL() << "bound a port that is in use";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(Contains(e.what(), "metrics.listen")) << e.what();
    EXPECT_TRUE(Contains(e.what(), taken)) << e.what();
    EXPECT_TRUE(Contains(e.what(), "in use")) << e.what();
  }
}

}  // namespace
}  // namespace cairn
