// See metrics.hpp. prometheus-cpp holds the values and writes the text
// format; this file adds the bound on label sets, label values given in the
// family's order, and cairn's families.
#include "metrics.hpp"

#include <prometheus/check_names.h>
#include <prometheus/text_serializer.h>

#include <cmath>
#include <map>
#include <stdexcept>

namespace cairn::metrics {

namespace {

void CheckLabelNames(const std::string& family, const std::vector<std::string>& names,
                     bool histogram) {
  std::set<std::string> seen;
  for (const auto& label : names) {
    if (!prometheus::CheckLabelName(label) || (histogram && label == "le") ||
        !seen.insert(label).second) {
      throw std::invalid_argument("metric " + family + ": invalid label name \"" + label + "\"");
    }
  }
}

}  // namespace

template <typename T>
BoundedFamily<T>::BoundedFamily(prometheus::Family<T>& family, std::vector<std::string> label_names,
                                std::size_t max_series, Factory factory)
    : family_(family),
      label_names_(std::move(label_names)),
      max_series_(std::max<std::size_t>(1, max_series)),
      factory_(std::move(factory)) {
  // A series without labels exists from the start: a 0 is information.
  if (label_names_.empty()) Series({});
}

template <typename T>
std::size_t BoundedFamily<T>::size() const {
  std::lock_guard lock(mutex_);
  return known_.size();
}

template <typename T>
std::vector<LabelValues> BoundedFamily<T>::known() const {
  std::lock_guard lock(mutex_);
  return {known_.begin(), known_.end()};
}

template <typename T>
prometheus::Labels BoundedFamily<T>::ToLabels(const LabelValues& values) const {
  if (values.size() != label_names_.size()) {
    throw std::invalid_argument("metric " + name() + ": " + std::to_string(values.size()) +
                                " label values for " + std::to_string(label_names_.size()) +
                                " labels");
  }
  prometheus::Labels labels;
  for (std::size_t i = 0; i < values.size(); ++i) labels.emplace(label_names_[i], values[i]);
  return labels;
}

template <typename T>
T& BoundedFamily<T>::Series(const LabelValues& values) {
  prometheus::Labels labels = ToLabels(values);
  std::lock_guard lock(mutex_);
  if (known_.count(values) == 0) {
    if (known_.size() >= max_series_) {
      const LabelValues overflow(label_names_.size(), std::string(kOverflowLabel));
      known_.insert(overflow);
      return factory_(family_, ToLabels(overflow));
    }
    known_.insert(values);
  }
  return factory_(family_, labels);
}

template <typename T>
const T* BoundedFamily<T>::Find(const LabelValues& values) const {
  std::lock_guard lock(mutex_);
  if (known_.count(values) == 0) return nullptr;
  // Add returns the existing series for known labels.
  return &factory_(family_, ToLabels(values));
}

template <typename T>
void BoundedFamily<T>::RemoveAll() {
  std::lock_guard lock(mutex_);
  for (const auto& values : known_) family_.Remove(&factory_(family_, ToLabels(values)));
  known_.clear();
}

template class BoundedFamily<prometheus::Counter>;
template class BoundedFamily<prometheus::Gauge>;
template class BoundedFamily<prometheus::Histogram>;

CounterFamily::CounterFamily(prometheus::Family<prometheus::Counter>& family,
                             std::vector<std::string> label_names, std::size_t max_series)
    : BoundedFamily(family, std::move(label_names), max_series,
                    [](auto& f, const prometheus::Labels& labels) -> prometheus::Counter& {
                      return f.Add(labels);
                    }) {}

void CounterFamily::Increment(const LabelValues& values, double delta) {
  if (!(delta >= 0)) return;
  Series(values).Increment(delta);
}

double CounterFamily::Value(const LabelValues& values) const {
  const auto* series = Find(values);
  return series ? series->Value() : 0;
}

GaugeFamily::GaugeFamily(prometheus::Family<prometheus::Gauge>& family,
                         std::vector<std::string> label_names, std::size_t max_series)
    : BoundedFamily(family, std::move(label_names), max_series,
                    [](auto& f, const prometheus::Labels& labels) -> prometheus::Gauge& {
                      return f.Add(labels);
                    }) {}

void GaugeFamily::Set(const LabelValues& values, double value) { Series(values).Set(value); }

void GaugeFamily::Add(const LabelValues& values, double delta) { Series(values).Increment(delta); }

double GaugeFamily::Value(const LabelValues& values) const {
  const auto* series = Find(values);
  return series ? series->Value() : 0;
}

namespace {

std::vector<double> CheckedBounds(const std::string& family, std::vector<double> bounds) {
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
      throw std::invalid_argument("histogram " + family +
                                  ": bucket bounds must be finite and strictly increasing");
    }
  }
  return bounds;
}

}  // namespace

