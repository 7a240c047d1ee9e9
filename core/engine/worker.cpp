// See worker.hpp.
#include "worker.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <climits>

#include "metrics.hpp"

namespace cairn {

namespace {

std::string Hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// Backoff for reconnect loops: quick at first, never hammering the server.
std::chrono::milliseconds ReconnectDelay(int failures) {
  return std::chrono::milliseconds(std::min(5000, 100 << std::min(failures, 6)));
}

}  // namespace

Worker::Worker(WorkerOptions options, const DefinitionSet& definitions, const StepCatalog& steps)
    : options_(std::move(options)),
      definitions_(definitions),
      steps_(steps),
      health_(options_.health) {
  for (const auto* definition : definitions_.All()) served_hashes_.push_back(definition->hash);
}

Worker::~Worker() {
  if (started_) Stop();
}

std::unique_ptr<store::Connection> Worker::Connect(const std::string& role) {
  store::ConnectionOptions connection = options_.connection;
  connection.application_name = "cairn " + role + " " + options_.worker_id;
  return std::make_unique<store::Connection>(connection);
}

void Worker::Start() {
  auto connection = Connect("start");
  connection->Transact([&](store::Tx& tx) {
    for (const auto* d : definitions_.All()) {
      store::RegisterDefinition(tx, {d->hash, d->name, d->version, d->FirstStep(), ToJson(*d)});
    }
    store::RegisterWorker(tx, {options_.worker_id, Hostname(), static_cast<int>(getpid()),
                               options_.queues, served_hashes_});
  });
  started_ = true;
  health_.MarkStarted();
  keeper_ = std::thread([this] { KeeperLoop(); });
  for (int slot = 0; slot < options_.concurrency; ++slot) {
    slots_.emplace_back([this, slot] { SlotLoop(slot); });
  }
  if (options_.listen) listener_ = std::thread([this] { ListenLoop(); });
  poller_ = std::thread([this] { PollLoop(); });
  if (options_.metrics) options_.metrics->SetSlots(0, options_.concurrency);
  spdlog::info("worker {} started: queues [{}], {} slots, {} definitions", options_.worker_id,
               fmt::join(options_.queues, ", "), options_.concurrency, served_hashes_.size());
}

void Worker::Wake() {
  std::lock_guard lock(mutex_);
  wake_ = true;
  poller_cv_.notify_all();
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
      {
        std::lock_guard lock(mutex_);
        free_slots = options_.concurrency - busy_ - static_cast<int>(queue_.size());
        wake_ = false;
      }
      if (free_slots > 0) {
        int want = std::min(free_slots, options_.claim_batch);
        const auto claim_started = std::chrono::steady_clock::now();
        auto runs = connection->Transact([&](store::Tx& tx) {
          return store::ClaimRuns(tx, options_.queues, served_hashes_, want, options_.worker_id,
                                  options_.lease);
        });
        health_.DatabaseReached();
        if (options_.metrics) {
          options_.metrics->Claimed(std::chrono::steady_clock::now() - claim_started,
                                    static_cast<int64_t>(runs.size()));
          for (const auto& run : runs) options_.metrics->RunsClaimed(run.queue);
        }
        if (!runs.empty()) {
          {
            std::lock_guard lock(mutex_);
            for (auto& run : runs) queue_.push_back(std::move(run));
          }
          slots_cv_.notify_all();
          std::lock_guard stats_lock(stats_mutex_);
          stats_.claimed += static_cast<int64_t>(runs.size());
        }
        // A full batch means more may be due right now.
        if (static_cast<int>(runs.size()) == want) continue;
        auto next_due = connection->Transact([&](store::Tx& tx) {
          return store::MillisUntilNextDue(tx, options_.queues, served_hashes_);
        });
        if (next_due)
          wait = std::min(wait, std::chrono::milliseconds(std::max<int64_t>(*next_due, 1)));
      }
      failures = 0;
      health_.DatabaseReached();
    } catch (const std::exception& e) {
      spdlog::warn("poller: {}", e.what());
      health_.DatabaseUnreachable(e.what());
      connection.reset();
      wait = ReconnectDelay(failures++);
    }
    std::unique_lock lock(mutex_);
    const int free_before = options_.concurrency - busy_ - static_cast<int>(queue_.size());
    poller_cv_.wait_for(lock, wait, [&] {
      int free_now = options_.concurrency - busy_ - static_cast<int>(queue_.size());
      return stop_claiming_.load() || wake_ || (free_before <= 0 && free_now > 0);
    });
  }
}

