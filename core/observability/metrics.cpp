// See metrics.hpp. The text format follows Prometheus' exposition format
// 0.0.4: a HELP and a TYPE line per family, then one line per series.
#include "metrics.hpp"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace cairn::metrics {

namespace {

bool IsMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool IsLabelName(std::string_view name) {
  if (name.empty() || name.find(':') != std::string_view::npos) return false;
  if (name.size() >= 2 && name[0] == '_' && name[1] == '_') return false;  // reserved
  return IsMetricName(name);
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  // Whole numbers (every counter) print without exponent or fraction.
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), static_cast<int64_t>(value));
    return std::string(buffer, end);
  }
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, end);
}

Family::Family(std::string name, std::string help, std::vector<std::string> label_names,
               std::string_view type, std::size_t max_series)
    : name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      type_(type),
      max_series_(std::max<std::size_t>(1, max_series)) {
  if (!IsMetricName(name_)) throw std::invalid_argument("invalid metric name \"" + name_ + "\"");
  for (const auto& label : label_names_) {
    if (!IsLabelName(label) || (type_ == "histogram" && label == "le")) {
      throw std::invalid_argument("metric " + name_ + ": invalid label name \"" + label + "\"");
    }
  }
}

LabelValues Family::KeyFor(const LabelValues& values, bool present, std::size_t size) const {
  if (values.size() != label_names_.size()) {
    throw std::invalid_argument("metric " + name_ + ": " + std::to_string(values.size()) +
                                " label values for " + std::to_string(label_names_.size()) +
                                " labels");
  }
  if (present || size < max_series_) return values;
  return LabelValues(label_names_.size(), std::string(kOverflowLabel));
}

void Family::RenderHeader(std::string& out) const {
  out += "# HELP " + name_ + " " + EscapeHelp(help_) + "\n";
  out += "# TYPE " + name_ + " " + type_ + "\n";
}

std::string Family::RenderLabels(const LabelValues& values, std::string_view extra_name,
                                 std::string_view extra_value) const {
  if (values.empty() && extra_name.empty()) return "";
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += label_names_[i] + "=\"" + EscapeLabelValue(values[i]) + "\"";
  }
  if (!extra_name.empty()) {
    if (!values.empty()) out += ',';
    out += std::string(extra_name) + "=\"" + EscapeLabelValue(extra_value) + "\"";
  }
  out += '}';
  return out;
}

CounterFamily::CounterFamily(std::string name, std::string help,
                             std::vector<std::string> label_names, std::size_t max_series)
    : Family(std::move(name), std::move(help), std::move(label_names), "counter", max_series) {
  // A counter without labels exists from the start: a 0 is information.
  if (label_names_.empty()) series_[{}] = 0;
}

void CounterFamily::Increment(const LabelValues& values, double delta) {
  if (!(delta >= 0)) return;
  std::lock_guard lock(mutex_);
  auto it = series_.find(values);
  if (it != series_.end()) {
    it->second += delta;
    return;
  }
  series_[KeyFor(values, false, series_.size())] += delta;
}

double CounterFamily::Value(const LabelValues& values) const {
  std::lock_guard lock(mutex_);
  auto it = series_.find(values);
  return it == series_.end() ? 0 : it->second;
}

void CounterFamily::Render(std::string& out) const {
  std::lock_guard lock(mutex_);
  RenderHeader(out);
  for (const auto& [values, value] : series_) {
    out += name_ + RenderLabels(values) + " " + FormatValue(value) + "\n";
  }
}

GaugeFamily::GaugeFamily(std::string name, std::string help, std::vector<std::string> label_names,
                         std::size_t max_series)
    : Family(std::move(name), std::move(help), std::move(label_names), "gauge", max_series) {
  if (label_names_.empty()) series_[{}] = 0;
}

void GaugeFamily::Set(const LabelValues& values, double value) {
  std::lock_guard lock(mutex_);
  auto it = series_.find(values);
  series_[KeyFor(values, it != series_.end(), series_.size())] = value;
}

void GaugeFamily::Add(const LabelValues& values, double delta) {
  std::lock_guard lock(mutex_);
  auto it = series_.find(values);
  series_[KeyFor(values, it != series_.end(), series_.size())] += delta;
}

double GaugeFamily::Value(const LabelValues& values) const {
  std::lock_guard lock(mutex_);
  auto it = series_.find(values);
  return it == series_.end() ? 0 : it->second;
}

