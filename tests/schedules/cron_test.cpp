// Unit tests of cron expressions (core/cron.hpp), the tick selection of the
// missed-tick policies (DueTicks) and the `schedules:` config section. No
// database.
#include "cron.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "config.hpp"
#include "schedule_config.hpp"
#include "schedule_service.hpp"

namespace cairn {
namespace {

using namespace std::chrono;

// "YYYY-MM-DD HH:MM[:SS]" in UTC.
CronTime T(const std::string& text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  const int n = std::sscanf(text.c_str(), "%d-%d-%d %d:%d:%d", &y, &mo, &d, &h, &mi, &s);
  EXPECT_GE(n, 5) << text;
  return CronTime(
             sys_days(year(y) / month(static_cast<unsigned>(mo)) / day(static_cast<unsigned>(d)))) +
         hours(h) + minutes(mi) + seconds(s);
}

std::string Next(const std::string& expression, const std::string& after) {
  return FormatUtc(CronSchedule::Parse(expression).NextAfter(T(after)));
}

std::string Prev(const std::string& expression, const std::string& before) {
  return FormatUtc(CronSchedule::Parse(expression).PrevBefore(T(before)));
}

std::string ParseError(const std::string& expression) {
  try {
    CronSchedule::Parse(expression);
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CronNext, EveryMinuteIsStrictlyAfter) {
  EXPECT_EQ(Next("* * * * *", "2024-01-01 00:00"), "2024-01-01T00:01:00Z");
  EXPECT_EQ(Next("* * * * *", "2024-01-01 00:00:59"), "2024-01-01T00:01:00Z");
  EXPECT_EQ(Next("* * * * *", "2023-12-31 23:59:30"), "2024-01-01T00:00:00Z");
}

TEST(CronNext, StepsAndRanges) {
  EXPECT_EQ(Next("*/5 * * * *", "2024-01-01 10:02"), "2024-01-01T10:05:00Z");
  EXPECT_EQ(Next("*/5 * * * *", "2024-01-01 10:55"), "2024-01-01T11:00:00Z");
  EXPECT_EQ(Next("10-40/10 * * * *", "2024-01-01 10:40"), "2024-01-01T11:10:00Z");
  EXPECT_EQ(Next("5/20 * * * *", "2024-01-01 10:26"), "2024-01-01T10:45:00Z");
  EXPECT_EQ(Next("0 9-17/4 * * *", "2024-01-01 13:00"), "2024-01-01T17:00:00Z");
  EXPECT_EQ(Next("0 9-17/4 * * *", "2024-01-01 17:00"), "2024-01-02T09:00:00Z");
  EXPECT_EQ(Next("15,45 1,13 * * *", "2024-01-01 13:15"), "2024-01-01T13:45:00Z");
  EXPECT_EQ(Next("15,45 1,13 * * *", "2024-01-01 13:45"), "2024-01-02T01:15:00Z");
}

TEST(CronNext, MonthEnds) {
  EXPECT_EQ(Next("0 0 31 * *", "2024-01-31 00:00"), "2024-03-31T00:00:00Z");
  EXPECT_EQ(Next("0 0 31 * *", "2024-04-01 00:00"), "2024-05-31T00:00:00Z");
  EXPECT_EQ(Next("0 0 30 * *", "2024-01-30 12:00"), "2024-03-30T00:00:00Z");
  EXPECT_EQ(Next("0 12 1 * *", "2024-12-15 00:00"), "2025-01-01T12:00:00Z");
  EXPECT_EQ(Next("59 23 31 12 *", "2024-12-31 23:59"), "2025-12-31T23:59:00Z");
}

TEST(CronNext, February29OnlyInLeapYears) {
  EXPECT_EQ(Next("0 0 29 2 *", "2023-03-01 00:00"), "2024-02-29T00:00:00Z");
  EXPECT_EQ(Next("0 0 29 2 *", "2024-02-29 00:00"), "2028-02-29T00:00:00Z");
  // 2100 is not a leap year.
  EXPECT_EQ(Next("0 0 29 2 *", "2096-03-01 00:00"), "2104-02-29T00:00:00Z");
  EXPECT_EQ(Prev("0 0 29 2 *", "2028-01-01 00:00"), "2024-02-29T00:00:00Z");
}

TEST(CronNext, DayOfMonthOrDayOfWeekWhenBothRestricted) {
  // The 13th or any Friday: 2024-09-06 is a Friday, 2024-09-13 the 13th (also a Friday).
  EXPECT_EQ(Next("0 0 13 * 5", "2024-09-01 00:00"), "2024-09-06T00:00:00Z");
  EXPECT_EQ(Next("0 0 13 * FRI", "2024-09-06 00:00"), "2024-09-13T00:00:00Z");
  // 2024-10-13 is a Sunday and still fires; so does Friday 2024-10-04.
  EXPECT_EQ(Next("0 0 13 * 5", "2024-09-27 00:00"), "2024-10-04T00:00:00Z");
  EXPECT_EQ(Next("0 0 13 * 5", "2024-10-11 00:00"), "2024-10-13T00:00:00Z");
  // 1st or Monday.
  EXPECT_EQ(Next("0 8 1 * MON", "2024-07-29 09:00"), "2024-08-01T08:00:00Z");
}

TEST(CronNext, DayOfWeekAloneAndStarredDayOfMonth) {
  // Only Mondays (day-of-month is *): 2024-01-01 is a Monday.
  EXPECT_EQ(Next("30 6 * * 1", "2024-01-01 06:30"), "2024-01-08T06:30:00Z");
  // A day-of-month field starting with * means AND: the 1st..7th that is a Monday.
  EXPECT_EQ(Next("0 0 */1 * 1", "2024-01-02 00:00"), "2024-01-08T00:00:00Z");
  // Weekdays only, Sunday as 0 and as 7.
  EXPECT_EQ(Next("0 9 * * MON-FRI", "2024-01-05 09:00"), "2024-01-08T09:00:00Z");
  EXPECT_EQ(Next("0 9 * * 0", "2024-01-01 00:00"), "2024-01-07T09:00:00Z");
  EXPECT_EQ(Next("0 9 * * 7", "2024-01-01 00:00"), "2024-01-07T09:00:00Z");
  EXPECT_EQ(Next("0 9 * * FRI-SUN", "2024-01-01 00:00"), "2024-01-05T09:00:00Z");
  EXPECT_EQ(Next("0 9 * * 5-7", "2024-01-06 10:00"), "2024-01-07T09:00:00Z");
}

TEST(CronNext, MonthNamesAndCase) {
  EXPECT_EQ(Next("0 0 1 jan,Jul *", "2024-01-01 00:00"), "2024-07-01T00:00:00Z");
  EXPECT_EQ(Next("0 0 1 MAR-MAY/2 *", "2024-03-01 00:00"), "2024-05-01T00:00:00Z");
  EXPECT_EQ(Next("0 0 1 MAR-MAY/2 *", "2024-05-01 00:00"), "2025-03-01T00:00:00Z");
}

TEST(CronNext, Macros) {
  EXPECT_EQ(Next("@hourly", "2024-01-01 10:00"), "2024-01-01T11:00:00Z");
  EXPECT_EQ(Next("@daily", "2024-01-01 10:00"), "2024-01-02T00:00:00Z");
  EXPECT_EQ(Next("@midnight", "2024-01-01 10:00"), "2024-01-02T00:00:00Z");
  EXPECT_EQ(Next("@weekly", "2024-01-01 10:00"), "2024-01-07T00:00:00Z");
  EXPECT_EQ(Next("@monthly", "2024-01-31 10:00"), "2024-02-01T00:00:00Z");
  EXPECT_EQ(Next("@yearly", "2024-01-01 00:00"), "2025-01-01T00:00:00Z");
  EXPECT_EQ(Next("@ANNUALLY", "2024-06-01 00:00"), "2025-01-01T00:00:00Z");
  EXPECT_EQ(CronSchedule::Parse("@daily").expression(), "@daily");
}

TEST(CronPrev, IsStrictlyBeforeAndInvertsNext) {
  EXPECT_EQ(Prev("* * * * *", "2024-01-01 00:00"), "2023-12-31T23:59:00Z");
  EXPECT_EQ(Prev("* * * * *", "2024-01-01 00:00:01"), "2024-01-01T00:00:00Z");
  EXPECT_EQ(Prev("0 0 31 * *", "2024-05-01 00:00"), "2024-03-31T00:00:00Z");
  EXPECT_EQ(Prev("0 9 * * MON-FRI", "2024-01-08 09:00"), "2024-01-05T09:00:00Z");
  EXPECT_EQ(Prev("0 0 1 1 *", "2024-01-01 00:00"), "2023-01-01T00:00:00Z");
  // Next and Prev walk the same ticks.
  for (const char* expression :
       {"*/7 * * * *", "0 0 13 * 5", "0 3 */2 * *", "15 4 * JAN,JUL MON", "0 0 29 2 *"}) {
    const CronSchedule cron = CronSchedule::Parse(expression);
    CronTime t = T("2023-11-28 13:37");
    for (int i = 0; i < 50; ++i) {
      const CronTime next = cron.NextAfter(t);
      EXPECT_TRUE(cron.Matches(next)) << expression << " " << FormatUtc(next);
      EXPECT_EQ(cron.PrevBefore(next + seconds(1)), next) << expression;
      EXPECT_EQ(cron.NextAfter(cron.PrevBefore(next)), next) << expression;
      t = next;
    }
  }
}

TEST(CronMatches, OnlyWholeMatchingMinutes) {
  const CronSchedule cron = CronSchedule::Parse("30 12 * * *");
  EXPECT_TRUE(cron.Matches(T("2024-01-01 12:30")));
  EXPECT_FALSE(cron.Matches(T("2024-01-01 12:30:01")));
  EXPECT_FALSE(cron.Matches(T("2024-01-01 12:31")));
}

TEST(CronParse, InvalidExpressionsHaveClearErrors) {
  EXPECT_EQ(ParseError(""),
            "cron expression \"\": is empty (expected 5 fields: minute hour day-of-month month "
            "day-of-week)");
  EXPECT_EQ(ParseError("* * * *"),
            "cron expression \"* * * *\": has 4 fields, expected 5 (minute hour day-of-month "
            "month day-of-week)");
  EXPECT_NE(ParseError("0 * * * * *").find("seconds and years are not supported"),
            std::string::npos);
  EXPECT_EQ(ParseError("60 * * * *"),
            "cron expression \"60 * * * *\": minute field \"60\": 60 is out of range 0-59");
  EXPECT_EQ(ParseError("0 24 * * *"),
            "cron expression \"0 24 * * *\": hour field \"24\": 24 is out of range 0-23");
  EXPECT_EQ(ParseError("0 0 0 * *"),
            "cron expression \"0 0 0 * *\": day-of-month field \"0\": 0 is out of range 1-31");
  EXPECT_EQ(ParseError("0 0 * 13 *"),
            "cron expression \"0 0 * 13 *\": month field \"13\": 13 is out of range 1-12");
  EXPECT_EQ(ParseError("0 0 * * 8"),
            "cron expression \"0 0 * * 8\": day-of-week field \"8\": 8 is out of range 0-7");
  EXPECT_EQ(ParseError("*/0 * * * *"),
            "cron expression \"*/0 * * * *\": minute field \"*/0\": step must be at least 1, "
            "got 0");
  EXPECT_EQ(ParseError("30-10 * * * *"),
            "cron expression \"30-10 * * * *\": minute field \"30-10\": range 30-10 is reversed "
            "(30 > 10)");
  EXPECT_EQ(ParseError("0 0 * FOO *"),
            "cron expression \"0 0 * FOO *\": month field \"FOO\": unknown name \"FOO\" (use "
            "JAN-DEC or numbers)");
  EXPECT_EQ(ParseError("0 0 * * MONDAY"),
            "cron expression \"0 0 * * MONDAY\": day-of-week field \"MONDAY\": unknown name "
            "\"MONDAY\" (use SUN-SAT or numbers)");
  EXPECT_EQ(ParseError("a * * * *"),
            "cron expression \"a * * * *\": minute field \"a\": value \"a\" is not a number");
  EXPECT_EQ(ParseError("1,,2 * * * *"),
            "cron expression \"1,,2 * * * *\": minute field \"1,,2\": empty list item");
  EXPECT_EQ(ParseError("-5 * * * *"),
            "cron expression \"-5 * * * *\": minute field \"-5\": -5 is out of range 0-59");
  EXPECT_NE(ParseError("0 0 ? * MON").find("Quartz syntax"), std::string::npos);
  EXPECT_NE(ParseError("0 0 L * *").find("Quartz syntax"), std::string::npos);
  EXPECT_EQ(ParseError("@reboot"),
            "cron expression \"@reboot\": unknown macro @reboot (use @yearly, @annually, "
            "@monthly, @weekly, @daily, @midnight or @hourly)");
}

TEST(CronParse, AStepPastTheFieldSetsOnlyItsFirstValue) {
  // Stepping past the largest int once overflowed (found under UBSan).
  EXPECT_EQ(Next("1/2147483647 * * * *", "2024-01-01 00:00"), "2024-01-01T00:01:00Z");
  EXPECT_EQ(Next("1/2147483647 * * * *", "2024-01-01 00:01"), "2024-01-01T01:01:00Z");
  EXPECT_EQ(Next("0 0 1 6-12/2147483647 *", "2024-01-01 00:00"), "2024-06-01T00:00:00Z");
}

TEST(CronParse, RefusesExpressionsThatNeverFire) {
  EXPECT_EQ(ParseError("0 0 30 2 *"),
            "cron expression \"0 0 30 2 *\": never fires: no month in the month field has any of "
            "the days in the day-of-month field");
  EXPECT_NE(ParseError("0 0 31 APR,JUN,SEP,NOV *").find("never fires"), std::string::npos);
  // With day-of-week also restricted, classic cron ORs them: this fires on
  // February Mondays.
  EXPECT_EQ(Next("0 0 30 2 MON", "2024-01-01 00:00"), "2024-02-05T00:00:00Z");
  // A rare but possible AND: Feb 1 on a Sunday.
  EXPECT_EQ(Next("0 0 */31 2 */7", "2024-01-01 00:00"), "2026-02-01T00:00:00Z");
}

TEST(CronTimezone, OnlyUtc) {
  EXPECT_EQ(NormalizeScheduleTimezone("UTC"), "UTC");
  EXPECT_EQ(NormalizeScheduleTimezone("Etc/UTC"), "UTC");
  try {
    NormalizeScheduleTimezone("Europe/Berlin");
    FAIL() << "expected an error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("schedules are evaluated in UTC"), std::string::npos)
        << e.what();
  }
}

TEST(DueTicks, SkipTakesOnlyTheLatestDueTick) {
  const CronSchedule cron = CronSchedule::Parse("*/10 * * * *");
  bool skipped = false;
  auto ticks = DueTicks(cron, T("2024-01-01 00:00"), T("2024-01-01 03:05"), 1, &skipped);
  ASSERT_EQ(ticks.size(), 1u);
  EXPECT_EQ(FormatUtc(ticks[0]), "2024-01-01T03:00:00Z");
  EXPECT_TRUE(skipped);
}

TEST(DueTicks, CatchUpTakesTheLatestLimitOldestFirst) {
  const CronSchedule cron = CronSchedule::Parse("*/10 * * * *");
  bool skipped = false;
  auto ticks = DueTicks(cron, T("2024-01-01 00:00"), T("2024-01-01 03:05"), 3, &skipped);
  ASSERT_EQ(ticks.size(), 3u);
  EXPECT_EQ(FormatUtc(ticks[0]), "2024-01-01T02:40:00Z");
  EXPECT_EQ(FormatUtc(ticks[2]), "2024-01-01T03:00:00Z");
  EXPECT_TRUE(skipped);
  // Fewer due ticks than the limit: all of them, none skipped.
  ticks = DueTicks(cron, T("2024-01-01 02:40"), T("2024-01-01 03:00"), 10, &skipped);
  ASSERT_EQ(ticks.size(), 3u);
  EXPECT_EQ(FormatUtc(ticks[0]), "2024-01-01T02:40:00Z");
  EXPECT_FALSE(skipped);
  // A year of downtime costs only `limit` steps.
  ticks = DueTicks(CronSchedule::Parse("* * * * *"), T("2020-01-01 00:00"),
                   T("2024-01-01 00:00:30"), 2, &skipped);
  ASSERT_EQ(ticks.size(), 2u);
  EXPECT_EQ(FormatUtc(ticks[1]), "2024-01-01T00:00:00Z");
}

TEST(DueTicks, NothingDueBeforeTheNextFireTime) {
  const CronSchedule cron = CronSchedule::Parse("0 * * * *");
  EXPECT_TRUE(DueTicks(cron, T("2024-01-01 01:00"), T("2024-01-01 00:59:59"), 5).empty());
  // next_fire_at set between ticks (by hand): no tick in [next_fire_at, now].
  EXPECT_TRUE(DueTicks(cron, T("2024-01-01 00:30"), T("2024-01-01 00:45"), 5).empty());
  auto ticks = DueTicks(cron, T("2024-01-01 01:00"), T("2024-01-01 01:00"), 5);
  ASSERT_EQ(ticks.size(), 1u);
}

TEST(ScheduleRunKey, NamesTheTickInUtc) {
  EXPECT_EQ(ScheduleRunKey("nightly", T("2024-02-29 03:00")),
            "schedule:nightly:2024-02-29T03:00:00Z");
}

std::string ConfigError(const std::string& yaml) {
  try {
    LoadConfigFromString(yaml, "cairn.yaml", "/tmp");
  } catch (const cairn::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ScheduleConfig, ParsesEveryKey) {
  const DaemonConfig c = LoadConfigFromString(R"(
schedules:
  - name: nightly
    workflow: report
    cron: "0 3 * * *"
    timezone: Etc/UTC
    queue: reports
    input: {kind: nightly, days: 7, ratio: 0.5, flag: true, none: null, quoted: "42", list: [1, a]}
    missed: catch_up
    catch_up_limit: 24
    enabled: false
  - name: hourly
    workflow: report
    cron: "@hourly"
)",
                                              "cairn.yaml", "/tmp");
  ASSERT_TRUE(c.schedules_declared);
  ASSERT_EQ(c.schedules.size(), 2u);
  const ScheduleDefinition& n = c.schedules[0];
  EXPECT_EQ(n.name, "nightly");
  EXPECT_EQ(n.workflow, "report");
  EXPECT_EQ(n.cron, "0 3 * * *");
  EXPECT_EQ(n.timezone, "UTC");
  EXPECT_EQ(n.queue, "reports");
  EXPECT_EQ(n.input, Json::parse(R"({"kind":"nightly","days":7,"ratio":0.5,"flag":true,
                                     "none":null,"quoted":"42","list":[1,"a"]})"));
  EXPECT_EQ(n.missed, MissedPolicy::kCatchUp);
  EXPECT_EQ(n.catch_up_limit, 24);
  EXPECT_FALSE(n.enabled);
  const ScheduleDefinition& h = c.schedules[1];
  EXPECT_EQ(h.missed, MissedPolicy::kSkip);
  EXPECT_EQ(h.catch_up_limit, 1);
  EXPECT_EQ(h.queue, "");
  EXPECT_EQ(h.input, Json::object());
  EXPECT_TRUE(h.enabled);
}

TEST(ScheduleConfig, AbsentSectionIsNotDeclaredAndEmptyIs) {
  EXPECT_FALSE(
      LoadConfigFromString("log: {level: info}\n", "cairn.yaml", "/tmp").schedules_declared);
  const DaemonConfig empty = LoadConfigFromString("schedules: []\n", "cairn.yaml", "/tmp");
  EXPECT_TRUE(empty.schedules_declared);
  EXPECT_TRUE(empty.schedules.empty());
  EXPECT_TRUE(LoadConfigFromString("schedules:\n", "cairn.yaml", "/tmp").schedules_declared);
}

TEST(ScheduleConfig, CatchUpDefaultsToABoundedLimit) {
  const DaemonConfig c = LoadConfigFromString(
      "schedules:\n  - {name: a, workflow: w, cron: '* * * * *', missed: catch_up}\n", "cairn.yaml",
      "/tmp");
  EXPECT_EQ(c.schedules.at(0).catch_up_limit, kDefaultCatchUpLimit);
}

TEST(ScheduleConfig, ErrorsNameFileLineAndKey) {
  EXPECT_EQ(ConfigError("schedules:\n  - name: a\n    workflow: w\n    cron: '0 25 * * *'\n"),
            "cairn.yaml:4: schedules[0].cron: cron expression \"0 25 * * *\": hour field \"25\": "
            "25 is out of range 0-23");
  EXPECT_EQ(ConfigError("schedules:\n  - name: a\n    workflow: w\n"),
            "cairn.yaml:2: schedules[0]: missing required key \"cron\"");
  EXPECT_EQ(ConfigError("schedules:\n  - name: a\n    workflow: w\n    cron: '@daily'\n"
                        "    timezone: Europe/Paris\n"),
            "cairn.yaml:5: schedules[0].timezone: timezone \"Europe/Paris\" is not supported: "
            "schedules are evaluated in UTC (write the cron expression in UTC and set timezone: "
            "UTC or leave it out)");
  EXPECT_EQ(ConfigError("schedules:\n  - {name: a, workflow: w, cron: '@daily', missed: later}\n"),
            "cairn.yaml:2: schedules[0].missed: must be one of skip | catch_up, got \"later\"");
  EXPECT_EQ(
      ConfigError("schedules:\n  - {name: a, workflow: w, cron: '@daily', catch_up_limit: 3}\n"),
      "cairn.yaml:2: schedules[0].catch_up_limit: applies only with missed: catch_up");
  EXPECT_EQ(ConfigError("schedules:\n  - {name: a, workflow: w, cron: '@daily', missed: catch_up,"
                        " catch_up_limit: 0}\n"),
            "cairn.yaml:2: schedules[0].catch_up_limit: must be an integer between 1 and 1000, "
            "got \"0\"");
  EXPECT_EQ(ConfigError("schedules:\n  - {name: a, workflow: w, cron: '@daily'}\n"
                        "  - {name: a, workflow: v, cron: '@hourly'}\n"),
            "cairn.yaml:3: schedules[1].name: duplicate schedule name \"a\"");
  EXPECT_EQ(ConfigError("schedules:\n  - {name: 'a b', workflow: w, cron: '@daily'}\n"),
            "cairn.yaml:2: schedules[0].name: invalid schedule name \"a b\": must match "
            "^[A-Za-z_][A-Za-z0-9_.-]{0,127}$");
  EXPECT_EQ(ConfigError("schedules:\n  - {name: a, workflow: w, cron: '@daily', input: [1]}\n"),
            "cairn.yaml:2: schedules[0].input: must be a mapping (a JSON object)");
  EXPECT_EQ(ConfigError("schedules:\n  - {name: a, workflow: w, cron: '@daily', crom: x}\n"),
            "cairn.yaml:2: schedules[0].crom: unknown key \"crom\" (did you mean \"cron\"?)");
  EXPECT_EQ(ConfigError("schedules: {name: a}\n"),
            "cairn.yaml:1: schedules: must be a list of schedules");
}

}  // namespace
}  // namespace cairn
