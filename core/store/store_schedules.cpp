// Store operations of recurring schedules; see store_schedules.hpp. One
// function per named query in sql/queries/schedule_*.sql.
#include "store_schedules.hpp"

#include "store_internal.hpp"

namespace cairn::store {

namespace {

ScheduleTime FromEpoch(int64_t seconds) { return ScheduleTime(std::chrono::seconds(seconds)); }

std::optional<int64_t> ToEpoch(const std::optional<ScheduleTime>& t) {
  if (!t) return std::nullopt;
  return static_cast<int64_t>(t->time_since_epoch().count());
}

std::string NameArray(const std::vector<std::string>& names) { return Json(names).dump(); }

ScheduleRecord DecodeSchedule(const pqxx::row& row) {
  ScheduleRecord s;
  s.name = row["name"].c_str();
  s.workflow = row["workflow"].c_str();
  s.cron = row["cron"].c_str();
  s.timezone = row["timezone"].c_str();
  s.queue = row["queue"].c_str();
  s.input = JsonField(row["input"]);
  s.missed_policy = row["missed_policy"].c_str();
  s.catch_up_limit = row["catch_up_limit"].as<int>();
  s.enabled = row["enabled"].as<bool>();
  return s;
}

}  // namespace

std::optional<DueSchedule> ClaimDueSchedule(Tx& tx, const std::vector<std::string>& exclude,
                                            const std::optional<std::string>& now) {
  pqxx::result rows = Internal(tx).Exec("schedule_claim_due", NameArray(exclude), now);
  if (rows.empty()) return std::nullopt;
  DueSchedule due;
  due.schedule = DecodeSchedule(rows[0]);
  due.next_fire_at = FromEpoch(rows[0]["next_fire_epoch"].as<int64_t>());
  due.now = FromEpoch(rows[0]["now_epoch"].as<int64_t>());
  return due;
}

TickRun StartTickRun(Tx& tx, const ScheduleRecord& schedule, const std::string& key,
                     ScheduleTime tick) {
  pqxx::result rows =
      Internal(tx).Exec("schedule_start_tick", schedule.workflow, schedule.input.dump(), key,
                        schedule.queue, static_cast<int64_t>(tick.time_since_epoch().count()));
  TickRun run;
  run.run_id = OptionalText(rows[0]["run_id"]);
  run.started = rows[0]["started"].as<bool>();
  return run;
}

void AdvanceSchedule(Tx& tx, const std::string& name, std::optional<ScheduleTime> next_fire_at,
                     std::optional<ScheduleTime> last_fire_at) {
  Internal(tx).Exec("schedule_advance", name, ToEpoch(next_fire_at), ToEpoch(last_fire_at));
}

ScheduleTime ScheduleNow(Tx& tx) {
  return FromEpoch(Internal(tx).Exec("schedule_now")[0][0].as<int64_t>());
}

ScheduleSync UpsertSchedule(Tx& tx, const ScheduleRecord& s, ScheduleTime next_fire_at) {
  pqxx::result rows =
      Internal(tx).Exec("schedule_upsert", s.name, s.workflow, s.cron, s.timezone, s.queue,
                        s.input.dump(), s.missed_policy, s.catch_up_limit, s.enabled,
                        static_cast<int64_t>(next_fire_at.time_since_epoch().count()));
  if (rows.empty()) return ScheduleSync::kUnchanged;
  return rows[0][0].as<bool>() ? ScheduleSync::kInserted : ScheduleSync::kUpdated;
}

std::vector<std::string> DisableSchedulesExcept(Tx& tx, const std::vector<std::string>& keep) {
  std::vector<std::string> disabled;
  for (const auto& row : Internal(tx).Exec("schedule_disable_absent", NameArray(keep))) {
    disabled.emplace_back(row[0].c_str());
  }
  return disabled;
}

std::vector<ScheduleRecord> ListSchedules(Tx& tx) {
  std::vector<ScheduleRecord> out;
  for (const auto& row : Internal(tx).Exec("schedule_list")) {
    ScheduleRecord s = DecodeSchedule(row);
    s.next_fire_at = OptionalText(row["next_fire_at"]);
    s.last_fire_at = OptionalText(row["last_fire_at"]);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace cairn::store
