// Cron expressions for recurring schedules: parsing the classic five fields
// (minute hour day-of-month month day-of-week, or an @macro) and computing
// fire times. Pure computation on UTC time points: no clock is read here, the
// caller passes database time in. A CronSchedule is an immutable value, safe
// to share between threads.
//
// Schedules are evaluated in UTC only. libstdc++ 12 has no time zone database
// (std::chrono::tzdb), and a half-correct DST implementation would fire ticks
// twice or never; so any other zone is refused with a clear error.
#pragma once

#include <bitset>
#include <chrono>
#include <string>
#include <string_view>

#include "errors.hpp"

namespace cairn {

using CronTime = std::chrono::sys_seconds;

// Classic (Vixie) cron semantics:
// - fields: minute 0-59, hour 0-23, day-of-month 1-31, month 1-12 or JAN-DEC,
//   day-of-week 0-7 or SUN-SAT (0 and 7 are Sunday); names are case-insensitive;
// - each field is a comma-separated list of `*`, `N`, `N-M`, each optionally
//   with a step (`*/5`, `10-40/10`, `5/15` meaning 5-max/15);
// - day-of-month and day-of-week: when both fields are restricted (neither
//   starts with `*`) a day matches if EITHER matches ("0 0 13 * FRI" fires on
//   every 13th and every Friday); when either starts with `*`, both must match;
// - @yearly (@annually), @monthly, @weekly, @daily (@midnight), @hourly.
// An expression that can never fire (for example "0 0 30 FEB *") is refused.
class CronSchedule {
 public:
  // Throws InvalidArgumentError naming the expression, the field and the
  // problem, for example:
  //   cron expression "0 24 * * *": hour field "24": 24 is out of range 0-23
  static CronSchedule Parse(std::string_view expression);

  // The first fire time strictly after `after` (fire times are whole minutes).
  CronTime NextAfter(CronTime after) const;
  // The last fire time strictly before `before`.
  CronTime PrevBefore(CronTime before) const;
  // True when t is a fire time (a whole minute that matches every field).
  bool Matches(CronTime t) const;

  const std::string& expression() const { return expression_; }

 private:
  CronSchedule() = default;
  bool DayMatches(std::chrono::sys_days day) const;

  std::string expression_;
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_;     // 1..31
  std::bitset<13> months_;   // 1..12
  std::bitset<7> weekdays_;  // 0 = Sunday
  bool days_star_ = false;
  bool weekdays_star_ = false;
};

// Accepts "UTC" and "Etc/UTC" (returned as "UTC"); anything else is an
// InvalidArgumentError explaining that schedules are evaluated in UTC.
std::string NormalizeScheduleTimezone(std::string_view timezone);

// "2024-02-29T12:00:00Z".
std::string FormatUtc(CronTime t);

}  // namespace cairn
