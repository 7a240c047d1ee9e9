// Unit tests of cairn's metrics on prometheus-cpp: the bounded families
// (label order, overflow, refusals), the text format as Prometheus reads it
// (checked with promtool), histogram buckets, the backlog gauges and every
// family of Metrics. No database.
#include "metrics.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "test_paths.hpp"

namespace cairn {
namespace {

using namespace std::chrono_literals;
using metrics::Registry;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// promtool's verdict on an exposition: "" when it passes, else its output.
std::string PromtoolCheckMetrics(const std::string& text) {
  const std::string file = ::testing::TempDir() + "cairn-metrics.txt";
  std::ofstream(file, std::ios::trunc) << text;
  const std::string command = cairn::test::Promtool() + " check metrics < " + file + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return "cannot run " + command;
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  return status == 0 ? "" : "promtool exit " + std::to_string(status) + ":\n" + output;
}

TEST(MetricsRegistry, RendersHelpTypeAndEverySeriesWithLabelsByName) {
  Registry registry;
  auto& counter = registry.AddCounter("cairn_things_total", "Things done.", {"queue", "kind"});
  counter.Increment({"b", "x"}, 2);
  counter.Increment({"a", "x"});
  counter.Increment({"a", "x"});
  auto& gauge = registry.AddGauge("cairn_level", "A level.");
  gauge.Set({}, 1.5);
  const std::string text = registry.Render();
  for (const char* line :
       {"# HELP cairn_things_total Things done.\n", "# TYPE cairn_things_total counter\n",
        "cairn_things_total{kind=\"x\",queue=\"a\"} 2\n",
        "cairn_things_total{kind=\"x\",queue=\"b\"} 2\n", "# HELP cairn_level A level.\n",
        "# TYPE cairn_level gauge\n", "cairn_level 1.5\n"}) {
    EXPECT_TRUE(Contains(text, line)) << "missing: " << line << "in:\n" << text;
  }
  EXPECT_EQ(registry.Names(), (std::vector<std::string>{"cairn_things_total", "cairn_level"}));
  EXPECT_EQ(PromtoolCheckMetrics(text), "") << text;
}

TEST(MetricsRegistry, EscapesLabelValuesWhenRendering) {
  Registry registry;
  auto& counter = registry.AddCounter("cairn_x_total", "Help.", {"workflow"});
  counter.Increment({"say \"hi\"\\\n"});
  const std::string text = registry.Render();
  EXPECT_TRUE(Contains(text, "cairn_x_total{workflow=\"say \\\"hi\\\"\\\\\\n\"} 1\n")) << text;
  EXPECT_EQ(PromtoolCheckMetrics(text), "") << text;
}

TEST(MetricsRegistry, UnlabelledSeriesAreRenderedAtZeroBeforeAnyUpdate) {
  Registry registry;
  registry.AddCounter("cairn_leases_reaped_total", "Reaped.");
  registry.AddGauge("cairn_g", "G.");
  const std::string text = registry.Render();
  EXPECT_TRUE(Contains(text, "\ncairn_leases_reaped_total 0\n")) << text;
  EXPECT_TRUE(Contains(text, "\ncairn_g 0\n")) << text;
}

TEST(MetricsRegistry, CounterIgnoresNegativeDeltas) {
  Registry registry;
  auto& counter = registry.AddCounter("cairn_c_total", "C.");
  counter.Increment({}, 3);
  counter.Increment({}, -1);
  EXPECT_EQ(counter.Value(), 3);
}

TEST(MetricsRegistry, RefusesInvalidNamesLabelsHelpWrongLabelCountsAndDuplicates) {
  Registry registry;
  EXPECT_THROW(registry.AddCounter("9bad", "x"), std::invalid_argument);
  EXPECT_THROW(registry.AddCounter("cairn_ok_total", "x", {"bad-label"}), std::invalid_argument);
  EXPECT_THROW(registry.AddCounter("cairn_ok2_total", "x", {"__reserved"}), std::invalid_argument);
  EXPECT_THROW(registry.AddCounter("cairn_ok3_total", "x", {"a", "a"}), std::invalid_argument);
  EXPECT_THROW(registry.AddHistogram("cairn_h", "x", {"le"}, {1}), std::invalid_argument);
  EXPECT_THROW(registry.AddHistogram("cairn_h2", "x", {}, {2, 1}), std::invalid_argument);
  // prometheus-cpp 1.0 writes help text as is: a newline would break the format.
  EXPECT_THROW(registry.AddGauge("cairn_h3", "two\nlines"), std::invalid_argument);
  EXPECT_THROW(registry.AddGauge("cairn_h4", "back\\slash"), std::invalid_argument);
  auto& counter = registry.AddCounter("cairn_c_total", "x", {"a", "b"});
  EXPECT_THROW(counter.Increment({"only one"}), std::invalid_argument);
  EXPECT_THROW(registry.AddGauge("cairn_c_total", "again"), std::invalid_argument);
  EXPECT_THROW(registry.AddCounter("cairn_c_total", "again"), std::invalid_argument);
  // Nothing refused was registered.
  EXPECT_EQ(registry.Names(), (std::vector<std::string>{"cairn_c_total"}));
}

TEST(MetricsRegistry, FoldsLabelSetsBeyondTheBoundIntoOneOverflowSeries) {
  Registry registry;
  auto& counter = registry.AddCounter("cairn_bounded_total", "Bounded.", {"workflow"}, 3);
  for (int i = 0; i < 10; ++i) counter.Increment({"w" + std::to_string(i)});
  EXPECT_EQ(counter.Value({"w0"}), 1);
  EXPECT_EQ(counter.Value({"w2"}), 1);
  EXPECT_EQ(counter.Value({"w3"}), 0);
  EXPECT_EQ(counter.Value({std::string(metrics::kOverflowLabel)}), 7);
  EXPECT_EQ(counter.size(), 4u);  // three, and the overflow series
  // Series already known keep counting.
  counter.Increment({"w1"});
  EXPECT_EQ(counter.Value({"w1"}), 2);
  const std::string text = registry.Render();
  EXPECT_TRUE(Contains(text, "cairn_bounded_total{workflow=\"_other\"} 7\n")) << text;
  EXPECT_FALSE(Contains(text, "w9")) << text;
}

TEST(MetricsRegistry, AGaugeFamilyCanBeCleared) {
  Registry registry;
  auto& gauge = registry.AddGauge("cairn_q", "Q.", {"queue"});
  gauge.Set({"a"}, 1);
  gauge.Set({"b"}, 2);
  gauge.Clear();
  EXPECT_EQ(gauge.size(), 0u);
  EXPECT_FALSE(Contains(registry.Render(), "cairn_q{"));
  gauge.Set({"c"}, 3);
  EXPECT_TRUE(Contains(registry.Render(), "cairn_q{queue=\"c\"} 3\n"));
}

TEST(MetricsHistogram, CountsIntoInclusiveCumulativeBuckets) {
  Registry registry;
  auto& histogram = registry.AddHistogram("cairn_wait_seconds", "D.", {"step"}, {0.1, 1, 10});
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
  Registry registry;
  auto& histogram =
      registry.AddHistogram("cairn_wait_seconds", "D.", {"workflow", "step"}, {0.5, 2.5});
  histogram.Observe({"w", "s"}, 0.25);
  histogram.Observe({"w", "s"}, 3);
  const std::string text = registry.Render();
  for (const char* line : {"# TYPE cairn_wait_seconds histogram\n",
                           "cairn_wait_seconds_bucket{step=\"s\",workflow=\"w\",le=\"0.5\"} 1\n",
                           "cairn_wait_seconds_bucket{step=\"s\",workflow=\"w\",le=\"2.5\"} 1\n",
                           "cairn_wait_seconds_bucket{step=\"s\",workflow=\"w\",le=\"+Inf\"} 2\n",
                           "cairn_wait_seconds_sum{step=\"s\",workflow=\"w\"} 3.25\n",
                           "cairn_wait_seconds_count{step=\"s\",workflow=\"w\"} 2\n"}) {
    EXPECT_TRUE(Contains(text, line)) << "missing: " << line << "in:\n" << text;
  }
  EXPECT_EQ(PromtoolCheckMetrics(text), "") << text;
}

TEST(MetricsHistogram, StepDurationBucketsIncreaseFromMillisecondsToMinutes) {
  auto buckets = StepDurationBuckets();
  ASSERT_GE(buckets.size(), 10u);
  EXPECT_LE(buckets.front(), 0.005);
  EXPECT_GE(buckets.back(), 300);
  for (size_t i = 1; i < buckets.size(); ++i) EXPECT_LT(buckets[i - 1], buckets[i]);
}

TEST(MetricsConcurrency, CountsEveryIncrementFromManyThreads) {
  Registry registry;
  auto& counter = registry.AddCounter("cairn_c_total", "C.", {"q"});
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

// Every family cairn exports, as an operator reads it.
const std::vector<std::string>& CairnFamilies() {
  static const std::vector<std::string> kNames = {
      "cairn_build_info",
      "cairn_worker_healthy",
      "cairn_worker_ready",
      "cairn_runs_claimed_total",
      "cairn_claim_batch_size",
      "cairn_claim_duration_seconds",
      "cairn_steps_total",
      "cairn_step_duration_seconds",
      "cairn_runs_finished_total",
      "cairn_runs_handed_back_total",
      "cairn_rate_limited_total",
      "cairn_stack_lock_contention_total",
      "cairn_occ_conflicts_total",
      "cairn_lease_renewals_total",
      "cairn_leases_lost_total",
      "cairn_leases_reaped_total",
      "cairn_waits_expired_total",
      "cairn_deadlines_exceeded_total",
      "cairn_signals_sent_total",
      "cairn_schedule_fires_total",
      "cairn_schedule_skips_total",
      "cairn_database_errors_total",
      "cairn_database_connections",
      "cairn_executor_slots",
      "cairn_backlog_reader",
      "cairn_queue_runs",
      "cairn_queue_oldest_due_age_seconds",
      "cairn_stranded_runs",
  };
  return kNames;
}

// Records into every family once.
void RecordEverything(Metrics& m) {
  m.SetBuildInfo("0.1.0", "1.2", "5");
  m.SetWorkerHealth(true, false);
  m.Claimed(3ms, 3);
  m.RunsClaimed("default", 3);
  m.StepEnded("orders", "reserve", kStepCommitted, 20ms, RunStatus::kRunning);
  m.StepEnded("orders", "charge", kStepCommitted, 30ms, RunStatus::kCompleted);
  m.StepEnded("orders", "charge", kStepRetried, 1ms, RunStatus::kReady);
  m.StepEnded("orders", "charge", kStepLost, 1ms, RunStatus::kRunning);
  m.StepEnded("orders", "charge", kStepFailed, 1ms, RunStatus::kFailed);
  m.RunHandedBack();
  m.RateLimited("geocoder");
  m.StackLockContended();
  m.OccConflict();
  m.LeasesRenewed(4);
  m.LeasesLost(1);
  m.LeasesReaped(2);
  m.WaitsExpired(5);
  m.DeadlinesExceeded(2);
  m.SignalSent("delivered");
  m.SignalSent("stored");
  m.ScheduleFired("nightly", 1);
  m.ScheduleSkipped("nightly", "missed");
  m.DatabaseError("transient");
  m.SetDatabaseConnections(7);
  m.SetSlots(1, 7);
  BacklogReading reading;
  reading.runs = {{"default", "ready", 4}, {"default", "waiting", 2}, {"mail", "delayed", 1}};
  reading.oldest_due_age_seconds = {{"default", 12.5}};
  reading.stranded = {{"mail", 1}};
  m.SetBacklog(reading);
}

TEST(CairnMetrics, RendersEveryFamilyWithCairnNamesThatPromtoolAccepts) {
  Metrics m;
  EXPECT_EQ(m.registry().Names(), CairnFamilies());
  RecordEverything(m);
  const std::string text = m.Render();
  for (const auto& name : CairnFamilies()) {
    EXPECT_TRUE(Contains(text, "# HELP " + name + " ")) << name << " in:\n" << text;
  }
  for (const char* line : {
           "cairn_build_info{abi_version=\"1.2\",schema_version=\"5\",version=\"0.1.0\"} 1\n",
           "cairn_worker_healthy 1\n",
           "cairn_worker_ready 0\n",
           "cairn_runs_claimed_total{queue=\"default\"} 3\n",
           "cairn_claim_batch_size_count 1\n",
           "cairn_claim_batch_size_sum 3\n",
           "cairn_steps_total{outcome=\"committed\",step=\"charge\",workflow=\"orders\"} 1\n",
           "cairn_steps_total{outcome=\"retried\",step=\"charge\",workflow=\"orders\"} 1\n",
           "cairn_steps_total{outcome=\"lost\",step=\"charge\",workflow=\"orders\"} 1\n",
           "cairn_steps_total{outcome=\"failed\",step=\"charge\",workflow=\"orders\"} 1\n",
           "cairn_step_duration_seconds_bucket{step=\"reserve\",workflow=\"orders\",le=\"0.025\"} "
           "1\n",
           "cairn_step_duration_seconds_count{step=\"charge\",workflow=\"orders\"} 4\n",
           "cairn_runs_finished_total{status=\"completed\",workflow=\"orders\"} 1\n",
           "cairn_runs_finished_total{status=\"failed\",workflow=\"orders\"} 1\n",
           "cairn_runs_handed_back_total 1\n",
           "cairn_rate_limited_total{queue=\"geocoder\"} 1\n",
           "cairn_stack_lock_contention_total 1\n",
           "cairn_occ_conflicts_total 1\n",
           "cairn_lease_renewals_total 4\n",
           "cairn_leases_lost_total 1\n",
           "cairn_leases_reaped_total 2\n",
           "cairn_waits_expired_total 5\n",
           "cairn_deadlines_exceeded_total 2\n",
           "cairn_signals_sent_total{outcome=\"delivered\"} 1\n",
           "cairn_signals_sent_total{outcome=\"stored\"} 1\n",
           "cairn_schedule_fires_total{schedule=\"nightly\"} 1\n",
           "cairn_schedule_skips_total{reason=\"missed\",schedule=\"nightly\"} 1\n",
           "cairn_database_errors_total{class=\"transient\"} 1\n",
           "cairn_database_errors_total{class=\"in_doubt\"} 0\n",
           "cairn_database_errors_total{class=\"permanent\"} 0\n",
           "cairn_database_connections 7\n",
           "cairn_executor_slots{state=\"busy\"} 1\n",
           "cairn_executor_slots{state=\"idle\"} 7\n",
           "cairn_backlog_reader 1\n",
           "cairn_queue_runs{queue=\"default\",state=\"ready\"} 4\n",
           "cairn_queue_runs{queue=\"default\",state=\"waiting\"} 2\n",
           "cairn_queue_runs{queue=\"default\",state=\"compensation_failed\"} 0\n",
           "cairn_queue_runs{queue=\"mail\",state=\"delayed\"} 1\n",
           "cairn_queue_runs{queue=\"mail\",state=\"ready\"} 0\n",
           "cairn_queue_oldest_due_age_seconds{queue=\"default\"} 12.5\n",
           "cairn_queue_oldest_due_age_seconds{queue=\"mail\"} 0\n",
           "cairn_stranded_runs{queue=\"mail\"} 1\n",
           "cairn_stranded_runs{queue=\"default\"} 0\n",
       }) {
    EXPECT_TRUE(Contains(text, line)) << "missing: " << line << "in:\n" << text;
  }
  // Only final statuses count as finished.
  EXPECT_FALSE(Contains(text, "status=\"ready\"")) << text;
  EXPECT_FALSE(Contains(text, "status=\"running\"")) << text;
  EXPECT_EQ(PromtoolCheckMetrics(text), "") << text;
}

TEST(CairnMetrics, ABacklogReadingSetsEveryStateOfEveryQueueAndClearingDropsThem) {
  Metrics m;
  BacklogReading first;
  first.runs = {{"a", "ready", 2}, {"b", "running", 1}};
  m.SetBacklog(first);
  // A queue seen before and absent now reads 0, not its old value.
  BacklogReading second;
  second.runs = {{"b", "running", 3}};
  m.SetBacklog(second);
  std::string text = m.Render();
  EXPECT_TRUE(Contains(text, "cairn_queue_runs{queue=\"a\",state=\"ready\"} 0\n")) << text;
  EXPECT_TRUE(Contains(text, "cairn_queue_runs{queue=\"b\",state=\"running\"} 3\n")) << text;
  m.ClearBacklog();
  text = m.Render();
  EXPECT_TRUE(Contains(text, "cairn_backlog_reader 0\n")) << text;
  EXPECT_FALSE(Contains(text, "cairn_queue_runs{")) << text;
  EXPECT_FALSE(Contains(text, "cairn_queue_oldest_due_age_seconds{")) << text;
  EXPECT_FALSE(Contains(text, "cairn_stranded_runs{")) << text;
}

TEST(CairnMetrics, RefreshesGaugesFromItsScrapeHooksBeforeRendering) {
  Metrics m;
  int scrapes = 0;
  m.OnScrape([&] {
    ++scrapes;
    m.SetWorkerHealth(scrapes % 2 == 1, true);
  });
  EXPECT_TRUE(Contains(m.Render(), "\ncairn_worker_healthy 1\n"));
  EXPECT_TRUE(Contains(m.Render(), "\ncairn_worker_healthy 0\n"));
  EXPECT_EQ(scrapes, 2);
}

TEST(CairnMetrics, ARunIdLikeLabelValueCannotGrowAFamilyWithoutBound) {
  Metrics m;
  for (int i = 0; i < 5000; ++i) m.RunsClaimed("queue-" + std::to_string(i));
  const std::string text = m.Render();
  EXPECT_TRUE(Contains(text, "cairn_runs_claimed_total{queue=\"_other\"} 4000\n")) << "";
}

}  // namespace
}  // namespace cairn
