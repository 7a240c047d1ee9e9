// A worker's slots: each runs one claimed run at a time on its own session,
// claims its next run there, and takes the wake-ups that find it idle.
#include <spdlog/spdlog.h>

#include <exception>

#include "metrics.hpp"
#include "worker.hpp"

namespace cairn {

void Worker::Wake() {
  std::lock_guard lock(mutex_);
  if (queue_.empty()) {
    WakeAnIdleSlot();
    return;
  }
  wake_ = true;
  poller_cv_.notify_all();
}

void Worker::WakeAnIdleSlot() {
  wake_slot_ = FirstIdleSessionServing();
  if (wake_slot_ >= 0) {
    slots_cv_.notify_all();
    return;
  }
  wake_ = true;
  poller_cv_.notify_all();
}

void Worker::WakePoller() {
  std::lock_guard lock(mutex_);
  wake_ = true;
  poller_cv_.notify_all();
}

void Worker::WakePollerOnBacklog() {
  std::lock_guard lock(mutex_);
  if (!backlog_) return;
  wake_ = true;
  poller_cv_.notify_all();
}

int Worker::SlotForWakeUp() const {
  std::lock_guard lock(mutex_);
  return FirstIdleSessionServing();
}

bool Worker::IdleSessionServes(int slot) const {
  return slot < concurrency_ && batch_size_ == 1 && idle_sessions_[slot] != nullptr &&
         idle_sessions_[slot] == definitions_.get();
}

int Worker::FirstIdleSessionServing() const {
  for (int slot = 0; slot < static_cast<int>(idle_sessions_.size()); ++slot) {
    if (IdleSessionServes(slot)) return slot;
  }
  return -1;
}

void Worker::PassOnSlotWake() {
  if (wake_slot_ < 0 || IdleSessionServes(wake_slot_)) return;
  WakeAnIdleSlot();
}

void Worker::SlotLoop(int slot) {
  std::unique_ptr<Executor> executor;
  std::shared_ptr<const DefinitionSet> executor_definitions;
  int failures = 0;
  ExecutorOptions executor_options{options_.worker_id, options_.lease};
  executor_options.metrics = options_.metrics;
  executor_options.idempotency = idempotency_;
  Health::Pulse pulse = health_.Track("slot " + std::to_string(slot));
  executor_options.pulse = &pulse;
  executor_options.next_claim = [this, slot, &executor_definitions] {
    return NextClaimForSlot(slot, executor_definitions);
  };
  const auto surplus = [&] { return slot >= concurrency_; };  // concurrency went down
  const auto may_take_wake = [&] {
    return wake_slot_ == slot && !stop_claiming_.load() && IdleSessionServes(slot);
  };
  auto has_work = [&] {
    return stop_claiming_.load() || surplus() || !queue_.empty() || may_take_wake();
  };
  const auto end_busy = [&] {
    {
      std::lock_guard lock(mutex_);
      --busy_;
      if (options_.metrics) options_.metrics->SetSlots(busy_, std::max(0, concurrency_ - busy_));
    }
    poller_cv_.notify_all();
    idle_cv_.notify_all();
    hints_wanted_changed_.Raise();
  };
  // A run this slot claimed itself on finishing the one before.
  std::optional<Claimed> next;
  // The executor's session has planned the claim a wake-up makes on it.
  bool claim_planned = false;
  while (true) {
    Claimed claimed;
    // This turn's run was claimed on a wake-up: the poller has not looked
    // for more.
    bool claimed_on_wake = false;
    pulse.Rest();  // an idle slot is not late
    if (next) {
      claimed = std::move(*next);
      next.reset();
    } else {
      if (executor && !claim_planned) {
        pulse.Beat(options_.lease);
        claim_planned = PlanSlotClaim(slot, *executor, executor_definitions);
        pulse.Rest();
      }
      std::optional<store::ClaimRequest> wake_request;
      {
        std::unique_lock lock(mutex_);
        idle_sessions_[slot] =
            executor && executor->Healthy() ? executor_definitions.get() : nullptr;
        while (!slots_cv_.wait_for(lock, options_.idle_timeout, has_work)) {
          // Idle: give the connection back to the server until there is work.
          if (executor) {
            idle_sessions_[slot] = nullptr;
            PassOnSlotWake();
            lock.unlock();
            executor.reset();
            lock.lock();
          }
        }
        if (queue_.empty() && !surplus() && may_take_wake()) {
          wake_request = SlotClaimRequest(slot, executor_definitions);
        }
        idle_sessions_[slot] = nullptr;
        if (wake_request) {
          wake_slot_ = -1;
          ++waking_;
        } else {
          PassOnSlotWake();
          // Stopping with nothing left to do, or a slot no longer wanted.
          if (queue_.empty() || (surplus() && !stop_claiming_.load())) {
            slot_running_[slot] = false;
            return;
          }
          claimed = std::move(queue_.front());
          queue_.pop_front();
        }
        ++busy_;
        if (options_.metrics) options_.metrics->SetSlots(busy_, std::max(0, concurrency_ - busy_));
      }
      if (wake_request) {
        pulse.Beat(options_.lease);  // a claim that hangs makes the slot late
        std::optional<Claimed> woken;
        bool claim_failed = false;
        try {
          woken = ClaimOnSession(*executor, *wake_request, executor_definitions);
        } catch (const std::exception& e) {
          spdlog::warn("slot {}: claiming on a wake-up: {}", slot, e.what());
          claim_failed = true;
        }
        {
          std::lock_guard lock(mutex_);
          --waking_;
        }
        if (!woken) {
          end_busy();
          // The wake-up passes to the poller only once this slot counts as
          // free: woken while it was still busy, the poller found no free
          // slot, claimed nothing, and the run waited for the next poll.
          if (claim_failed) WakePoller();
          continue;
        }
        claimed = std::move(*woken);
        claimed_on_wake = true;
        hints_wanted_changed_.Raise();  // the wake-up is taken; other slots may be idle
      }
    }
    pulse.Beat(options_.lease);
    std::vector<ExecutionEnd> ends(std::max<size_t>(claimed.claims.size(), 1), ExecutionEnd::kLost);
    try {
      if (claimed.self_claimed) {
        // Claimed on this executor's session, where its stack lock was
        // taken: the slot keeps it.
        ends = {executor->ExecuteNext(std::move(*claimed.self_claimed), stop_runs_)};
      } else {
        if (!executor || !executor->Healthy() || executor_definitions != claimed.definitions) {
          executor.reset();
          executor =
              std::make_unique<Executor>(EngineSession("slot " + std::to_string(slot)),
                                         *claimed.definitions, steps_, executor_options, leases_);
          executor_definitions = claimed.definitions;
          claim_planned = false;
        }
        ends =
            claimed.claims.size() == 1
                ? std::vector<ExecutionEnd>{executor->Execute(claimed.claims.front(), stop_runs_)}
                : executor->ExecuteBatch(claimed.claims, stop_runs_);
      }
      failures = 0;
    } catch (const std::exception& e) {
      // The claimed run stays leased until the reaper hands it back.
      spdlog::warn("slot {}: {}", slot, e.what());
      executor.reset();
      std::this_thread::sleep_for(ReconnectDelay(failures++));
    }
    {
      std::lock_guard stats_lock(stats_mutex_);
      for (const ExecutionEnd end : ends) {
        if (end == ExecutionEnd::kParked) ++stats_.parked;
        if (end == ExecutionEnd::kHandedBack) ++stats_.handed_back;
        if (end == ExecutionEnd::kHandedBack && options_.metrics) options_.metrics->RunHandedBack();
        if (end == ExecutionEnd::kLost) ++stats_.lost;
      }
    }
    if (executor) {
      if (std::optional<Executor::CheckpointClaim> claim = executor->TakeCheckpointClaim()) {
        if (options_.metrics) options_.metrics->ClaimedWithCheckpoint(claim->run ? 1 : 0);
        RecordSlotClaim(claim->run);
        if (claim->run) next = Claimed{{}, executor_definitions, std::move(claim->run)};
      } else {
        next = ClaimForSlot(slot, *executor, executor_definitions);
      }
    }
    // A wake-up may have made many runs due (start_runs notifies once):
    // unless the claim after this run found none, the poller claims them for
    // the other slots.
    if (claimed_on_wake) WakePollerOnBacklog();
    if (next) continue;  // still busy
    end_busy();
  }
}

std::optional<Worker::Claimed> Worker::ClaimForSlot(
    int slot, Executor& executor, const std::shared_ptr<const DefinitionSet>& definitions) {
  {
    // With other slots busy, the database has their work while the poller
    // claims, for every slot freed by then at once.
    std::lock_guard lock(mutex_);
    if (busy_ > 1) return std::nullopt;
  }
  if (!executor.Healthy()) return std::nullopt;
  const std::optional<store::ClaimRequest> request = NextClaimForSlot(slot, definitions);
  if (!request) return std::nullopt;
  try {
    return ClaimOnSession(executor, *request, definitions);
  } catch (const std::exception& e) {
    // The poller claims for the slot instead; the executor's next run finds
    // out whether its session is still good.
    spdlog::warn("slot {}: claiming its next run: {}", slot, e.what());
    return std::nullopt;
  }
}

std::optional<Worker::Claimed> Worker::ClaimOnSession(
    Executor& executor, const store::ClaimRequest& request,
    const std::shared_ptr<const DefinitionSet>& definitions) {
  try {
    const auto started = std::chrono::steady_clock::now();
    std::optional<store::ClaimedNextRun> claimed = executor.session().Autocommit(
        [&](store::Tx& tx) { return store::ClaimRunForSlot(tx, request); });
    if (options_.metrics) {
      options_.metrics->Claimed(std::chrono::steady_clock::now() - started, claimed ? 1 : 0);
    }
    RecordSlotClaim(claimed);
    if (!claimed) return std::nullopt;
    return Claimed{{}, definitions, std::move(claimed)};
  } catch (...) {
    // A stack lock the failed statement took outlives its rollback.
    executor.ReleaseUncountedStackLocks();
    throw;
  }
}

bool Worker::PlanSlotClaim(int slot, Executor& executor,
                           const std::shared_ptr<const DefinitionSet>& definitions) {
  std::optional<store::ClaimRequest> request;
  {
    std::lock_guard lock(mutex_);
    request = SlotClaimRequest(slot, definitions);
  }
  if (!request || !executor.Healthy()) return false;
  try {
    executor.session().Autocommit([&](store::Tx& tx) { store::PlanClaimRunForSlot(tx, *request); });
  } catch (const std::exception& e) {
    // The claim on a wake-up finds out whether the session is still good.
    spdlog::warn("slot {}: planning its claim: {}", slot, e.what());
  }
  return true;
}

std::optional<store::ClaimRequest> Worker::NextClaimForSlot(
    int slot, const std::shared_ptr<const DefinitionSet>& definitions) {
  std::lock_guard lock(mutex_);
  if (!backlog_) return std::nullopt;
  return SlotClaimRequest(slot, definitions);
}

std::optional<store::ClaimRequest> Worker::SlotClaimRequest(
    int slot, const std::shared_ptr<const DefinitionSet>& definitions) const {
  if (!queue_.empty() || stop_claiming_.load() || slot >= concurrency_ || batch_size_ > 1 ||
      definitions != definitions_) {
    return std::nullopt;
  }
  return store::ClaimRequest{queues_, served_hashes_, options_.worker_id, options_.lease};
}

void Worker::RecordSlotClaim(const std::optional<store::ClaimedNextRun>& next) {
  std::vector<std::string> queues;
  if (next && next->opened.run) queues.push_back(next->opened.run->run.queue);
  RecordClaim(next ? 1 : 0, 1, queues, true);
}

}  // namespace cairn