void GaugeFamily::Render(std::string& out) const {
  std::lock_guard lock(mutex_);
  RenderHeader(out);
  for (const auto& [values, value] : series_) {
    out += name_ + RenderLabels(values) + " " + FormatValue(value) + "\n";
  }
}

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<std::string> label_names,
                                 std::vector<double> upper_bounds, std::size_t max_series)
    : Family(std::move(name), std::move(help), std::move(label_names), "histogram", max_series),
      upper_bounds_(std::move(upper_bounds)) {
  for (std::size_t i = 0; i < upper_bounds_.size(); ++i) {
    if (!std::isfinite(upper_bounds_[i]) || (i > 0 && upper_bounds_[i] <= upper_bounds_[i - 1])) {
      throw std::invalid_argument("histogram " + name_ +
                                  ": bucket bounds must be finite and strictly increasing");
    }
  }
  if (label_names_.empty()) series_[{}].counts.assign(upper_bounds_.size() + 1, 0);
}

void HistogramFamily::Observe(const LabelValues& values, double value) {
  if (std::isnan(value)) return;
  std::lock_guard lock(mutex_);
  auto it = series_.find(values);
  Series& series = series_[KeyFor(values, it != series_.end(), series_.size())];
  if (series.counts.empty()) series.counts.assign(upper_bounds_.size() + 1, 0);
  // The first bucket whose bound is >= value (bounds are inclusive: le).
  std::size_t bucket = 0;
  while (bucket < upper_bounds_.size() && value > upper_bounds_[bucket]) ++bucket;
  ++series.counts[bucket];
  series.sum += value;
  ++series.count;
}

HistogramFamily::Snapshot HistogramFamily::Get(const LabelValues& values) const {
  std::lock_guard lock(mutex_);
  Snapshot snapshot;
  snapshot.cumulative.assign(upper_bounds_.size() + 1, 0);
  auto it = series_.find(values);
  if (it == series_.end()) return snapshot;
  uint64_t running = 0;
  for (std::size_t i = 0; i < it->second.counts.size(); ++i) {
    running += it->second.counts[i];
    snapshot.cumulative[i] = running;
  }
  snapshot.sum = it->second.sum;
  snapshot.count = it->second.count;
  return snapshot;
}

void HistogramFamily::Render(std::string& out) const {
  std::lock_guard lock(mutex_);
  RenderHeader(out);
  for (const auto& [values, series] : series_) {
    uint64_t running = 0;
    for (std::size_t i = 0; i <= upper_bounds_.size(); ++i) {
      running += series.counts[i];
      const std::string le = i < upper_bounds_.size() ? FormatValue(upper_bounds_[i]) : "+Inf";
      out += name_ + "_bucket" + RenderLabels(values, "le", le) + " " +
             FormatValue(static_cast<double>(running)) + "\n";
    }
    const std::string labels = RenderLabels(values);
    out += name_ + "_sum" + labels + " " + FormatValue(series.sum) + "\n";
    out += name_ + "_count" + labels + " " + FormatValue(static_cast<double>(series.count)) + "\n";
  }
}

template <typename F>
F& Registry::Add(std::unique_ptr<F> family) {
  std::lock_guard lock(mutex_);
  for (const auto& existing : families_) {
    if (existing->name() == family->name()) {
      throw std::invalid_argument("metric " + family->name() + " is registered twice");
    }
  }
  F& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

CounterFamily& Registry::AddCounter(std::string name, std::string help,
                                    std::vector<std::string> label_names) {
  return Add(
      std::make_unique<CounterFamily>(std::move(name), std::move(help), std::move(label_names)));
}

GaugeFamily& Registry::AddGauge(std::string name, std::string help,
                                std::vector<std::string> label_names) {
  return Add(
      std::make_unique<GaugeFamily>(std::move(name), std::move(help), std::move(label_names)));
}

HistogramFamily& Registry::AddHistogram(std::string name, std::string help,
                                        std::vector<std::string> label_names,
                                        std::vector<double> upper_bounds) {
  return Add(std::make_unique<HistogramFamily>(std::move(name), std::move(help),
                                               std::move(label_names), std::move(upper_bounds)));
}

std::string Registry::Render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& family : families_) family->Render(out);
  return out;
}

}  // namespace cairn::metrics

