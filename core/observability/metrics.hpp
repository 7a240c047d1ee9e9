// Prometheus metrics of one cairn process, on prometheus-cpp: families whose
// label sets are bounded (a misused label folds into one overflow series
// instead of growing memory), a registry rendered with prometheus-cpp's
// TextSerializer, and `Metrics`, the families cairn records into. No I/O
// here (the daemon serves the text over HTTP). Every method is thread-safe;
// families live as long as their registry.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "model.hpp"

namespace cairn::metrics {

// One value per label name of the family, in the family's order.
using LabelValues = std::vector<std::string>;

// A family keeps at most this many label sets. Past it, a new label set is
// folded into one series whose every label value is kOverflowLabel, so totals
// stay right and memory stays bounded even if a label is misused.
inline constexpr std::size_t kDefaultMaxSeries = 1000;
inline constexpr std::string_view kOverflowLabel = "_other";

// The series of one prometheus-cpp family, at most max_series label sets.
template <typename T>
class BoundedFamily {
 public:
  BoundedFamily(const BoundedFamily&) = delete;
  BoundedFamily& operator=(const BoundedFamily&) = delete;

  const std::string& name() const { return family_.GetName(); }
  const std::vector<std::string>& label_names() const { return label_names_; }
  // How many label sets the family holds (the overflow series included).
  std::size_t size() const;
  // The label sets the family holds, sorted.
  std::vector<LabelValues> known() const;

 protected:
  using Factory = std::function<T&(prometheus::Family<T>&, const prometheus::Labels&)>;
  // Throws std::invalid_argument for a label name Prometheus refuses.
  BoundedFamily(prometheus::Family<T>& family, std::vector<std::string> label_names,
                std::size_t max_series, Factory factory);
  // The series for `values`: its own, or the overflow series when the family
  // is full. Throws std::invalid_argument when the count of values is wrong.
  T& Series(const LabelValues& values);
  // The series for `values` if it exists (no overflow, no creation).
  const T* Find(const LabelValues& values) const;
  // Drops every series (a gauge whose source went away).
  void RemoveAll();

 private:
  prometheus::Labels ToLabels(const LabelValues& values) const;

  prometheus::Family<T>& family_;
  std::vector<std::string> label_names_;
  std::size_t max_series_;
  Factory factory_;
  mutable std::mutex mutex_;
  std::set<LabelValues> known_;
};

class CounterFamily : public BoundedFamily<prometheus::Counter> {
 public:
  CounterFamily(prometheus::Family<prometheus::Counter>& family,
                std::vector<std::string> label_names, std::size_t max_series);
  // delta must not be negative (counters only go up); negative deltas are ignored.
  void Increment(const LabelValues& values = {}, double delta = 1);
  double Value(const LabelValues& values = {}) const;  // 0 for a series never touched
};

class GaugeFamily : public BoundedFamily<prometheus::Gauge> {
 public:
  GaugeFamily(prometheus::Family<prometheus::Gauge>& family, std::vector<std::string> label_names,
              std::size_t max_series);
  void Set(const LabelValues& values, double value);
  void Add(const LabelValues& values, double delta);
  double Value(const LabelValues& values = {}) const;
  void Clear() { RemoveAll(); }
};

class HistogramFamily : public BoundedFamily<prometheus::Histogram> {
 public:
  // upper_bounds: strictly increasing, finite; +Inf is implicit.
  HistogramFamily(prometheus::Family<prometheus::Histogram>& family,
                  std::vector<std::string> label_names, std::vector<double> upper_bounds,
                  std::size_t max_series);
  void Observe(const LabelValues& values, double value);
  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per upper bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Get(const LabelValues& values) const;
  const std::vector<double>& upper_bounds() const { return upper_bounds_; }

 private:
  std::vector<double> upper_bounds_;
};

// Owns families and renders them in the Prometheus text format 0.0.4.
// Registering a name twice, an invalid name or label name, or help text with
// a newline or backslash throws std::invalid_argument.
class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  CounterFamily& AddCounter(const std::string& name, const std::string& help,
                            std::vector<std::string> label_names = {},
                            std::size_t max_series = kDefaultMaxSeries);
  GaugeFamily& AddGauge(const std::string& name, const std::string& help,
                        std::vector<std::string> label_names = {},
                        std::size_t max_series = kDefaultMaxSeries);
  HistogramFamily& AddHistogram(const std::string& name, const std::string& help,
                                std::vector<std::string> label_names,
                                std::vector<double> upper_bounds,
                                std::size_t max_series = kDefaultMaxSeries);
  std::string Render() const;
  // The names of every registered family, in registration order.
  std::vector<std::string> Names() const;
  // What a query may name: every family with its type and label names.
  struct FamilyInfo {
    std::string name;
    std::string type;  // counter, gauge or histogram
    std::vector<std::string> label_names;
  };
  std::vector<FamilyInfo> Families() const;

 private:
  // Throws for an invalid or taken name, or help text that the text format
  // cannot hold. With mutex_ held.
  void Check(const std::string& name, const std::string& help) const;

  std::shared_ptr<prometheus::Registry> registry_;
  mutable std::mutex mutex_;
  std::vector<std::string> names_;
  std::vector<FamilyInfo> families_;
  std::vector<std::unique_ptr<CounterFamily>> counters_;
  std::vector<std::unique_ptr<GaugeFamily>> gauges_;
  std::vector<std::unique_ptr<HistogramFamily>> histograms_;
};

}  // namespace cairn::metrics

