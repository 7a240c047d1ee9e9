// The `schedules:` section of the daemon config: recurring (cron) schedules
// that start runs of a workflow. Parsed and validated here (cron syntax,
// names, policy), with errors reported as "file:line: key.path: problem" like
// the rest of the config. Plain values; nothing here touches the database.
//
//   schedules:
//     - name: nightly_report        # unique; part of every run key
//       workflow: report            # a registered workflow
//       cron: "0 3 * * *"           # 5 fields or @daily...; evaluated in UTC
//       timezone: UTC               # optional; only UTC is supported
//       queue: reports              # optional; default: the workflow's queue
//       input: {kind: nightly}      # optional JSON object for each run
//       missed: catch_up            # skip (default) | catch_up
//       catch_up_limit: 24          # catch_up only: at most this many missed
//                                   # ticks (the latest ones) per wake-up
//       enabled: true               # optional; false pauses the schedule
#pragma once

#include <string>
#include <vector>

#include "schedule.hpp"
#include "yaml_input.hpp"

namespace cairn {

// Parses the value of the config's `schedules` key: a list of mappings (null
// counts as an empty list). Throws ConfigError at the offending line for a
// malformed entry, an invalid cron expression, a time zone other than UTC,
// an unknown policy or a duplicate name.
std::vector<ScheduleDefinition> ParseSchedules(const YAML::Node& node, const std::string& source,
                                               yaml::LineMap& lines);

// The same from YAML text holding a `schedules:` key (tests, tools).
std::vector<ScheduleDefinition> ParseSchedulesFromString(std::string_view text,
                                                         const std::string& source);

}  // namespace cairn
