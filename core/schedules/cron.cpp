// Cron expression parsing and fire-time search; see cron.hpp. The search
// walks day by day (skipping months that cannot match) and, on a matching
// day, picks the first or last allowed hour and minute: at most a few
// thousand cheap steps even for rare expressions such as Feb 29.
#include "cron.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <vector>

namespace cairn {

namespace {

using namespace std::chrono;

// 400 Gregorian years repeat exactly (146097 days, a whole number of weeks):
// an expression with no fire time within them has none at all.
constexpr int kSearchDays = 146097 + 366;

struct FieldSpec {
  const char* name;
  int min;
  int max;
  const std::array<std::string_view, 13>* names;  // names[i] is value i (+ offset), or null
  int name_offset;
};

constexpr std::array<std::string_view, 13> kMonthNames{
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC", ""};
constexpr std::array<std::string_view, 13> kWeekdayNames{
    "SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", "", "", "", "", "", ""};

const FieldSpec kMinute{"minute", 0, 59, nullptr, 0};
const FieldSpec kHour{"hour", 0, 23, nullptr, 0};
const FieldSpec kDayOfMonth{"day-of-month", 1, 31, nullptr, 0};
const FieldSpec kMonth{"month", 1, 12, &kMonthNames, 1};
const FieldSpec kDayOfWeek{"day-of-week", 0, 7, &kWeekdayNames, 0};

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

class FieldParser {
 public:
  FieldParser(std::string_view expression, const FieldSpec& spec, std::string_view text)
      : expression_(expression), spec_(spec), text_(text) {}

  [[noreturn]] void Fail(const std::string& problem) const {
    throw InvalidArgumentError("cron expression \"" + std::string(expression_) + "\": " +
                               spec_.name + " field \"" + std::string(text_) + "\": " + problem);
  }

  // Values set in the field, as a bitset over 0..spec.max.
  std::vector<bool> Parse() const {
    std::vector<bool> set(static_cast<size_t>(spec_.max) + 1, false);
    if (text_.empty()) Fail("is empty");
    size_t start = 0;
    while (true) {
      const size_t comma = text_.find(',', start);
      const std::string_view item = text_.substr(
          start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      ParseItem(item, set);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return set;
  }

 private:
  void ParseItem(std::string_view item, std::vector<bool>& set) const {
    if (item.empty()) Fail("empty list item");
    int step = 1;
    bool has_step = false;
    if (const size_t slash = item.find('/'); slash != std::string_view::npos) {
      step = Number(item.substr(slash + 1), "step");
      if (step < 1) Fail("step must be at least 1, got " + std::to_string(step));
      has_step = true;
      item = item.substr(0, slash);
      if (item.empty()) Fail("missing range before \"/\"");
    }
    int low = 0;
    int high = 0;
    if (item == "*") {
      low = spec_.min;
      high = spec_.max == 7 ? 6 : spec_.max;  // day-of-week: 7 is only an alias
    } else if (const size_t dash = item.find('-', 1); dash != std::string_view::npos) {
      low = Value(item.substr(0, dash));
      const std::string_view high_text = item.substr(dash + 1);
      high = Value(high_text);
      // "FRI-SUN": Sunday closes a day-of-week range as 7.
      if (&spec_ == &kDayOfWeek && high == 0 && low > 0) high = 7;
      if (low > high) {
        Fail("range " + std::string(item) + " is reversed (" + std::to_string(low) + " > " +
             std::to_string(high) + ")");
      }
    } else {
      low = Value(item);
      // "5/15" means 5-max/15; a bare value is itself.
      high = has_step ? (spec_.max == 7 ? 6 : spec_.max) : low;
    }
    for (int v = low; v <= high; v += step) {
      set[static_cast<size_t>(v)] = true;
      if (step > high - v) break;  // the next value is past high (and may not fit an int)
    }
  }

  // A number or (month, day-of-week) a name, checked against the range.
  int Value(std::string_view text) const {
    if (text.empty()) Fail("missing value");
    if (spec_.names != nullptr && std::isalpha(static_cast<unsigned char>(text[0]))) {
      const std::string upper = Upper(text);
      for (size_t i = 0; i < spec_.names->size(); ++i) {
        if (!(*spec_.names)[i].empty() && (*spec_.names)[i] == upper) {
          return static_cast<int>(i) + spec_.name_offset;
        }
      }
      Fail("unknown name \"" + std::string(text) + "\" (use " +
           (&spec_ == &kMonth ? "JAN-DEC" : "SUN-SAT") + " or numbers)");
    }
    const int v = Number(text, "value");
    if (v < spec_.min || v > spec_.max) {
      Fail(std::to_string(v) + " is out of range " + std::to_string(spec_.min) + "-" +
           std::to_string(spec_.max));
    }
    return v;
  }

  int Number(std::string_view text, const char* what) const {
    int v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
      if (text == "?" || text == "L" || text == "W" || text.find('#') != std::string_view::npos ||
          text.find_first_of("LW") != std::string_view::npos) {
        Fail(std::string("\"") + std::string(text) +
             "\" is Quartz syntax, not classic cron (use *, lists, ranges and steps)");
      }
      Fail(std::string(what) + " \"" + std::string(text) + "\" is not a number" +
           (spec_.names ? " or a name" : ""));
    }
    return v;
  }

  std::string_view expression_;
  const FieldSpec& spec_;
  std::string_view text_;
};

template <size_t N>
void Fill(std::bitset<N>& bits, const std::vector<bool>& set, int wrap = 0) {
  for (size_t v = 0; v < set.size(); ++v) {
    if (set[v]) bits.set(wrap > 0 ? v % static_cast<size_t>(wrap) : v);
  }
}

std::string_view Macro(std::string_view name) {
  const std::string upper = Upper(name);
  if (upper == "@YEARLY" || upper == "@ANNUALLY") return "0 0 1 1 *";
  if (upper == "@MONTHLY") return "0 0 1 * *";
  if (upper == "@WEEKLY") return "0 0 * * 0";
  if (upper == "@DAILY" || upper == "@MIDNIGHT") return "0 0 * * *";
  if (upper == "@HOURLY") return "0 * * * *";
  return {};
}

}  // namespace

CronSchedule CronSchedule::Parse(std::string_view expression) {
  const std::string original(expression);
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < expression.size()) {
    while (i < expression.size() && std::isspace(static_cast<unsigned char>(expression[i]))) ++i;
    const size_t start = i;
    while (i < expression.size() && !std::isspace(static_cast<unsigned char>(expression[i]))) ++i;
    if (i > start) fields.push_back(expression.substr(start, i - start));
  }
  auto fail = [&](const std::string& problem) -> void {
    throw InvalidArgumentError("cron expression \"" + original + "\": " + problem);
  };
  if (fields.empty())
    fail("is empty (expected 5 fields: minute hour day-of-month month day-of-week)");
  std::string_view body = expression;
  if (fields.size() == 1 && fields[0][0] == '@') {
    body = Macro(fields[0]);
    if (body.empty()) {
      fail("unknown macro " + std::string(fields[0]) +
           " (use @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)");
    }
    CronSchedule schedule = Parse(body);
    schedule.expression_ = original;
    return schedule;
  }
  if (fields.size() != 5) {
    fail("has " + std::to_string(fields.size()) +
         " fields, expected 5 (minute hour day-of-month month day-of-week)" +
         (fields.size() == 6 ? "; seconds and years are not supported" : ""));
  }
  CronSchedule s;
  s.expression_ = original;
  Fill(s.minutes_, FieldParser(original, kMinute, fields[0]).Parse());
  Fill(s.hours_, FieldParser(original, kHour, fields[1]).Parse());
  Fill(s.days_, FieldParser(original, kDayOfMonth, fields[2]).Parse());
  Fill(s.months_, FieldParser(original, kMonth, fields[3]).Parse());
  Fill(s.weekdays_, FieldParser(original, kDayOfWeek, fields[4]).Parse(), 7);
  s.days_star_ = fields[2][0] == '*';
  s.weekdays_star_ = fields[4][0] == '*';

  // Refuse what never fires ("0 0 30 FEB *", "0 0 31 APR,JUN *").
  bool day_exists = false;
  for (int d = 1; d <= 31 && !day_exists; ++d) {
    if (!s.days_[static_cast<size_t>(d)]) continue;
    for (unsigned m = 1; m <= 12; ++m) {
      if (s.months_[m] && year_month_day_last(year(2000), month_day_last(month(m))).day() >=
                              day(static_cast<unsigned>(d))) {
        day_exists = true;
        break;
      }
    }
  }
  const bool or_semantics = !s.days_star_ && !s.weekdays_star_;
  if (!or_semantics && !day_exists) {
    fail("never fires: no month in the month field has any of the days in the day-of-month field");
  }
  // The AND of a restricted day-of-month with day-of-week ("0 0 */31 FEB */7":
  // a Feb 1 that is a Sunday) can be rare but is only impossible when no day
  // matches in a whole 400-year cycle.
  const sys_days origin = sys_days(year(2000) / January / 1);
  bool found = false;
  for (int n = 0; n < kSearchDays && !found; ++n) {
    const sys_days d = origin + days(n);
    found = s.months_[static_cast<unsigned>(year_month_day(d).month())] && s.DayMatches(d);
  }
  if (!found) fail("never fires: no day matches both the day-of-month and day-of-week fields");
  return s;
}

bool CronSchedule::DayMatches(sys_days d) const {
  const year_month_day ymd(d);
  const bool dom = days_[static_cast<unsigned>(ymd.day())];
  const bool dow = weekdays_[weekday(d).c_encoding()];
  if (days_star_ || weekdays_star_) return dom && dow;
  return dom || dow;
}

bool CronSchedule::Matches(CronTime t) const {
  if (t != floor<minutes>(t)) return false;
  const sys_days d = floor<days>(t);
  const year_month_day ymd(d);
  const hh_mm_ss<seconds> hms(t - d);
  return months_[static_cast<unsigned>(ymd.month())] && DayMatches(d) &&
         hours_[static_cast<size_t>(hms.hours().count())] &&
         minutes_[static_cast<size_t>(hms.minutes().count())];
}

CronTime CronSchedule::NextAfter(CronTime after) const {
  const CronTime start = floor<minutes>(after) + minutes(1);
  sys_days d = floor<days>(start);
  int from = static_cast<int>(duration_cast<minutes>(start - d).count());  // minute of day
  const sys_days limit = d + days(kSearchDays);
  while (d < limit) {
    const year_month_day ymd(d);
    if (!months_[static_cast<unsigned>(ymd.month())]) {
      d = sys_days((ymd.year() / ymd.month() + months(1)) / 1);
      from = 0;
      continue;
    }
    if (DayMatches(d)) {
      for (int h = from / 60; h < 24; ++h) {
        if (!hours_[static_cast<size_t>(h)]) continue;
        for (int m = (h == from / 60 ? from % 60 : 0); m < 60; ++m) {
          if (minutes_[static_cast<size_t>(m)]) return CronTime(d) + hours(h) + minutes(m);
        }
      }
    }
    d += days(1);
    from = 0;
  }
  throw InvalidArgumentError("cron expression \"" + expression_ + "\" never fires");
}

CronTime CronSchedule::PrevBefore(CronTime before) const {
  const CronTime end = ceil<minutes>(before) - minutes(1);
  sys_days d = floor<days>(end);
  int to = static_cast<int>(duration_cast<minutes>(end - d).count());  // minute of day
  const sys_days limit = d - days(kSearchDays);
  while (d > limit) {
    const year_month_day ymd(d);
    if (!months_[static_cast<unsigned>(ymd.month())]) {
      d = sys_days(ymd.year() / ymd.month() / 1) - days(1);  // last day of the month before
      to = 24 * 60 - 1;
      continue;
    }
    if (DayMatches(d)) {
      for (int h = to / 60; h >= 0; --h) {
        if (!hours_[static_cast<size_t>(h)]) continue;
        for (int m = (h == to / 60 ? to % 60 : 59); m >= 0; --m) {
          if (minutes_[static_cast<size_t>(m)]) return CronTime(d) + hours(h) + minutes(m);
        }
      }
    }
    d -= days(1);
    to = 24 * 60 - 1;
  }
  throw InvalidArgumentError("cron expression \"" + expression_ + "\" never fires");
}

std::string NormalizeScheduleTimezone(std::string_view timezone) {
  if (timezone == "UTC" || timezone == "Etc/UTC") return "UTC";
  throw InvalidArgumentError(
      "timezone \"" + std::string(timezone) +
      "\" is not supported: schedules are evaluated in UTC (write the cron expression in UTC "
      "and set timezone: UTC or leave it out)");
}

std::string FormatUtc(CronTime t) {
  const sys_days d = floor<days>(t);
  const year_month_day ymd(d);
  const hh_mm_ss<seconds> hms(t - d);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02u-%02uT%02d:%02d:%02dZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
  return text;
}

}  // namespace cairn
