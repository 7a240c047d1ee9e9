// Prometheus metrics of one cairn process: a small registry of counter, gauge
// and histogram families with bounded label sets, rendered in the text
// exposition format 0.0.4, and `Metrics`, the families the worker records
// into. No I/O here (the HTTP side is daemon/metrics_server). Every method is
// thread-safe; families live as long as their registry.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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

// Text format helpers, exposed for tests.
std::string EscapeLabelValue(std::string_view value);  // \ " and newline
std::string EscapeHelp(std::string_view help);         // \ and newline
std::string FormatValue(double value);                 // shortest round trip, +Inf, -Inf, NaN

class Family {
 public:
  virtual ~Family() = default;
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  const std::string& name() const { return name_; }
  // Appends the HELP and TYPE lines and every series, sorted by label values.
  virtual void Render(std::string& out) const = 0;

 protected:
  // Throws std::invalid_argument for a name or label name Prometheus refuses.
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::string_view type, std::size_t max_series);
  // The key to store `values` under: themselves, or the overflow key when the
  // family is full. Throws std::invalid_argument when the count is wrong.
  // Called with mutex_ held; `size` is the current number of series.
  LabelValues KeyFor(const LabelValues& values, bool present, std::size_t size) const;
  void RenderHeader(std::string& out) const;
  // `{a="x",b="y"}` with an optional extra label (le) last; "" when empty.
  std::string RenderLabels(const LabelValues& values, std::string_view extra_name = {},
                           std::string_view extra_value = {}) const;

  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  std::string type_;
  std::size_t max_series_;
  mutable std::mutex mutex_;
};

class CounterFamily : public Family {
 public:
  CounterFamily(std::string name, std::string help, std::vector<std::string> label_names,
                std::size_t max_series = kDefaultMaxSeries);
  // delta must not be negative (counters only go up); negative deltas are ignored.
  void Increment(const LabelValues& values = {}, double delta = 1);
  double Value(const LabelValues& values = {}) const;  // 0 for a series never touched
  void Render(std::string& out) const override;

 private:
  std::map<LabelValues, double> series_;
};

class GaugeFamily : public Family {
 public:
  GaugeFamily(std::string name, std::string help, std::vector<std::string> label_names,
              std::size_t max_series = kDefaultMaxSeries);
  void Set(const LabelValues& values, double value);
  void Add(const LabelValues& values, double delta);
  double Value(const LabelValues& values = {}) const;
  void Render(std::string& out) const override;

 private:
  std::map<LabelValues, double> series_;
};

class HistogramFamily : public Family {
 public:
  // upper_bounds: strictly increasing, finite; +Inf is implicit.
  HistogramFamily(std::string name, std::string help, std::vector<std::string> label_names,
                  std::vector<double> upper_bounds, std::size_t max_series = kDefaultMaxSeries);
  void Observe(const LabelValues& values, double value);
  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per upper bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Get(const LabelValues& values) const;
  const std::vector<double>& upper_bounds() const { return upper_bounds_; }
  void Render(std::string& out) const override;

 private:
  struct Series {
    std::vector<uint64_t> counts;  // per bucket, not cumulative; last is +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  std::vector<double> upper_bounds_;
  std::map<LabelValues, Series> series_;
};

// Owns families; renders them in registration order. Registering a name twice
// throws std::invalid_argument.
class Registry {
 public:
  CounterFamily& AddCounter(std::string name, std::string help,
                            std::vector<std::string> label_names = {});
  GaugeFamily& AddGauge(std::string name, std::string help,
                        std::vector<std::string> label_names = {});
  HistogramFamily& AddHistogram(std::string name, std::string help,
                                std::vector<std::string> label_names,
                                std::vector<double> upper_bounds);
  std::string Render() const;

 private:
  template <typename F>
  F& Add(std::unique_ptr<F> family);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Family>> families_;
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

// The metrics of a `cairn run` process. The worker and its executors record;
// the metrics server renders and asks for health.
class Metrics {
 public:
  // The worker is healthy while its poller reached the database within the
  // last three poll intervals (plus a second of slack for slow queries).
  explicit Metrics(std::chrono::milliseconds poll_interval = std::chrono::seconds(1));

  void RunsClaimed(std::string_view queue, int64_t count = 1);
  // One step attempt ended (outcome: kStepCommitted, ...). When the run's
  // status after it is final, also counts the run as finished.
  void StepEnded(std::string_view workflow, std::string_view step, std::string_view outcome,
                 std::chrono::steady_clock::duration duration, RunStatus status_after);
  void RunFinished(std::string_view workflow, RunStatus status);
  void LeasesReaped(int64_t count);
  void SetSlots(int busy, int idle);

  // The poller completed a round trip to the database.
  void PollerReachedDatabase();
  // The daemon is draining: report unhealthy from now on.
  void MarkStopping();
  bool Healthy() const;
  // One line for /healthz: "ok" or why not.
  std::string HealthDetail() const;

  // The text exposition of every family (cairn_worker_up is refreshed first).
  std::string Render();

  metrics::Registry& registry() { return registry_; }

 private:
  std::chrono::steady_clock::duration health_window_;
  std::atomic<int64_t> last_contact_{0};  // steady_clock ticks; 0 = never
  std::atomic<bool> stopping_{false};

  metrics::Registry registry_;
  metrics::CounterFamily& runs_claimed_;
  metrics::CounterFamily& steps_;
  metrics::HistogramFamily& step_duration_;
  metrics::CounterFamily& runs_finished_;
  metrics::CounterFamily& leases_reaped_;
  metrics::GaugeFamily& executor_slots_;
  metrics::GaugeFamily& worker_up_;
};

}  // namespace cairn
