// The schedule service; see schedule_service.hpp. Each due schedule is handled in
// its own transaction (claim, start the ticks' runs, advance), so a broken
// schedule cannot hold the others back.
#include "schedule_service.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "metrics.hpp"
#include "store_schedules.hpp"

namespace cairn {

namespace {

using std::chrono::sys_seconds;

// What handling one due schedule did, for the log line written after commit.
struct Fired {
  std::string name;
  std::string policy;
  std::vector<sys_seconds> ticks;  // due ticks handled, oldest first
  int64_t started = 0;             // runs created by this call
  int64_t unregistered = 0;        // ticks skipped: the workflow is not registered
  bool skipped_older = false;      // older missed ticks were skipped by policy
  std::optional<sys_seconds> next;
  std::string parked;  // why the schedule was parked (bad cron or timezone), or ""
  std::string workflow;
};

void LogFired(const Fired& f) {
  if (!f.parked.empty()) {
    spdlog::error("schedule {}: {}; parked until the next sync (fix its declaration)", f.name,
                  f.parked);
    return;
  }
  if (f.skipped_older && !f.ticks.empty()) {
    spdlog::warn("schedule {}: missed ticks before {} were skipped (missed: {})", f.name,
                 FormatUtc(f.ticks.front()), f.policy);
  }
  if (f.unregistered > 0) {
    spdlog::warn("schedule {}: workflow {} is not registered; {} tick(s) not started", f.name,
                 f.workflow, f.unregistered);
  }
  if (f.started > 0) {
    const std::string ticks = f.ticks.size() == 1
                                  ? FormatUtc(f.ticks.front())
                                  : FormatUtc(f.ticks.front()) + ".." + FormatUtc(f.ticks.back());
    spdlog::info("schedule {}: started {} run(s) of {} (tick{} {}); next fire {}", f.name,
                 f.started, f.workflow, f.ticks.size() == 1 ? "" : "s", ticks,
                 f.next ? FormatUtc(*f.next) : "-");
  }
}

Fired Fire(store::Tx& tx, const store::DueSchedule& due) {
  const store::ScheduleRecord& s = due.schedule;
  Fired f;
  f.name = s.name;
  f.workflow = s.workflow;
  f.policy = s.missed_policy;
  std::optional<CronSchedule> cron;
  try {
    NormalizeScheduleTimezone(s.timezone);
    cron = CronSchedule::Parse(s.cron);
  } catch (const InvalidArgumentError& e) {
    f.parked = e.what();
    store::AdvanceSchedule(tx, s.name, std::nullopt, std::nullopt);
    return f;
  }
  const int limit = s.missed_policy == "catch_up" ? std::max(1, s.catch_up_limit) : 1;
  f.ticks = DueTicks(*cron, due.next_fire_at, due.now, limit, &f.skipped_older);
  std::optional<sys_seconds> last_fired;
  for (const sys_seconds tick : f.ticks) {
    const store::TickRun run = store::StartTickRun(tx, s, ScheduleRunKey(s.name, tick), tick);
    if (!run.run_id) {
      ++f.unregistered;
      continue;
    }
    if (run.started) ++f.started;
    last_fired = tick;
  }
  f.next = cron->NextAfter(due.now);
  store::AdvanceSchedule(tx, s.name, f.next, last_fired);
  return f;
}

}  // namespace

std::string ScheduleRunKeyPrefix(const std::string& schedule) {
  return "schedule:" + schedule + ":";
}

std::string ScheduleRunKey(const std::string& schedule, sys_seconds tick) {
  return ScheduleRunKeyPrefix(schedule) + FormatUtc(tick);
}

std::vector<sys_seconds> DueTicks(const CronSchedule& cron, sys_seconds next_fire_at,
                                  sys_seconds now, int limit, bool* skipped) {
  limit = std::max(1, limit);
  std::vector<sys_seconds> ticks;
  if (skipped) *skipped = false;
  if (next_fire_at > now) return ticks;
  // Walk back from the latest tick <= now: O(limit), however long the downtime.
  sys_seconds t = cron.PrevBefore(now + std::chrono::seconds(1));
  while (t >= next_fire_at && static_cast<int>(ticks.size()) < limit) {
    ticks.push_back(t);
    t = cron.PrevBefore(t);
  }
  if (skipped) *skipped = t >= next_fire_at;
  std::reverse(ticks.begin(), ticks.end());
  return ticks;
}

ScheduleService::ScheduleService(ScheduleServiceOptions options)
    : PeriodicService({"schedule service", options.connection, options.interval}),
      options_(std::move(options)) {}

ScheduleService::~ScheduleService() { Stop(); }

ScheduleSyncResult ScheduleService::Sync(const std::vector<ScheduleDefinition>& declared) {
  std::vector<ScheduleDefinition> sorted = declared;  // one lock order for every daemon
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::vector<std::pair<store::ScheduleRecord, CronSchedule>> records;
  std::vector<std::string> names;
  for (const ScheduleDefinition& d : sorted) {
    store::ScheduleRecord r;
    r.name = d.name;
    r.workflow = d.workflow;
    r.cron = d.cron;
    r.timezone = NormalizeScheduleTimezone(d.timezone);
    r.queue = d.queue;
    r.input = d.input;
    r.missed_policy = ToString(d.missed);
    r.catch_up_limit = d.missed == MissedPolicy::kCatchUp ? d.catch_up_limit : 1;
    r.enabled = d.enabled;
    records.emplace_back(std::move(r), CronSchedule::Parse(d.cron));
    names.push_back(d.name);
  }
  ScheduleSyncResult result = store::RetryTransient([&] {
    return WithConnection([&](store::Connection& connection) {
      return connection.Transact([&](store::Tx& tx) {
        ScheduleSyncResult r;
        const sys_seconds now = store::ScheduleNow(tx);
        for (const auto& [record, cron] : records) {
          switch (store::UpsertSchedule(tx, record, cron.NextAfter(now))) {
            case store::ScheduleSync::kInserted:
              ++r.inserted;
              break;
            case store::ScheduleSync::kUpdated:
              ++r.updated;
              break;
            case store::ScheduleSync::kUnchanged:
              ++r.unchanged;
              break;
          }
        }
        r.disabled = store::DisableSchedulesExcept(tx, names);
        return r;
      });
    });
  });
  if (result.inserted > 0 || result.updated > 0 || !result.disabled.empty()) {
    std::string disabled;
    for (const auto& name : result.disabled) disabled += (disabled.empty() ? "" : ", ") + name;
    spdlog::info("schedules synced: {} added, {} updated, {} unchanged, {} disabled{}{}",
                 result.inserted, result.updated, result.unchanged, result.disabled.size(),
                 disabled.empty() ? "" : ": ", disabled);
  }
  return result;
}

int64_t ScheduleService::RunOnce(const std::optional<std::string>& now) {
  return WithConnection([&](store::Connection& connection) { return FireDue(connection, now); });
}

ServiceReport ScheduleService::Pass(store::Connection& connection) {
  ServiceReport report;
  report.Add("runs started", FireDue(connection, std::nullopt));
  return report;
}

int64_t ScheduleService::FireDue(store::Connection& connection,
                                 const std::optional<std::string>& now) {
  std::vector<std::string> excluded;  // failed this round: let the others run
  int64_t started = 0;
  for (int i = 0; i < options_.max_schedules_per_run; ++i) {
    std::string current;
    std::optional<Fired> fired;
    try {
      fired = connection.Transact([&](store::Tx& tx) -> std::optional<Fired> {
        auto due = store::ClaimDueSchedule(tx, excluded, now);
        if (!due) return std::nullopt;
        current = due->schedule.name;
        return Fire(tx, *due);
      });
    } catch (const Error& e) {
      // A lost connection or an in-doubt commit ends this round (keyed
      // starts make the next round's retry harmless); anything else is this
      // schedule's problem.
      if (current.empty() || e.transient() || e.kind() == ErrorKind::kInDoubt) throw;
      spdlog::error("schedule {}: {}; retrying at the next interval", current, e.what());
      excluded.push_back(current);
      continue;
    }
    if (!fired) break;
    LogFired(*fired);
    if (options_.metrics) {
      if (fired->started > 0) options_.metrics->ScheduleFired(fired->name, fired->started);
      if (fired->skipped_older) options_.metrics->ScheduleSkipped(fired->name, "missed");
      if (fired->unregistered > 0) {
        options_.metrics->ScheduleSkipped(fired->name, "unregistered", fired->unregistered);
      }
    }
    started += fired->started;
  }
  started_total_ += started;
  return started;
}

int64_t ScheduleService::started_total() const { return started_total_.load(); }

}  // namespace cairn
