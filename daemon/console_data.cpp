// See console_data.hpp.
#include "console_data.hpp"

#include <algorithm>
#include <array>
#include <set>

#include "cli.hpp"
#include "console_html.hpp"
#include "cron.hpp"
#include "records_json.hpp"
#include "schedule_service.hpp"
#include "store_console.hpp"
#include "store_schedules.hpp"

namespace cairn::console {

namespace {

// Status counts stop here ("10000+"): counting a million finished runs on
// every page view would cost more than the page.
constexpr int64_t kCountCap = 10000;
constexpr int kNextFiresShown = 5;
constexpr int kScheduleRunsShown = 5;
constexpr int kStrandedShown = 50;
constexpr std::array<const char*, 8> kStatuses = {
    "ready",  "running",   "waiting",      "completed",
    "failed", "cancelled", "compensating", "compensation_failed"};

}  // namespace

Json RunsData(store::Tx& tx, const Params& params) {
  RunFilter filter;
  filter.workflow = Given(params, "workflow");
  filter.queue = Given(params, "queue");
  filter.key_prefix = Given(params, "key_prefix");
  if (const auto status = Given(params, "status")) {
    if (std::find(kStatuses.begin(), kStatuses.end(), *status) == kStatuses.end()) {
      throw HttpProblem(
          400, "status: \"" + *status + "\" is not a run status; use one of " + Join(kStatuses));
    }
    filter.status = ParseRunStatus(*status);
  }
  for (const char* name : {"created_after", "created_before"}) {
    const auto text = Given(params, name);
    if (!text) continue;
    std::string time;
    try {
      time = store::ReadDatabaseTime(tx, *text);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kInvalidArgument) throw;
      throw HttpProblem(400, std::string(name) + ": \"" + *text +
                                 R"(" is not a time (try "2026-12-01 09:30" or "yesterday"))");
    }
    (std::string_view(name) == "created_after" ? filter.created_after : filter.created_before) =
        time;
  }
  const int limit = PageSize(params);
  const auto cursor = Given(params, "cursor");
  Json counts = Json::object();
  for (const auto& [status, count] : store::CountRunsUpTo(tx, kCountCap)) {
    counts[std::string(ToString(status))] = count;
  }
  RunPage page;
  try {
    page = store::ListRunsNewestFirst(tx, filter, limit, cursor);
  } catch (const Error& e) {
    // The cursor is the only input left that the database can find wrong.
    if (e.kind() != ErrorKind::kInvalidArgument || !cursor) throw;
    throw HttpProblem(400, "cursor: \"" + cursor.value_or("") +
                               "\" is not a page cursor of this list (take next_cursor of a page)");
  }
  Json runs = Json::array();
  for (const auto& run : page.runs) runs.push_back(cli::RunToJson(run));
  Json given = Json::object();
  for (const auto& [name, value] : params) {
    if (!value.empty()) given[name] = value;
  }
  return {{"filter", given},
          {"counts", counts},
          {"counts_up_to", kCountCap},
          {"runs", runs},
          {"next_cursor", page.next_cursor ? Json(*page.next_cursor) : Json()}};
}

Json RunData(store::Tx& tx, const std::string& id, const Params& params) {
  int64_t after = 0;
  if (const auto text = Given(params, "after")) {
    const bool digits = text->size() <= 18 && std::all_of(text->begin(), text->end(), [](char c) {
                          return c >= '0' && c <= '9';
                        });
    if (!digits) throw HttpProblem(400, "after: \"" + *text + "\" is not a history position");
    after = std::stoll(*text);
  }
  const auto run = store::GetRun(tx, id);
  if (!run) throw HttpProblem(404, "run " + id + " does not exist");
  Json run_json = cli::RunToJson(*run);
  const auto error_code = store::RunErrorCode(tx, id);
  run_json["error_code"] = error_code ? Json(*error_code) : Json();
  Json waits = Json::array();
  for (const auto& wait : store::WaitsOfRun(tx, id)) waits.push_back(cli::WaitToJson(wait));
  const HistoryPage history = store::History(tx, id, after);
  Json events = Json::array();
  for (const auto& event : history.events) events.push_back(cli::EventToJson(event));
  Json children = Json::array();
  for (const auto& child : store::ChildrenOfRun(tx, id)) {
    children.push_back({{"id", child.id},
                        {"workflow", child.workflow},
                        {"status", std::string(ToString(child.status))},
                        {"created_at", child.created_at}});
  }
  Json parent;
  if (run->parent_run_id) {
    if (const auto found = store::GetRun(tx, *run->parent_run_id)) {
      parent = {{"id", found->id},
                {"workflow", found->workflow},
                {"status", std::string(ToString(found->status))}};
    }
  }
  return {{"run", run_json},
          {"error_code", run_json["error_code"]},
          {"waits", waits},
          {"events", events},
          {"next_position", history.next_position ? Json(*history.next_position) : Json()},
          {"children", children},
          {"parent", parent}};
}

