// The schedule service: the maintenance service that starts the runs of
// recurring (cron) schedules. Across a fleet every daemon runs one; each tick
// starts exactly one run because (1) a due schedule is claimed with FOR
// UPDATE SKIP LOCKED, so one worker handles it at a time, and (2) the tick's
// run is started with the key "schedule:<name>:<tick UTC ISO>", so even a
// repeated attempt returns the same run. Ticks are judged against the
// database's now(), fetched in the claiming transaction.
//
// Missed ticks (downtime, a slow fleet): `skip` starts only the latest due
// tick; `catch_up` starts the latest catch_up_limit due ticks, oldest first,
// and skips older ones (logged). Either way next_fire_at moves to the first
// tick after now. A tick's run is due at the tick time, so workers claim
// caught-up runs oldest first.
//
// A maintenance service (periodic_service.hpp): Start and Stop are
// idempotent; RunOnce is the testable unit; a log line is written only when
// something happened. RunOnce and Sync may be called from any thread (they
// serialise on the service's session).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cron.hpp"
#include "periodic_service.hpp"
#include "schedule.hpp"
#include "store.hpp"

namespace cairn {

class Metrics;

struct ScheduleServiceOptions {
  store::ConnectionOptions connection;
  // How often the service looks for due schedules (the worker's poll interval).
  std::chrono::milliseconds interval{std::chrono::seconds(1)};
  // Schedules handled per RunOnce at most (each in its own transaction).
  int max_schedules_per_run = 100;
  Metrics* metrics = nullptr;  // null: record nothing
};

struct ScheduleSyncResult {
  int inserted = 0;
  int updated = 0;
  int unchanged = 0;
  std::vector<std::string> disabled;  // enabled before, no longer declared
};

// The run key of one tick: "schedule:<name>:<YYYY-MM-DDTHH:MM:SSZ>".
std::string ScheduleRunKey(const std::string& schedule, std::chrono::sys_seconds tick);
// What the run keys of every tick of a schedule start with ("schedule:<name>:").
std::string ScheduleRunKeyPrefix(const std::string& schedule);

// The ticks to start for a schedule due since next_fire_at, judged at `now`:
// ticks in [next_fire_at, now], the latest `limit` of them (limit < 1 counts
// as 1), oldest first. *skipped says whether older due ticks were left out.
std::vector<std::chrono::sys_seconds> DueTicks(const CronSchedule& cron,
                                               std::chrono::sys_seconds next_fire_at,
                                               std::chrono::sys_seconds now, int limit,
                                               bool* skipped = nullptr);

class ScheduleService : public PeriodicService {
 public:
  explicit ScheduleService(ScheduleServiceOptions options);
  ~ScheduleService() override;

  // Makes the schedules table match the declared list: inserts and updates
  // each declared schedule, disables those no longer declared. Unchanged
  // schedules keep their next fire time. Throws on database errors.
  ScheduleSyncResult Sync(const std::vector<ScheduleDefinition>& declared);

  // Handles every due schedule once; returns how many runs it started (ticks
  // whose run already existed are not counted). `now` (timestamptz text)
  // replaces the database's now() for tests. Throws on a lost connection;
  // a problem with one schedule is logged and the others still run.
  int64_t RunOnce(const std::optional<std::string>& now = std::nullopt);

  int64_t started_total() const;

 protected:
  // Counts: "runs started".
  ServiceReport Pass(store::Connection& connection) override;

 private:
  int64_t FireDue(store::Connection& connection, const std::optional<std::string>& now);

  ScheduleServiceOptions options_;
  std::atomic<int64_t> started_total_{0};
};

}  // namespace cairn
