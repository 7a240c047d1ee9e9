// See worker.hpp.
#include "worker.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <climits>
#include <exception>
#include <future>

#include "metrics.hpp"

namespace cairn {

namespace {

std::string Hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace

namespace {

std::vector<std::string> HashesOf(const DefinitionSet& definitions) {
  std::vector<std::string> hashes;
  for (const auto* definition : definitions.All()) hashes.push_back(definition->hash);
  return hashes;
}

// A claim statement's ceiling in batch mode, however many slots are free.
constexpr int kMaxRunsPerClaim = 1000;

// Claimed runs, in claim order, as one group per slot: as many groups as
// there are runs or free slots, whichever is fewer, of sizes differing by at
// most one, so that every free slot gets work.
std::vector<std::vector<store::ClaimedRun>> SplitForSlots(std::vector<store::ClaimedRun> runs,
                                                          int free_slots) {
  const size_t groups = std::min(runs.size(), static_cast<size_t>(std::max(free_slots, 1)));
  std::vector<std::vector<store::ClaimedRun>> out(groups);
  size_t next = 0;
  for (size_t g = 0; g < groups; ++g) {
    const size_t size = runs.size() / groups + (g < runs.size() % groups ? 1 : 0);
    for (size_t i = 0; i < size; ++i) out[g].push_back(std::move(runs[next++]));
  }
  return out;
}

}  // namespace

std::chrono::milliseconds Worker::ReconnectDelay(int failures) {
  return std::chrono::milliseconds(std::min(5000, 100 << std::min(failures, 6)));
}

Worker::Worker(WorkerOptions options, const DefinitionSet& definitions, const StepCatalog& steps)
    : options_(std::move(options)),
      steps_(steps),
      health_(options_.health),
      queues_(options_.queues),
      concurrency_(options_.concurrency),
      claim_batch_(options_.claim_batch),
      batch_size_(options_.batch_size),
      definitions_(std::make_shared<const DefinitionSet>(definitions)),
      served_hashes_(HashesOf(definitions)) {
  store::ConnectionOptions idempotency = options_.connection;
  idempotency.application_name = "cairn idempotency " + options_.worker_id;
  // Each call is one short statement; a key locked by an application's open
  // transaction fails the step's call (retried by its policy) rather than
  // holding every slot's calls up.
  idempotency.statement_timeout = std::chrono::seconds(30);
  idempotency.lock_timeout = std::chrono::seconds(2);
  idempotency_ = std::make_shared<IdempotencySession>(std::move(idempotency));
}

Worker::~Worker() {
  if (started_) Stop();
}

store::ConnectionOptions Worker::EngineSession(const WorkerOptions& options,
                                               const std::string& role) {
  store::ConnectionOptions connection = options.connection;
  connection.application_name = "cairn " + role + " " + options.worker_id;
  connection.generic_plans = true;
  return connection;
}

std::unique_ptr<store::Connection> Worker::Connect(const std::string& role) {
  return std::make_unique<store::Connection>(EngineSession(role));
}

void Worker::CheckServer(store::Connection& connection) const {
  const store::ServerLimits limits =
      connection.Autocommit([](store::Tx& tx) { return store::ReadServerLimits(tx); });
  const int usable = limits.max_connections - limits.reserved;
  if (options_.connection_budget > usable) {
    throw InvalidArgumentError(
        "this daemon may open " + std::to_string(options_.connection_budget) +
        " database connections (database.pool_size, or worker.concurrency plus the poller, "
        "lease keeper, idempotency session and maintenance), but the server allows " +
        std::to_string(usable) + " (max_connections " + std::to_string(limits.max_connections) +
        " less superuser_reserved_connections " + std::to_string(limits.reserved) +
        ") for all its clients together; lower worker.concurrency or database.pool_size, or "
        "raise max_connections");
  }
  if (options_.connection_budget > usable - limits.in_use) {
    spdlog::warn(
        "the server has {} free connections and this daemon may open {}: under load, "
        "connections will be refused",
        usable - limits.in_use, options_.connection_budget);
  }
  if (limits.superuser) {
    spdlog::warn(
        "connected as role {}, a superuser: a bug or a plugin's SQL can then do "
        "anything to the server; run the daemon as a role with the worker's rights "
        "only (docs/security.md)",
        limits.role);
  }
}

std::unique_ptr<store::Connection> Worker::OpenStartSession(const WorkerOptions& options) {
  auto pooling = std::async(std::launch::async,
                            [&options] { store::CheckSessionPooling(options.connection); });
  std::unique_ptr<store::Connection> connection;
  std::exception_ptr connect_error;
  try {
    connection = std::make_unique<store::Connection>(EngineSession(options, "start"));
  } catch (...) {
    connect_error = std::current_exception();
  }
  // The pooler check's verdict comes first: behind a transaction pooler the
  // start's own session setup may fail too, racing it, with an error that
  // does not name the pooler's mode.
  pooling.get();
  if (connect_error) std::rethrow_exception(connect_error);
  return connection;
}

void Worker::Start(std::unique_ptr<store::Connection> connection) {
  CheckServer(*connection);
  connection->Transact([&](store::Tx& tx) {
    for (const auto* d : definitions_->All()) {
      store::RegisterDefinition(tx, {d->hash, d->name, d->version, d->FirstStep(), ToJson(*d)});
    }
    store::RegisterWorker(tx, {options_.worker_id, Hostname(), static_cast<int>(getpid()), queues_,
                               served_hashes_, options_.version, concurrency_});
  });
  started_ = true;
  health_.MarkStarted();
  LeaseKeeperOptions keeper{options_.connection, options_.worker_id, options_.lease,
                            options_.reaper_interval};
  keeper.health = &health_;
  keeper.metrics = options_.metrics;
  keeper_ = std::make_unique<LeaseKeeper>(keeper, leases_);
  keeper_->Start();
  StartSlots();
  if (options_.listen) listener_ = std::thread([this] { ListenLoop(); });
  poller_ = std::thread([this] { PollLoop(); });
  StartMaintenance();
  if (options_.metrics) options_.metrics->SetSlots(0, concurrency_);
  spdlog::info("worker {} started: queues [{}], {} slots, {} definitions", options_.worker_id,
               fmt::join(queues_, ", "), concurrency_, served_hashes_.size());
}

void Worker::StartSlots() {
  std::lock_guard lock(mutex_);
  if (static_cast<int>(slots_.size()) < concurrency_) {
    slots_.resize(concurrency_);
    slot_running_.resize(concurrency_, false);
    idle_sessions_.resize(concurrency_, nullptr);
  }
  for (int slot = 0; slot < concurrency_; ++slot) {
    if (slot_running_[slot]) continue;
    // A slot that ended when concurrency went down has returned, or is
    // about to: it cleared its flag as its last act under this lock.
    if (slots_[slot].joinable()) slots_[slot].join();
    slot_running_[slot] = true;
    slots_[slot] = std::thread([this, slot] { SlotLoop(slot); });
  }
}

void Worker::Reload(WorkerServing serving) {
  auto definitions = std::make_shared<const DefinitionSet>(std::move(serving.definitions));
  std::vector<std::string> hashes = HashesOf(*definitions);
  auto connection = Connect("reload");
  connection->Transact([&](store::Tx& tx) {
    for (const auto* d : definitions->All()) {
      store::RegisterDefinition(tx, {d->hash, d->name, d->version, d->FirstStep(), ToJson(*d)});
    }
    store::RegisterWorker(tx, {options_.worker_id, Hostname(), static_cast<int>(getpid()),
                               serving.queues, hashes, options_.version, serving.concurrency});
  });
  {
    std::lock_guard lock(mutex_);
    queues_ = std::move(serving.queues);
    concurrency_ = serving.concurrency;
    claim_batch_ = serving.claim_batch;
    batch_size_ = serving.batch_size;
    definitions_ = std::move(definitions);
    served_hashes_ = std::move(hashes);
    wake_ = true;
    wake_slot_ = -1;  // the poller's, with the new definitions
  }
  hints_wanted_changed_.Raise();
  if (options_.metrics) {
    const auto [busy, slots] = Busy();
    options_.metrics->SetSlots(busy, std::max(0, slots - busy));
  }
  StartSlots();
  slots_cv_.notify_all();  // slots beyond the new concurrency end
  poller_cv_.notify_all();
}

std::pair<int, int> Worker::Busy() const {
  std::lock_guard lock(mutex_);
  return {busy_, concurrency_};
}

void Worker::StartMaintenance() {
  // Maintenance sessions bound their statements and lock waits: a stuck
  // pass is abandoned and tried again, never left holding the others up.
  store::ConnectionOptions connection = options_.connection;
  connection.statement_timeout = std::chrono::seconds(30);
  connection.lock_timeout = std::chrono::seconds(1);
  SweeperOptions sweeper;
  sweeper.service = {
      "sweeper " + options_.worker_id, connection, options_.reaper_interval,
      [this](const ServiceReport& report) {
        if (!options_.metrics) return;
        options_.metrics->LeasesReaped(report.Count("taken over") + report.Count("crashed"));
        options_.metrics->WaitsExpired(report.Count("waits expired"));
        options_.metrics->DeadlinesExceeded(report.Count("deadlines passed"));
      }};
  sweeper.crash_limit = options_.crash_limit;
  sweeper_ = std::make_unique<Sweeper>(sweeper);
  sweeper_->Start();
  if (options_.retention.count() > 0) {
    RetentionOptions retention;
    retention.service = {
        "retention " + options_.worker_id, connection, options_.retention_interval, {}};
    retention.older_than = std::chrono::ceil<std::chrono::hours>(options_.retention);
    retention_ = std::make_unique<Retention>(retention);
    retention_->Start();
  }
}

void Worker::PollLoop() {
  std::unique_ptr<store::Connection> connection;
  int failures = 0;
  Health::Pulse pulse = health_.Track("poller");
  while (!stop_claiming_.load()) {
    pulse.Beat(std::max(options_.poll_interval, ReconnectDelay(failures)));
    std::chrono::milliseconds wait = options_.poll_interval;
    try {
      if (!connection || !connection->IsOpen()) connection = Connect("poller");
      int free_slots;
      int claim_batch;
      int batch_size;
      std::vector<std::string> queues;
      std::vector<std::string> hashes;
      std::shared_ptr<const DefinitionSet> definitions;
      {
        std::lock_guard lock(mutex_);
        free_slots = concurrency_ - busy_ - static_cast<int>(queue_.size());
        claim_batch = claim_batch_;
        batch_size = batch_size_;
        queues = queues_;
        hashes = served_hashes_;
        definitions = definitions_;
        wake_ = false;
        poller_claiming_ = free_slots > 0;
      }
      if (free_slots > 0) {
        const int want = batch_size > 1 ? std::min(free_slots * batch_size, kMaxRunsPerClaim)
                                        : std::min(free_slots, claim_batch);
        auto runs = Claim(*connection, {queues, hashes, options_.worker_id, options_.lease}, want);
        health_.DatabaseReached();
        const auto claimed = static_cast<int64_t>(runs.size());
        {
          std::lock_guard lock(mutex_);
          for (auto& claims : SplitForSlots(std::move(runs), free_slots)) {
            queue_.push_back({std::move(claims), definitions});
          }
          poller_claiming_ = false;
        }
        if (claimed > 0) slots_cv_.notify_all();
        // A full batch means more may be due right now.
        if (claimed == want) continue;
        auto next_due = connection->Autocommit(
            [&](store::Tx& tx) { return store::MillisUntilNextDue(tx, queues, hashes); });
        if (next_due)
          wait = std::min(wait, std::chrono::milliseconds(std::max<int64_t>(*next_due, 1)));
      }
      failures = 0;
      health_.DatabaseReached();
    } catch (const std::exception& e) {
      spdlog::warn("poller: {}", e.what());
      health_.DatabaseUnreachable(e.what());
      connection.reset();
      {
        std::lock_guard lock(mutex_);
        poller_claiming_ = false;
      }
      wait = ReconnectDelay(failures++);
    }
    hints_wanted_changed_.Raise();
    std::unique_lock lock(mutex_);
    const int free_before = concurrency_ - busy_ - static_cast<int>(queue_.size());
    poller_cv_.wait_for(lock, wait, [&] {
      int free_now = concurrency_ - busy_ - static_cast<int>(queue_.size());
      return stop_claiming_.load() || wake_ || (free_before <= 0 && free_now > 0);
    });
  }
}

std::vector<store::ClaimedRun> Worker::Claim(store::Connection& connection,
                                             const store::ClaimRequest& request, int want) {
  const auto started = std::chrono::steady_clock::now();
  auto runs = connection.Autocommit([&](store::Tx& tx) {
    return store::ClaimRuns(tx, request.queues, request.definition_hashes, want, request.worker_id,
                            request.lease);
  });
  if (options_.metrics) {
    options_.metrics->Claimed(std::chrono::steady_clock::now() - started,
                              static_cast<int64_t>(runs.size()));
  }
  std::vector<std::string> queues;
  for (const auto& claim : runs) queues.push_back(claim.run.queue);
  RecordClaim(static_cast<int>(runs.size()), want, queues, false);
  return runs;
}

void Worker::RecordClaim(int claimed, int want, const std::vector<std::string>& queues,
                         bool by_slot) {
  if (options_.metrics) {
    for (const auto& queue : queues) options_.metrics->RunsClaimed(queue);
  }
  {
    std::lock_guard lock(mutex_);
    backlog_ = claimed == want;
  }
  std::lock_guard stats_lock(stats_mutex_);
  stats_.claimed += claimed;
  if (by_slot) stats_.claimed_by_slots += claimed;
}

Worker::HintNeeds Worker::WakeHintNeeds() const {
  std::lock_guard lock(mutex_);
  HintNeeds needs;
  needs.queues = queues_;
  needs.free_slot = concurrency_ - busy_ - static_cast<int>(queue_.size()) > 0;
  needs.waiting = needs.free_slot && !stop_claiming_.load() && !wake_ && wake_slot_ < 0 &&
                  waking_ == 0 && !poller_claiming_;
  return needs;
}

void Worker::ListenLoop() {
  constexpr std::chrono::milliseconds kBeat{250};
  // How long the listener waits for commits that skipped their hint.
  constexpr std::chrono::milliseconds kGateWait{1000};
  store::ConnectionOptions session = options_.connection;
  session.application_name = "cairn listener " + options_.worker_id;
  session.lock_timeout = kGateWait;
  int failures = 0;
  Health::Pulse pulse = health_.Track("listener");
  while (!stop_claiming_.load()) {
    pulse.Beat(ReconnectDelay(failures));
    try {
      store::WakeListener listener(session);
      failures = 0;
      // Anything that arrived while (re)connecting was missed: claim now.
      Wake();
      std::vector<std::string> open_gates;  // none: the new session holds none
      while (!stop_claiming_.load()) {
        hints_wanted_changed_.Clear();
        HintNeeds needs = WakeHintNeeds();
        if (!open_gates.empty() && needs.waiting && needs.queues != open_gates) {
          listener.CloseGates();
          open_gates.clear();
        }
        if (open_gates.empty() && needs.waiting) {
          pulse.Beat(kGateWait + kBeat);
          // Runs whose start skipped its hint while the gates were closed.
          if (listener.OpenGates(needs.queues)) {
            open_gates = needs.queues;
            Wake();
          }
        }
        pulse.Beat(kBeat);
        if (!listener.Wait(kBeat, hints_wanted_changed_.fd())) continue;
        needs = WakeHintNeeds();
        pulse.Beat(kGateWait + kBeat);
        // Runs whose start left its hint to this one: the claim that
        // follows sees them. Without a commit in flight this costs a round
        // trip (0.15 ms on a local socket), less than a second claim.
        if (!listener.AwaitWaiters(needs.queues)) open_gates.clear();
        Wake();
        // A busy worker claims as a slot frees: hints would only cost its
        // producers. Closed at a hint, not as the worker fills: opening
        // the gates again costs a claim.
        if (!open_gates.empty() && !needs.free_slot) {
          listener.CloseGates();
          open_gates.clear();
        }
      }
    } catch (const std::exception& e) {
      spdlog::warn("listener: {} (polling continues)", e.what());
      std::this_thread::sleep_for(ReconnectDelay(failures++));
    }
  }
}

bool Worker::Stop() {
  if (!started_) return true;
  started_ = false;
  health_.MarkDraining();
  const auto deadline = std::chrono::steady_clock::now() + options_.shutdown_grace;
  stop_claiming_ = true;
  poller_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  if (listener_.joinable()) listener_.join();

  // Runs claimed but not started go straight back.
  std::deque<Claimed> unstarted;
  {
    std::lock_guard lock(mutex_);
    unstarted.swap(queue_);
  }
  stop_runs_ = true;
  slots_cv_.notify_all();
  bool clean = true;
  try {
    auto connection = Connect("stop");
    for (const Claimed& claimed : unstarted) {
      for (const store::ClaimedRun& claim : claimed.claims) {
        connection->Transact([&](store::Tx& tx) {
          store::ReleaseRun(tx, claim.run.id, claim.run.version, options_.worker_id,
                            std::chrono::milliseconds(0));
        });
        if (options_.metrics) options_.metrics->RunHandedBack();
      }
    }
    {
      std::unique_lock lock(mutex_);
      clean = idle_cv_.wait_until(lock, deadline, [&] { return busy_ == 0; });
    }
    if (!clean) {
      // Steps still running past the grace period: release their runs now.
      // The version bump fences whatever those steps try to commit later.
      auto held = leases_.Snapshot();
      spdlog::warn("shutdown grace over with {} steps still running; releasing their runs",
                   held.size());
      for (const auto& run : held) {
        connection->Transact([&](store::Tx& tx) {
          store::ReleaseRun(tx, run.run_id, run.version, options_.worker_id,
                            std::chrono::milliseconds(0));
        });
      }
    }
    connection->Transact([&](store::Tx& tx) { store::StopWorker(tx, options_.worker_id); });
  } catch (const std::exception& e) {
    spdlog::warn("stop: {} (leases expire on their own)", e.what());
  }
  for (auto& slot : slots_) {
    if (!slot.joinable()) continue;
    if (clean) {
      slot.join();
    } else {
      slot.detach();
    }
  }
  slots_.clear();
  // Last: the keeper renews the leases of steps still running until here.
  if (retention_) retention_->Stop();
  if (sweeper_) sweeper_->Stop();
  if (keeper_) keeper_->Stop();
  auto stats = Stats();
  spdlog::info("worker {} stopped: {} claimed, {} parked, {} handed back, {} lost",
               options_.worker_id, stats.claimed, stats.parked, stats.handed_back, stats.lost);
  return clean;
}

WorkerStats Worker::Stats() const {
  std::lock_guard lock(stats_mutex_);
  return stats_;
}

}  // namespace cairn