Json QueuesData(store::Tx& tx) {
  std::map<std::string, Json> queues;
  auto queue = [&](const std::string& name) -> Json& {
    auto [it, inserted] = queues.try_emplace(name, Json::object());
    if (inserted) {
      it->second = {{"queue", name},
                    {"ready", 0},
                    {"delayed", 0},
                    {"running", 0},
                    {"waiting", 0},
                    {"compensating", 0},
                    {"compensation_failed", 0},
                    {"oldest_due_age_seconds", nullptr},
                    {"stranded", 0}};
    }
    return it->second;
  };
  for (const auto& row : store::ReadBacklog(tx)) {
    Json& q = queue(row.queue);
    q[row.state] = row.runs;
    if (row.oldest_due_age_seconds) {
      const double oldest = *row.oldest_due_age_seconds;
      if (q["oldest_due_age_seconds"].is_null() ||
          q["oldest_due_age_seconds"].get<double>() < oldest) {
        q["oldest_due_age_seconds"] = oldest;
      }
    }
  }
  for (const auto& [name, count] : store::CountStrandedRuns(tx, store::kWorkerLiveness)) {
    queue(name)["stranded"] = count;
  }
  Json list = Json::array();
  for (auto& [name, q] : queues) list.push_back(std::move(q));
  Json stranded = Json::array();
  for (const auto& run : store::StrandedRuns(tx, store::kWorkerLiveness, kStrandedShown)) {
    stranded.push_back(cli::RunToJson(run));
  }
  return {{"queues", list}, {"stranded", stranded}};
}

Json WorkersData(store::Tx& tx) {
  Json workers = Json::array();
  for (const auto& worker : store::ListWorkers(tx)) workers.push_back(cli::WorkerToJson(worker));
  return {{"workers", workers}};
}

Json SchedulesData(store::Tx& tx) {
  Json schedules = Json::array();
  for (const auto& schedule : store::ListSchedules(tx)) {
    Json item = cli::ScheduleToJson(schedule);
    Json fires = Json::array();
    const auto next = schedule.next_fire_at ? ParseTimestamp(*schedule.next_fire_at) : std::nullopt;
    if (schedule.enabled && next) {
      try {
        const CronSchedule cron = CronSchedule::Parse(schedule.cron);
        CronTime at{std::chrono::seconds(*next / 1'000'000)};
        for (int i = 0; i < kNextFiresShown; ++i) {
          fires.push_back(FormatUtc(at));
          at = cron.NextAfter(at);
        }
      } catch (const InvalidArgumentError&) {
        // A cron this build cannot read: the stored next fire time is all we know.
        fires.push_back(*schedule.next_fire_at);
      }
    }
    item["next_fires"] = fires;
    RunFilter filter;
    filter.workflow = schedule.workflow;
    filter.key_prefix = ScheduleRunKeyPrefix(schedule.name);
    Json runs = Json::array();
    for (const auto& run : store::ListRunsNewestFirst(tx, filter, kScheduleRunsShown).runs) {
      runs.push_back({{"id", run.id},
                      {"status", std::string(ToString(run.status))},
                      {"key", run.key ? Json(*run.key) : Json()},
                      {"created_at", run.created_at}});
    }
    item["last_runs"] = runs;
    schedules.push_back(std::move(item));
  }
  return {{"schedules", schedules}};
}

Json DefinitionsData(store::Tx& tx) {
  Json definitions = Json::array();
  for (const auto& d : store::ListDefinitionUse(tx)) {
    Json steps = Json::array();
    if (d.definition.contains("steps") && d.definition["steps"].is_array()) {
      for (const auto& step : d.definition["steps"]) steps.push_back(step.value("name", ""));
    }
    definitions.push_back({{"hash", d.hash},
                           {"workflow", d.workflow},
                           {"version", d.version},
                           {"first_step", d.first_step},
                           {"steps", steps},
                           {"registered_at", d.registered_at},
                           {"pinned_unfinished", d.pinned}});
  }
  return {{"definitions", definitions}};
}

}  // namespace cairn::console
