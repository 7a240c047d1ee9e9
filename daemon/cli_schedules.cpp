// `cairn schedules`: the recurring schedules in the database with their next
// and last fire times (database state, in UTC). A table for people, --json
// for scripts.
#include <iostream>

#include "cli.hpp"
#include "records_json.hpp"
#include "store_schedules.hpp"

namespace cairn::cli {

po::options_description SchedulesOptions() {
  po::options_description options("options");
  options.add_options()("json", "print a JSON array");
  options.add(ConnectionOptions());
  return options;
}

int RunSchedules(const std::vector<std::string>& args) {
  auto vm = Parse("schedules", args);
  store::Connection connection(DatabaseOptions(vm, "cairn schedules"));
  const auto schedules =
      connection.Transact([](store::Tx& tx) { return store::ListSchedules(tx); });

  if (vm.count("json")) {
    Json out = Json::array();
    for (const auto& s : schedules) out.push_back(ScheduleToJson(s));
    std::cout << out.dump() << "\n";
    return kExitOk;
  }
  if (schedules.empty()) {
    std::cout << "no schedules\n";
    return kExitOk;
  }
  const std::vector<std::string> header{"NAME",   "WORKFLOW",  "CRON (UTC)",
                                        "MISSED", "NEXT FIRE", "LAST FIRE"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : schedules) {
    std::string missed = s.missed_policy;
    if (s.missed_policy == "catch_up") missed += "(" + std::to_string(s.catch_up_limit) + ")";
    std::string next = !s.enabled ? "disabled" : s.next_fire_at.value_or("parked");
    rows.push_back({s.name, s.workflow, s.cron, missed, next, s.last_fire_at.value_or("-")});
  }
  PrintTable(header, rows);
  return kExitOk;
}

}  // namespace cairn::cli
