// The backlog monitor: a maintenance service that reads the fleet's backlog
// (runs per queue and state, the age of each queue's oldest due run, the
// stranded runs) from the database on an interval and sets the backlog
// gauges. One daemon of the fleet reads per interval: the one whose session
// holds the backlog lease (store::TryTakeBacklogLead); the others clear the
// gauges, so the fleet exports one reading and a takeover follows the end of
// the reader's session.
//
// Contract shared by maintenance services: Start and Stop are idempotent and
// called from one thread; RunOnce is the testable unit and returns what it
// did; a log line is written only when something changed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "metrics.hpp"
#include "store.hpp"

namespace cairn {

struct BacklogMonitorOptions {
  store::ConnectionOptions connection;
  std::chrono::milliseconds interval{std::chrono::seconds(15)};
  // A worker is live while its heartbeat is this recent (as for
  // `cairn list --stranded`).
  std::chrono::milliseconds worker_liveness{std::chrono::minutes(2)};
};

class BacklogMonitor {
 public:
  BacklogMonitor(BacklogMonitorOptions options, Metrics& metrics);
  ~BacklogMonitor();  // stops the thread
  BacklogMonitor(const BacklogMonitor&) = delete;
  BacklogMonitor& operator=(const BacklogMonitor&) = delete;

  // Reads the backlog once if this process holds (or takes) the lease, and
  // sets the gauges; otherwise clears them. Returns whether it read. Throws
  // on database errors (the lease is given up with the session).
  bool RunOnce();

  void Start();
  void Stop();

 private:
  void Loop();

  BacklogMonitorOptions options_;
  Metrics& metrics_;
  std::unique_ptr<store::Connection> connection_;
  bool leading_ = false;

  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace cairn
