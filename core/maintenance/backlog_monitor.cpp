// See backlog_monitor.hpp.
#include "backlog_monitor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "metrics.hpp"

namespace cairn {

namespace {
constexpr std::string_view kBacklogTask = "backlog";
}

BacklogMonitor::BacklogMonitor(BacklogMonitorOptions options, Metrics& metrics)
    : PeriodicService(options.service), options_(std::move(options)), metrics_(metrics) {}

BacklogMonitor::~BacklogMonitor() { Stop(); }

ServiceReport BacklogMonitor::Pass(store::Connection& connection) {
  ServiceReport report;
  if (!leading_) {
    // Taken once per session: a session lock is counted, not held once.
    leading_ = connection.Autocommit(
        [](store::Tx& tx) { return store::TryLockFleetTask(tx, kBacklogTask); });
    if (!leading_) {
      metrics_.ClearBacklog();
      return report;
    }
    spdlog::info("backlog: this daemon reads the fleet's backlog every {} ms", interval().count());
  }
  BacklogReading reading;
  connection.Transact([&](store::Tx& tx) {
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
  report.Add("readings", 1);
  return report;
}

void BacklogMonitor::SessionEnding(store::Connection& connection) {
  if (leading_ && connection.IsOpen()) {
    // Released now rather than when the server notices the session is gone,
    // so that another daemon takes over at its next pass.
    try {
      connection.Autocommit([](store::Tx& tx) { store::UnlockFleetTask(tx, kBacklogTask); });
    } catch (const std::exception& e) {
      spdlog::debug("backlog: releasing the fleet lock failed: {}", e.what());
    }
  }
  leading_ = false;
  metrics_.ClearBacklog();
}

}  // namespace cairn
