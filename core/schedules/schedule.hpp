// What a recurring schedule is: the workflow it starts, its cron expression
// and what to do with ticks missed while no daemon ran. Plain values; the
// daemon config parses them (config/schedule_config.hpp), the schedule
// service fires them (schedule_service.hpp).
#pragma once

#include <string>

#include "model.hpp"

namespace cairn {

enum class MissedPolicy { kSkip, kCatchUp };

inline const char* ToString(MissedPolicy policy) {
  return policy == MissedPolicy::kCatchUp ? "catch_up" : "skip";
}

struct ScheduleDefinition {
  std::string name;
  std::string workflow;
  std::string cron;
  std::string timezone = "UTC";
  std::string queue;  // "" = the workflow's queue
  Json input = Json::object();
  MissedPolicy missed = MissedPolicy::kSkip;
  int catch_up_limit = 1;  // 1 for skip; catch_up defaults to kDefaultCatchUpLimit
  bool enabled = true;
};

inline constexpr int kDefaultCatchUpLimit = 10;
inline constexpr int kMaxCatchUpLimit = 1000;

}  // namespace cairn