namespace cairn {

// Step outcomes as the `outcome` label says them.
inline constexpr std::string_view kStepCommitted = "committed";
inline constexpr std::string_view kStepRetried = "retried";
inline constexpr std::string_view kStepFailed = "failed";
inline constexpr std::string_view kStepLost = "lost";

// The outcome label of a committed step plan, from its lifecycle events:
// "retried", "failed" or "committed".
std::string_view StepOutcomeLabel(const std::vector<RunEvent>& events);

// Step duration buckets, in seconds: from a no-op step to a long remote call.
std::vector<double> StepDurationBuckets();

// The content type of Render()'s text.
inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// One reading of the fleet's backlog, from the database.
struct BacklogReading {
  struct QueueState {
    std::string queue;
    std::string state;  // ready, delayed, running, waiting, compensating, compensation_failed
    int64_t runs = 0;
  };
  std::vector<QueueState> runs;
  // Per queue: seconds since the oldest due run (ready or compensating) was due.
  std::vector<std::pair<std::string, double>> oldest_due_age_seconds;
  // Per queue: unfinished runs that no live worker can serve.
  std::vector<std::pair<std::string, int64_t>> stranded;
};

// The metrics of a `cairn run` process. The worker, its executors, the
// schedule service and the backlog monitor record; the HTTP server renders.
class Metrics {
 public:
  Metrics();

  void SetBuildInfo(std::string_view version, std::string_view abi_version,
                    std::string_view schema_version);
  // The worker's health (see core/engine/health.hpp), refreshed at each scrape.
  void SetWorkerHealth(bool healthy, bool ready);

  // One claim statement of the poller or of a slot: the runs it claimed and
  // its duration.
  void Claimed(std::chrono::steady_clock::duration duration, int64_t runs);
  // One claim a slot made in the statement of its run's last checkpoint:
  // the runs it claimed; its duration is the checkpoint's.
  void ClaimedWithCheckpoint(int64_t runs);
  void RunsClaimed(std::string_view queue, int64_t count = 1);
  // One step attempt ended (outcome: kStepCommitted, ...). When the run's
  // status after it is final, also counts the run as finished.
  void StepEnded(std::string_view workflow, std::string_view step, std::string_view outcome,
                 std::chrono::steady_clock::duration duration, RunStatus status_after);
  void RunFinished(std::string_view workflow, RunStatus status);
  void RunHandedBack();
  // A run handed back because its queue's rate limit had no token for its
  // next step (it is also counted by RunHandedBack).
  void RateLimited(std::string_view queue);
  void StackLockContended();
  void OccConflict();
  void LeasesRenewed(int64_t count);
  void LeasesLost(int64_t count);
  void LeasesReaped(int64_t count);
  void WaitsExpired(int64_t count);
  // Runs this daemon failed with code deadline_exceeded: by its sweeper, or
  // at a claim or checkpoint of its executors after the run's deadline.
  void DeadlinesExceeded(int64_t count);
  // A signal a step sent in its commit, by the store's outcome name.
  void SignalSent(std::string_view outcome);
  void ScheduleFired(std::string_view schedule, int64_t runs);
  // reason: "missed" (older ticks skipped by the missed policy) or
  // "unregistered" (a tick not started: its workflow is not registered).
  void ScheduleSkipped(std::string_view schedule, std::string_view reason, int64_t count = 1);
  // error_class: "transient", "in_doubt" or "permanent".
  void DatabaseError(std::string_view error_class);
  void SetDatabaseConnections(int64_t open);
  void SetSlots(int busy, int idle);

  // The backlog gauges: this process reads the backlog (reader) or not; a
  // process that does not clears them so the fleet exports one reading.
  void SetBacklog(const BacklogReading& reading);
  void ClearBacklog();

  // Runs before every Render (to refresh gauges read from elsewhere).
  void OnScrape(std::function<void()> refresh);
  // The text exposition of every family.
  std::string Render();

  metrics::Registry& registry() { return registry_; }

 private:
  metrics::Registry registry_;
  std::mutex scrape_mutex_;
  std::vector<std::function<void()>> on_scrape_;
  std::mutex backlog_mutex_;

  metrics::GaugeFamily& build_info_;
  metrics::GaugeFamily& worker_healthy_;
  metrics::GaugeFamily& worker_ready_;
  metrics::CounterFamily& runs_claimed_;
  metrics::HistogramFamily& claim_batch_;
  metrics::HistogramFamily& claim_duration_;
  metrics::CounterFamily& steps_;
  metrics::HistogramFamily& step_duration_;
  metrics::CounterFamily& runs_finished_;
  metrics::CounterFamily& runs_handed_back_;
  metrics::CounterFamily& rate_limited_;
  metrics::CounterFamily& stack_lock_contention_;
  metrics::CounterFamily& occ_conflicts_;
  metrics::CounterFamily& lease_renewals_;
  metrics::CounterFamily& leases_lost_;
  metrics::CounterFamily& leases_reaped_;
  metrics::CounterFamily& waits_expired_;
  metrics::CounterFamily& deadlines_exceeded_;
  metrics::CounterFamily& signals_sent_;
  metrics::CounterFamily& schedule_fires_;
  metrics::CounterFamily& schedule_skips_;
  metrics::CounterFamily& database_errors_;
  metrics::GaugeFamily& database_connections_;
  metrics::GaugeFamily& executor_slots_;
  metrics::GaugeFamily& backlog_reader_;
  metrics::GaugeFamily& queue_runs_;
  metrics::GaugeFamily& oldest_due_age_;
  metrics::GaugeFamily& stranded_runs_;
};

}  // namespace cairn