HistogramFamily::HistogramFamily(prometheus::Family<prometheus::Histogram>& family,
                                 std::vector<std::string> label_names,
                                 std::vector<double> upper_bounds, std::size_t max_series)
    : BoundedFamily(
          family, std::move(label_names), max_series,
          [upper_bounds](auto& f, const prometheus::Labels& labels) -> prometheus::Histogram& {
            return f.Add(labels, upper_bounds);
          }),
      upper_bounds_(std::move(upper_bounds)) {}

void HistogramFamily::Observe(const LabelValues& values, double value) {
  if (std::isnan(value)) return;
  Series(values).Observe(value);
}

HistogramFamily::Snapshot HistogramFamily::Get(const LabelValues& values) const {
  Snapshot snapshot;
  snapshot.cumulative.assign(upper_bounds_.size() + 1, 0);
  const auto* series = Find(values);
  if (!series) return snapshot;
  const prometheus::ClientMetric metric = series->Collect();
  for (std::size_t i = 0; i < metric.histogram.bucket.size() && i < snapshot.cumulative.size();
       ++i) {
    snapshot.cumulative[i] = metric.histogram.bucket[i].cumulative_count;
  }
  snapshot.sum = metric.histogram.sample_sum;
  snapshot.count = metric.histogram.sample_count;
  return snapshot;
}

Registry::Registry()
    : registry_(
          std::make_shared<prometheus::Registry>(prometheus::Registry::InsertBehavior::Throw)) {}

Registry::~Registry() = default;

void Registry::Check(const std::string& name, const std::string& help) const {
  if (!prometheus::CheckMetricName(name)) {
    throw std::invalid_argument("invalid metric name \"" + name + "\"");
  }
  // prometheus-cpp 1.0 writes the help text unescaped.
  if (help.find_first_of("\n\\") != std::string::npos) {
    throw std::invalid_argument("metric " + name + ": help text must not hold a newline or \\");
  }
  for (const auto& existing : names_) {
    if (existing == name) throw std::invalid_argument("metric " + name + " is registered twice");
  }
}

CounterFamily& Registry::AddCounter(const std::string& name, const std::string& help,
                                    std::vector<std::string> label_names, std::size_t max_series) {
  std::lock_guard lock(mutex_);
  Check(name, help);
  CheckLabelNames(name, label_names, false);
  auto& family = prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
  families_.push_back({name, "counter", label_names});
  counters_.push_back(std::make_unique<CounterFamily>(family, std::move(label_names), max_series));
  names_.push_back(name);
  return *counters_.back();
}

GaugeFamily& Registry::AddGauge(const std::string& name, const std::string& help,
                                std::vector<std::string> label_names, std::size_t max_series) {
  std::lock_guard lock(mutex_);
  Check(name, help);
  CheckLabelNames(name, label_names, false);
  auto& family = prometheus::BuildGauge().Name(name).Help(help).Register(*registry_);
  families_.push_back({name, "gauge", label_names});
  gauges_.push_back(std::make_unique<GaugeFamily>(family, std::move(label_names), max_series));
  names_.push_back(name);
  return *gauges_.back();
}

HistogramFamily& Registry::AddHistogram(const std::string& name, const std::string& help,
                                        std::vector<std::string> label_names,
                                        std::vector<double> upper_bounds, std::size_t max_series) {
  std::lock_guard lock(mutex_);
  Check(name, help);
  CheckLabelNames(name, label_names, true);
  upper_bounds = CheckedBounds(name, std::move(upper_bounds));
  auto& family = prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_);
  families_.push_back({name, "histogram", label_names});
  histograms_.push_back(std::make_unique<HistogramFamily>(family, std::move(label_names),
                                                          std::move(upper_bounds), max_series));
  names_.push_back(name);
  return *histograms_.back();
}

