// See lease_keeper.hpp.
#include "lease_keeper.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "metrics.hpp"

namespace cairn {

LeaseKeeper::LeaseKeeper(LeaseKeeperOptions options, LeaseBook& leases)
    : options_(std::move(options)), leases_(leases) {
  options_.connection.application_name = "cairn lease keeper " + options_.worker_id;
  // A renewal that cannot finish within its period is better abandoned and
  // tried afresh than waited for while the leases run out.
  options_.connection.statement_timeout = period();
  options_.connection.lock_timeout = std::min(period(), std::chrono::milliseconds(1000));
}

LeaseKeeper::~LeaseKeeper() { Stop(); }

std::chrono::milliseconds LeaseKeeper::period() const {
  return std::max(std::chrono::milliseconds(50),
                  std::min(options_.lease / 3, options_.heartbeat_interval));
}

store::LeaseRenewal LeaseKeeper::RenewOnce() {
  std::lock_guard lock(connection_mutex_);
  try {
    if (!connection_ || !connection_->IsOpen()) {
      connection_ = std::make_unique<store::Connection>(options_.connection);
    }
    const auto held = leases_.Snapshot();
    store::LeaseRenewal renewal;
    if (!held.empty()) {
      renewal = connection_->Autocommit([&](store::Tx& tx) {
        return store::RenewLeases(tx, options_.worker_id, held, options_.lease);
      });
      const int64_t lost = leases_.MarkLost(held, renewal);
      if (options_.metrics) {
        options_.metrics->LeasesRenewed(static_cast<int64_t>(renewal.renewed.size()));
        options_.metrics->LeasesLost(lost);
      }
      // A run whose checkpoint is committing is locked for a moment, which
      // is no news; one still locked at the next renewal is held by someone
      // else, and its lease is running out.
      std::vector<std::string> still_busy;
      for (const std::string& id : renewal.busy) {
        if (busy_before_.count(id) != 0) still_busy.push_back(id);
      }
      busy_before_ = {renewal.busy.begin(), renewal.busy.end()};
      if (!still_busy.empty()) {
        spdlog::warn(
            "lease keeper: {} run(s) locked by another session for two renewals, not renewed: {}",
            still_busy.size(), fmt::join(still_busy, ", "));
      }
    }
    connection_->Autocommit([&](store::Tx& tx) { store::HeartbeatWorker(tx, options_.worker_id); });
    return renewal;
  } catch (...) {
    connection_.reset();
    throw;
  }
}

void LeaseKeeper::Start() {
  std::lock_guard lock(mutex_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void LeaseKeeper::Stop() {
  std::thread thread;
  {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) return;
    stop_ = true;
    thread = std::move(thread_);
  }
  stop_cv_.notify_all();
  thread.join();
}

void LeaseKeeper::Loop() {
  Health::Pulse pulse = options_.health ? options_.health->Track("keeper") : Health::Pulse();
  bool failing = false;
  while (true) {
    // Every statement is bounded (the session's timeouts), so each round
    // comes back, renewed or failed: a round that does not is a wedge.
    pulse.Beat(period() + options_.connection.statement_timeout);
    try {
      RenewOnce();
      if (failing) spdlog::info("lease keeper: database reachable again");
      failing = false;
    } catch (const std::exception& e) {
      if (!failing) spdlog::warn("lease keeper: {} (retrying)", e.what());
      failing = true;
    }
    // After a failure, try again soon: the leases are running out.
    const auto wait = failing ? std::min(period(), std::chrono::milliseconds(500)) : period();
    std::unique_lock lock(mutex_);
    if (stop_cv_.wait_for(lock, wait, [&] { return stop_; })) return;
  }
}

}  // namespace cairn
