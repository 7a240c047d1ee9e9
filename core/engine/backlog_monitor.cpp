// See backlog_monitor.hpp.
#include "backlog_monitor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

namespace cairn {

BacklogMonitor::BacklogMonitor(BacklogMonitorOptions options, Metrics& metrics)
    : options_(std::move(options)), metrics_(metrics) {}

BacklogMonitor::~BacklogMonitor() { Stop(); }

bool BacklogMonitor::RunOnce() {
  try {
    if (!connection_ || !connection_->IsOpen()) {
      leading_ = false;
      connection_ = std::make_unique<store::Connection>(options_.connection);
    }
    if (!leading_) {
      leading_ =
          connection_->Autocommit([](store::Tx& tx) { return store::TryTakeBacklogLead(tx); });
      if (!leading_) {
        metrics_.ClearBacklog();
        return false;
      }
      spdlog::info("backlog: this daemon reads the fleet's backlog every {} ms",
                   options_.interval.count());
    }
    BacklogReading reading;
    connection_->Transact([&](store::Tx& tx) {
      for (const auto& row : store::ReadBacklog(tx)) {
        reading.runs.push_back({row.queue, row.state, row.runs});
        if (row.oldest_due_age_seconds) {
          reading.oldest_due_age_seconds.emplace_back(row.queue, *row.oldest_due_age_seconds);
        }
      }
      reading.stranded = store::CountStrandedRuns(tx, options_.worker_liveness);
    });
    // Several groups of a queue may be due: its oldest is the largest age.
    std::map<std::string, double> oldest;
    for (const auto& [queue, age] : reading.oldest_due_age_seconds) {
      oldest[queue] = std::max(oldest[queue], age);
    }
    reading.oldest_due_age_seconds.assign(oldest.begin(), oldest.end());
    metrics_.SetBacklog(reading);
    return true;
  } catch (...) {
    // The lease is the session's: a lost connection gives it up.
    connection_.reset();
    leading_ = false;
    metrics_.ClearBacklog();
    throw;
  }
}

void BacklogMonitor::Start() {
  std::lock_guard lock(mutex_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void BacklogMonitor::Stop() {
  std::thread thread;
  {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) return;
    stop_ = true;
    thread = std::move(thread_);
  }
  stop_cv_.notify_all();
  thread.join();
  connection_.reset();  // gives the lease to another daemon
  leading_ = false;
}

void BacklogMonitor::Loop() {
  bool failing = false;
  while (true) {
    try {
      RunOnce();
      if (failing) spdlog::info("backlog: database reachable again");
      failing = false;
    } catch (const std::exception& e) {
      if (!failing)
        spdlog::warn("backlog: {} (retrying every {} ms)", e.what(), options_.interval.count());
      failing = true;
    }
    std::unique_lock lock(mutex_);
    if (stop_cv_.wait_for(lock, options_.interval, [&] { return stop_; })) return;
  }
}

}  // namespace cairn
