// Store operations of recurring schedules (the schedules table): claiming a
// due schedule, starting a tick's run, advancing it, syncing the declared
// schedules and listing them. Same rules as store.hpp: free functions on the
// caller's Tx, plain structs in and out, no SQL outside core/store*.cpp.
// Times cross this boundary as whole seconds (cron fire times are whole
// minutes); "now" is always the database's.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "model.hpp"
#include "store.hpp"

namespace cairn::store {

using ScheduleTime = std::chrono::sys_seconds;

struct ScheduleRecord {
  std::string name;
  std::string workflow;
  std::string cron;
  std::string timezone = "UTC";
  std::string queue;  // "" = the workflow's queue, resolved when a tick starts
  Json input = Json::object();
  std::string missed_policy = "skip";  // skip | catch_up
  int catch_up_limit = 1;
  bool enabled = true;
  // For listing: fire times as "YYYY-MM-DDTHH:MM:SSZ", absent when unset.
  std::optional<std::string> next_fire_at;
  std::optional<std::string> last_fire_at;
};

// A schedule locked by this transaction (FOR UPDATE SKIP LOCKED) whose
// next_fire_at has come, with the database time it was judged against.
struct DueSchedule {
  ScheduleRecord schedule;
  ScheduleTime next_fire_at;
  ScheduleTime now;  // database now(), or the override, truncated to the second
};

// Claims the enabled schedule that is most overdue, skipping names in
// `exclude` and rows locked by others. `now` (timestamptz text) replaces the
// database's now() for tests; absent in production.
std::optional<DueSchedule> ClaimDueSchedule(Tx& tx, const std::vector<std::string>& exclude,
                                            const std::optional<std::string>& now = std::nullopt);

struct TickRun {
  std::optional<std::string> run_id;  // absent: the workflow is not registered
  bool started = false;               // false: the tick's run already existed
};
// Starts the run of one tick through start_run with `key`, due at the tick
// time (so caught-up ticks run oldest first): a second call with the same key
// returns the existing run (started = false). An unregistered
// workflow is reported, not thrown, so that the caller can skip the tick.
TickRun StartTickRun(Tx& tx, const ScheduleRecord& schedule, const std::string& key,
                     ScheduleTime tick);

// Sets next_fire_at (absent: parked, never due until the next sync) and, when
// given, last_fire_at.
void AdvanceSchedule(Tx& tx, const std::string& name, std::optional<ScheduleTime> next_fire_at,
                     std::optional<ScheduleTime> last_fire_at);

// Database now(), truncated to the second.
ScheduleTime ScheduleNow(Tx& tx);

enum class ScheduleSync { kInserted, kUpdated, kUnchanged };
// Inserts or updates a declared schedule. next_fire_at is used for a new
// schedule, a re-enabled one and one whose cron or timezone changed; an
// unchanged schedule keeps its position (and is not written at all).
ScheduleSync UpsertSchedule(Tx& tx, const ScheduleRecord& schedule, ScheduleTime next_fire_at);
// Disables every enabled schedule whose name is not in `keep`; returns them.
std::vector<std::string> DisableSchedulesExcept(Tx& tx, const std::vector<std::string>& keep);

// Every schedule, by name.
std::vector<ScheduleRecord> ListSchedules(Tx& tx);

}  // namespace cairn::store