namespace cairn {

namespace {

bool IsFinal(RunStatus status) {
  return status == RunStatus::kCompleted || status == RunStatus::kFailed ||
         status == RunStatus::kCancelled || status == RunStatus::kCompensationFailed;
}

int64_t Ticks(std::chrono::steady_clock::time_point t) { return t.time_since_epoch().count(); }

}  // namespace

std::string_view StepOutcomeLabel(const std::vector<RunEvent>& events) {
  for (const auto& event : events) {
    if (event.kind == "retried") return kStepRetried;
    if (event.kind == "failed") return kStepFailed;
  }
  return kStepCommitted;
}

std::vector<double> StepDurationBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

Metrics::Metrics(std::chrono::milliseconds poll_interval)
    : health_window_(3 * poll_interval + std::chrono::seconds(1)),
      runs_claimed_(registry_.AddCounter("cairn_runs_claimed_total",
                                         "Runs this worker claimed, by queue.", {"queue"})),
      steps_(registry_.AddCounter(
          "cairn_steps_total",
          "Step attempts this worker ended, by outcome: committed, retried (failed, will run "
          "again), failed (failed for good) or lost (lease or version fence lost, or the "
          "checkpoint was not confirmed).",
          {"workflow", "step", "outcome"})),
      step_duration_(registry_.AddHistogram(
          "cairn_step_duration_seconds",
          "Time from the start of a step attempt to its checkpoint (or its end when lost).",
          {"workflow", "step"}, StepDurationBuckets())),
      runs_finished_(registry_.AddCounter("cairn_runs_finished_total",
                                          "Runs this worker saw reach a final status, by status.",
                                          {"workflow", "status"})),
      leases_reaped_(
          registry_.AddCounter("cairn_leases_reaped_total",
                               "Runs whose expired lease this worker's reaper made ready again.")),
      executor_slots_(registry_.AddGauge("cairn_executor_slots",
                                         "Executor slots of this worker, by state: busy or idle.",
                                         {"state"})),
      worker_up_(registry_.AddGauge(
          "cairn_worker_up",
          "1 when the worker's poller reached the database within the last few poll intervals "
          "and the worker is not stopping, else 0.")) {
  executor_slots_.Set({"busy"}, 0);
  executor_slots_.Set({"idle"}, 0);
}

void Metrics::RunsClaimed(std::string_view queue, int64_t count) {
  runs_claimed_.Increment({std::string(queue)}, static_cast<double>(count));
}

void Metrics::StepEnded(std::string_view workflow, std::string_view step, std::string_view outcome,
                        std::chrono::steady_clock::duration duration, RunStatus status_after) {
  steps_.Increment({std::string(workflow), std::string(step), std::string(outcome)});
  step_duration_.Observe({std::string(workflow), std::string(step)},
                         std::chrono::duration<double>(duration).count());
  if (outcome != kStepLost && IsFinal(status_after)) RunFinished(workflow, status_after);
}

void Metrics::RunFinished(std::string_view workflow, RunStatus status) {
  runs_finished_.Increment({std::string(workflow), std::string(ToString(status))});
}

void Metrics::LeasesReaped(int64_t count) {
  leases_reaped_.Increment({}, static_cast<double>(count));
}

void Metrics::SetSlots(int busy, int idle) {
  executor_slots_.Set({"busy"}, busy);
  executor_slots_.Set({"idle"}, idle);
}

void Metrics::PollerReachedDatabase() { last_contact_ = Ticks(std::chrono::steady_clock::now()); }

void Metrics::MarkStopping() { stopping_ = true; }

bool Metrics::Healthy() const {
  const int64_t last = last_contact_.load();
  if (stopping_.load() || last == 0) return false;
  return Ticks(std::chrono::steady_clock::now()) - last <= health_window_.count();
}

std::string Metrics::HealthDetail() const {
  if (stopping_.load()) return "unhealthy: the worker is stopping";
  const int64_t last = last_contact_.load();
  if (last == 0) return "unhealthy: the poller has not reached the database yet";
  if (Healthy()) return "ok";
  const auto ago =
      std::chrono::steady_clock::duration(Ticks(std::chrono::steady_clock::now()) - last);
  return "unhealthy: the poller last reached the database " +
         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(ago).count()) +
         " ms ago";
}

std::string Metrics::Render() {
  worker_up_.Set({}, Healthy() ? 1 : 0);
  return registry_.Render();
}

}  // namespace cairn
