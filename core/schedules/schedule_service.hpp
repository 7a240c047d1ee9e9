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
// Contract shared by maintenance services: Start and Stop are idempotent and
// called from one thread; RunOnce is the testable unit and returns what it
// did; a log line is written only when something happened. RunOnce and Sync
// may be called from any thread (they serialise on the service's connection).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cron.hpp"
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

// The ticks to start for a schedule due since next_fire_at, judged at `now`:
// ticks in [next_fire_at, now], the latest `limit` of them (limit < 1 counts
// as 1), oldest first. *skipped says whether older due ticks were left out.
std::vector<std::chrono::sys_seconds> DueTicks(const CronSchedule& cron,
                                               std::chrono::sys_seconds next_fire_at,
                                               std::chrono::sys_seconds now, int limit,
                                               bool* skipped = nullptr);

class ScheduleService {
 public:
  explicit ScheduleService(ScheduleServiceOptions options);
  ~ScheduleService();  // stops the thread
  ScheduleService(const ScheduleService&) = delete;
  ScheduleService& operator=(const ScheduleService&) = delete;

  // Makes the schedules table match the declared list: inserts and updates
  // each declared schedule, disables those no longer declared. Unchanged
  // schedules keep their next fire time. Throws on database errors.
  ScheduleSyncResult Sync(const std::vector<ScheduleDefinition>& declared);

  // Handles every due schedule once; returns how many runs it started (ticks
  // whose run already existed are not counted). `now` (timestamptz text)
  // replaces the database's now() for tests. Throws on a lost connection;
  // a problem with one schedule is logged and the others still run.
  int64_t RunOnce(const std::optional<std::string>& now = std::nullopt);

  // Starts the service thread (RunOnce every interval); idempotent.
  void Start();
  // Stops and joins it; idempotent.
  void Stop();

  int64_t started_total() const;

 private:
  void Loop();
  store::Connection& Connection();  // with mutex_ held

  ScheduleServiceOptions options_;
  mutable std::mutex mutex_;  // the connection and counters
  std::unique_ptr<store::Connection> connection_;
  int64_t started_total_ = 0;

  std::mutex thread_mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace cairn