std::string Registry::Render() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

std::vector<std::string> Registry::Names() const {
  std::lock_guard lock(mutex_);
  return names_;
}

std::vector<Registry::FamilyInfo> Registry::Families() const {
  std::lock_guard lock(mutex_);
  return families_;
}

}  // namespace cairn::metrics

namespace cairn {

namespace {

bool IsFinal(RunStatus status) {
  return status == RunStatus::kCompleted || status == RunStatus::kFailed ||
         status == RunStatus::kCancelled || status == RunStatus::kCompensationFailed;
}

double Seconds(std::chrono::steady_clock::duration duration) {
  return std::chrono::duration<double>(duration).count();
}

// The states of cairn_queue_runs, each exported for every queue seen.
constexpr std::string_view kQueueStates[] = {"ready",   "delayed",      "running",
                                             "waiting", "compensating", "compensation_failed"};

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

Metrics::Metrics()
    : build_info_(registry_.AddGauge(
          "cairn_build_info",
          "Always 1; the labels say the cairn version, the plugin ABI version it speaks and the "
          "schema version it was built for.",
          {"version", "abi_version", "schema_version"}, 4)),
      worker_healthy_(registry_.AddGauge(
          "cairn_worker_healthy",
          "1 while every loop of this worker (poller, lease keeper, busy executor slots, "
          "listener) comes round on time, else 0; /healthz says which loop is late.")),
      worker_ready_(registry_.AddGauge(
          "cairn_worker_ready",
          "1 while this worker's definitions are loaded, its poller reaches the database and it "
          "is not draining, else 0; /readyz says why not.")),
      runs_claimed_(registry_.AddCounter("cairn_runs_claimed_total",
                                         "Runs this worker claimed, by queue.", {"queue"})),
      claim_batch_(registry_.AddHistogram(
          "cairn_claim_batch_size",
          "Runs claimed per claim of this worker: a claim statement, or a checkpoint that claims "
          "a slot's next run (0: nothing was due).",
          {}, {0, 1, 2, 4, 8, 16, 32, 64, 128, 256})),
      claim_duration_(registry_.AddHistogram(
          "cairn_claim_duration_seconds",
          "Duration of this worker's claim statements, round trip included.", {},
          {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5})),
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
      runs_handed_back_(registry_.AddCounter(
          "cairn_runs_handed_back_total",
          "Runs this worker handed back without consuming an attempt: at shutdown, or because "
          "another session held the run's stack lock, or its queue's rate limit had no token "
          "for its next step.")),
      rate_limited_(registry_.AddCounter(
          "cairn_rate_limited_total",
          "Runs this worker handed back because their queue's rate limit (queue_limits) had no "
          "token for their next step, by queue.",
          {"queue"})),
      stack_lock_contention_(registry_.AddCounter(
          "cairn_stack_lock_contention_total",
          "Claimed runs whose stack lock another session held (a zombie still executing them); "
          "each was handed back to run a moment later.")),
      occ_conflicts_(registry_.AddCounter(
          "cairn_occ_conflicts_total",
          "Checkpoints of this worker refused by the version fence: another holder had moved "
          "the run on, so the step's commit rolled back.")),
      lease_renewals_(registry_.AddCounter("cairn_lease_renewals_total",
                                           "Run leases this worker's keeper renewed.")),
      leases_lost_(registry_.AddCounter(
          "cairn_leases_lost_total",
          "Runs whose lease renewal found them no longer held by this worker at the version it "
          "had: their slots stop without committing.")),
      leases_reaped_(
          registry_.AddCounter("cairn_leases_reaped_total",
                               "Runs whose expired lease this worker's reaper made ready again.")),
      waits_expired_(registry_.AddCounter(
          "cairn_waits_expired_total",
          "Waits whose timeout passed, expired by this worker's keeper (their runs take the "
          "timeout path or fail).")),
      deadlines_exceeded_(registry_.AddCounter(
          "cairn_deadlines_exceeded_total",
          "Runs this worker failed with code deadline_exceeded: by its sweeper (ready, sleeping, "
          "backing off or waiting past their deadline) or at a claim or checkpoint of its "
          "executors after the deadline.")),
      signals_sent_(registry_.AddCounter(
          "cairn_signals_sent_total",
          "Signals sent by steps this worker executed, counted when the step's commit landed, by "
          "outcome: delivered, already_delivered (a duplicate), expired, cancelled or stored "
          "(kept in the inbox until its wait exists). Signals sent with cairn signal or the SQL "
          "API by applications are not seen by workers and not counted.",
          {"outcome"}, 16)),
      schedule_fires_(registry_.AddCounter(
          "cairn_schedule_fires_total",
          "Runs this daemon started for schedule ticks, by schedule (a tick whose run already "
          "existed is not counted).",
          {"schedule"})),
      schedule_skips_(registry_.AddCounter(
          "cairn_schedule_skips_total",
          "Schedule ticks this daemon did not start, by schedule and reason: missed (older "
          "missed ticks skipped by the missed policy; one per firing that skipped some) or "
          "unregistered (the workflow is not registered).",
          {"schedule", "reason"})),
      database_errors_(registry_.AddCounter(
          "cairn_database_errors_total",
          "Database errors this process met, by class: transient (retried), in_doubt (a commit "
          "whose outcome is unknown) or permanent (retrying cannot help).",
          {"class"}, 8)),
      database_connections_(registry_.AddGauge("cairn_database_connections",
                                               "Database sessions this process holds open.")),
      executor_slots_(registry_.AddGauge("cairn_executor_slots",
                                         "Executor slots of this worker, by state: busy or idle.",
                                         {"state"}, 4)),
      backlog_reader_(registry_.AddGauge(
          "cairn_backlog_reader",
          "1 on the one daemon of the fleet that reads the backlog from the database (and "
          "exports cairn_queue_runs, cairn_queue_oldest_due_age_seconds and "
          "cairn_stranded_runs), else 0.")),
      queue_runs_(registry_.AddGauge(
          "cairn_queue_runs",
          "Runs of the whole fleet by queue and state: ready (due now), delayed (due later), "
          "running, waiting, compensating, compensation_failed (awaits an operator). Exported by "
          "the backlog reader only.",
          {"queue", "state"})),
      oldest_due_age_(registry_.AddGauge(
          "cairn_queue_oldest_due_age_seconds",
          "Seconds since the oldest due run of the queue (ready or compensating) became due; 0 "
          "when none is due. Exported by the backlog reader only.",
          {"queue"})),
      stranded_runs_(registry_.AddGauge(
          "cairn_stranded_runs",
          "Unfinished runs of the queue that no live worker can serve (their definition is "
          "loaded nowhere), as cairn list --stranded lists them. Exported by the backlog reader "
          "only.",
          {"queue"})) {
  executor_slots_.Set({"busy"}, 0);
  executor_slots_.Set({"idle"}, 0);
  for (const char* error_class : {"transient", "in_doubt", "permanent"}) {
    database_errors_.Increment({error_class}, 0);
  }
}

void Metrics::SetBuildInfo(std::string_view version, std::string_view abi_version,
                           std::string_view schema_version) {
  build_info_.Clear();
  build_info_.Set({std::string(version), std::string(abi_version), std::string(schema_version)}, 1);
}

void Metrics::SetWorkerHealth(bool healthy, bool ready) {
  worker_healthy_.Set({}, healthy ? 1 : 0);
  worker_ready_.Set({}, ready ? 1 : 0);
}

void Metrics::Claimed(std::chrono::steady_clock::duration duration, int64_t runs) {
  claim_duration_.Observe({}, Seconds(duration));
  claim_batch_.Observe({}, static_cast<double>(runs));
}

void Metrics::ClaimedWithCheckpoint(int64_t runs) {
  claim_batch_.Observe({}, static_cast<double>(runs));
}

void Metrics::RunsClaimed(std::string_view queue, int64_t count) {
  runs_claimed_.Increment({std::string(queue)}, static_cast<double>(count));
}

void Metrics::StepEnded(std::string_view workflow, std::string_view step, std::string_view outcome,
                        std::chrono::steady_clock::duration duration, RunStatus status_after) {
  steps_.Increment({std::string(workflow), std::string(step), std::string(outcome)});
  step_duration_.Observe({std::string(workflow), std::string(step)}, Seconds(duration));
  if (outcome != kStepLost && IsFinal(status_after)) RunFinished(workflow, status_after);
}

void Metrics::RunFinished(std::string_view workflow, RunStatus status) {
  runs_finished_.Increment({std::string(workflow), std::string(ToString(status))});
}

void Metrics::RunHandedBack() { runs_handed_back_.Increment(); }

void Metrics::RateLimited(std::string_view queue) { rate_limited_.Increment({std::string(queue)}); }

void Metrics::StackLockContended() { stack_lock_contention_.Increment(); }

void Metrics::OccConflict() { occ_conflicts_.Increment(); }

void Metrics::LeasesRenewed(int64_t count) {
  lease_renewals_.Increment({}, static_cast<double>(count));
}

void Metrics::LeasesLost(int64_t count) { leases_lost_.Increment({}, static_cast<double>(count)); }

void Metrics::LeasesReaped(int64_t count) {
  leases_reaped_.Increment({}, static_cast<double>(count));
}

void Metrics::WaitsExpired(int64_t count) {
  waits_expired_.Increment({}, static_cast<double>(count));
}

void Metrics::DeadlinesExceeded(int64_t count) {
  deadlines_exceeded_.Increment({}, static_cast<double>(count));
}

void Metrics::SignalSent(std::string_view outcome) {
  signals_sent_.Increment({std::string(outcome)});
}

void Metrics::ScheduleFired(std::string_view schedule, int64_t runs) {
  schedule_fires_.Increment({std::string(schedule)}, static_cast<double>(runs));
}

void Metrics::ScheduleSkipped(std::string_view schedule, std::string_view reason, int64_t count) {
  schedule_skips_.Increment({std::string(schedule), std::string(reason)},
                            static_cast<double>(count));
}

void Metrics::DatabaseError(std::string_view error_class) {
  database_errors_.Increment({std::string(error_class)});
}

void Metrics::SetDatabaseConnections(int64_t open) {
  database_connections_.Set({}, static_cast<double>(open));
}

void Metrics::SetSlots(int busy, int idle) {
  executor_slots_.Set({"busy"}, busy);
  executor_slots_.Set({"idle"}, idle);
}

void Metrics::SetBacklog(const BacklogReading& reading) {
  std::lock_guard lock(backlog_mutex_);
  backlog_reader_.Set({}, 1);
  // Every state of every queue gets a value in one pass, 0 when absent, so a
  // scrape never sees a queue half updated and a drained queue reads 0.
  std::map<std::pair<std::string, std::string>, int64_t> runs;
  std::map<std::string, double> ages;
  std::map<std::string, int64_t> stranded;
  for (const auto& row : reading.runs) {
    ages.emplace(row.queue, 0);
    stranded.emplace(row.queue, 0);
    runs[{row.queue, row.state}] += row.runs;
  }
  for (const auto& [queue, age] : reading.oldest_due_age_seconds) ages[queue] = age;
  for (const auto& [queue, count] : reading.stranded) {
    ages.emplace(queue, 0);
    stranded[queue] = count;
  }
  for (const auto& values : queue_runs_.known()) ages.emplace(values[0], 0);
  for (const auto& [queue, age] : ages) {
    for (std::string_view state : kQueueStates) {
      auto it = runs.find({queue, std::string(state)});
      queue_runs_.Set({queue, std::string(state)},
                      static_cast<double>(it == runs.end() ? 0 : it->second));
    }
    oldest_due_age_.Set({queue}, age);
    stranded_runs_.Set({queue}, static_cast<double>(stranded[queue]));
  }
}

void Metrics::ClearBacklog() {
  std::lock_guard lock(backlog_mutex_);
  backlog_reader_.Set({}, 0);
  queue_runs_.Clear();
  oldest_due_age_.Clear();
  stranded_runs_.Clear();
}

void Metrics::OnScrape(std::function<void()> refresh) {
  std::lock_guard lock(scrape_mutex_);
  on_scrape_.push_back(std::move(refresh));
}

std::string Metrics::Render() {
  {
    std::lock_guard lock(scrape_mutex_);
    for (const auto& refresh : on_scrape_) refresh();
  }
  return registry_.Render();
}

}  // namespace cairn