void Worker::SlotLoop(int slot) {
  std::unique_ptr<Executor> executor;
  int failures = 0;
  ExecutorOptions executor_options{options_.worker_id, options_.lease};
  executor_options.metrics = options_.metrics;
  Health::Pulse pulse = health_.Track("slot " + std::to_string(slot));
  executor_options.pulse = &pulse;
  while (true) {
    Run run;
    pulse.Rest();  // an idle slot is not late
    {
      std::unique_lock lock(mutex_);
      slots_cv_.wait(lock, [&] { return stop_claiming_.load() || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and nothing left to do
      run = std::move(queue_.front());
      queue_.pop_front();
      ++busy_;
      if (options_.metrics) options_.metrics->SetSlots(busy_, options_.concurrency - busy_);
    }
    pulse.Beat(options_.lease);
    ExecutionEnd end = ExecutionEnd::kLost;
    try {
      if (!executor || !executor->Healthy()) {
        store::ConnectionOptions connection = options_.connection;
        connection.application_name =
            "cairn slot " + std::to_string(slot) + " " + options_.worker_id;
        executor =
            std::make_unique<Executor>(connection, definitions_, steps_, executor_options, leases_);
      }
      end = executor->Execute(std::move(run), stop_runs_);
      failures = 0;
    } catch (const std::exception& e) {
      // The claimed run stays leased until the reaper hands it back.
      spdlog::warn("slot {}: {}", slot, e.what());
      executor.reset();
      std::this_thread::sleep_for(ReconnectDelay(failures++));
    }
    {
      std::lock_guard stats_lock(stats_mutex_);
      if (end == ExecutionEnd::kParked) ++stats_.parked;
      if (end == ExecutionEnd::kHandedBack) ++stats_.handed_back;
      if (end == ExecutionEnd::kHandedBack && options_.metrics) options_.metrics->RunHandedBack();
      if (end == ExecutionEnd::kLost) ++stats_.lost;
    }
    {
      std::lock_guard lock(mutex_);
      --busy_;
      if (options_.metrics) options_.metrics->SetSlots(busy_, options_.concurrency - busy_);
    }
    poller_cv_.notify_all();
    idle_cv_.notify_all();
  }
}

void Worker::KeeperLoop() {
  std::unique_ptr<store::Connection> connection;
  const auto renew_every = std::max(std::chrono::milliseconds(50), options_.lease / 3);
  const auto tick = std::min(renew_every, options_.reaper_interval);
  auto next_renewal = std::chrono::steady_clock::now();
  auto next_reap = std::chrono::steady_clock::now();
  auto next_retention = std::chrono::steady_clock::now() + options_.reaper_interval;
  int failures = 0;
  Health::Pulse pulse = health_.Track("keeper");
  while (!stop_keeper_.load()) {
    pulse.Beat(std::max(tick, ReconnectDelay(failures)));
    try {
      if (!connection || !connection->IsOpen()) connection = Connect("keeper");
      auto held = leases_.Snapshot();
      if (!held.empty() && std::chrono::steady_clock::now() >= next_renewal) {
        next_renewal = std::chrono::steady_clock::now() + renew_every;
        auto renewed = connection->Transact([&](store::Tx& tx) {
          return store::RenewLeases(tx, options_.worker_id, held, options_.lease);
        });
        const int64_t lost = leases_.MarkLost(held, renewed);
        if (options_.metrics) {
          options_.metrics->LeasesRenewed(static_cast<int64_t>(renewed.size()));
          options_.metrics->LeasesLost(lost);
        }
      }
      if (std::chrono::steady_clock::now() >= next_reap) {
        next_reap = std::chrono::steady_clock::now() + options_.reaper_interval;
        auto [reaped, expired] = connection->Transact([&](store::Tx& tx) {
          store::HeartbeatWorker(tx, options_.worker_id);
          store::CleanupInbox(tx);
          return std::make_pair(store::ReapExpiredLeases(tx), store::ExpireWaits(tx));
        });
        if (expired > 0)
          spdlog::info("waits: {} expired, their runs took the timeout path", expired);
        if (options_.metrics) options_.metrics->WaitsExpired(expired);
        if (reaped > 0) {
          spdlog::info("reaper: {} runs with expired leases are ready again", reaped);
          if (options_.metrics) options_.metrics->LeasesReaped(reaped);
          std::lock_guard stats_lock(stats_mutex_);
          stats_.reaped += reaped;
          Wake();
        }
      }
      if (options_.retention.count() > 0 && std::chrono::steady_clock::now() >= next_retention) {
        next_retention = std::chrono::steady_clock::now() + std::chrono::minutes(1);
        // Deleting a long history takes many bounded batches: not a wedge.
        pulse.Beat(std::chrono::minutes(5));
        auto deleted = store::DeleteFinished(
            *connection, std::chrono::ceil<std::chrono::hours>(options_.retention));
        if (deleted.runs + deleted.waits > 0) {
          spdlog::info("retention: deleted {} finished runs, {} events, {} waits", deleted.runs,
                       deleted.events, deleted.waits);
        }
      }
      failures = 0;
    } catch (const std::exception& e) {
      spdlog::warn("lease keeper: {}", e.what());
      connection.reset();
      ++failures;
    }
    std::unique_lock lock(mutex_);
    idle_cv_.wait_for(lock, failures ? ReconnectDelay(failures) : tick,
                      [&] { return stop_keeper_.load(); });
  }
}

void Worker::ListenLoop() {
  int failures = 0;
  Health::Pulse pulse = health_.Track("listener");
  while (!stop_claiming_.load()) {
    pulse.Beat(ReconnectDelay(failures));
    try {
      store::WakeListener listener(options_.connection);
      failures = 0;
      // Anything that arrived while (re)connecting was missed: claim now.
      Wake();
      while (!stop_claiming_.load()) {
        pulse.Beat(std::chrono::milliseconds(250));
        if (listener.Wait(std::chrono::milliseconds(250))) Wake();
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
  std::deque<Run> unstarted;
  {
    std::lock_guard lock(mutex_);
    unstarted.swap(queue_);
  }
  stop_runs_ = true;
  slots_cv_.notify_all();
  bool clean = true;
  try {
    auto connection = Connect("stop");
    for (const auto& run : unstarted) {
      connection->Transact([&](store::Tx& tx) {
        store::ReleaseRun(tx, run.id, run.version, options_.worker_id,
                          std::chrono::milliseconds(0));
      });
      if (options_.metrics) options_.metrics->RunHandedBack();
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
  if (clean) {
    for (auto& slot : slots_) slot.join();
  } else {
    for (auto& slot : slots_) slot.detach();
  }
  slots_.clear();
  stop_keeper_ = true;
  idle_cv_.notify_all();
  if (keeper_.joinable()) keeper_.join();
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
