// The backlog monitor: a maintenance service that reads the fleet's backlog
// (runs per queue and state, the age of each queue's oldest due run, the
// stranded runs) from the database on an interval and sets the backlog
// gauges. One daemon of the fleet reads: the one whose session holds the
// "backlog" fleet task lock, which it keeps from pass to pass. The others
// clear their gauges, so the fleet exports one reading; the lock is released
// when the reader stops, or with its session, and another daemon takes over
// at its next pass.
#pragma once

#include <chrono>

#include "periodic_service.hpp"

namespace cairn {

class Metrics;

struct BacklogMonitorOptions {
  PeriodicServiceOptions service{"backlog", {}, std::chrono::seconds(15)};
  // A worker is live while its heartbeat is this recent (as for
  // `cairn list --stranded`).
  std::chrono::milliseconds worker_liveness{std::chrono::minutes(2)};
};

class BacklogMonitor : public PeriodicService {
 public:
  BacklogMonitor(BacklogMonitorOptions options, Metrics& metrics);
  ~BacklogMonitor() override;

 protected:
  // Counts "readings": 1 when this daemon holds (or takes) the lock and
  // read the backlog; nothing when another daemon reads it.
  ServiceReport Pass(store::Connection& connection) override;
  // Gives the lock up (when the session still works) and clears the gauges.
  void SessionEnding(store::Connection& connection) override;

 private:
  BacklogMonitorOptions options_;
  Metrics& metrics_;
  bool leading_ = false;  // this session holds the lock; guarded like the session
};

}  // namespace cairn
