// Durations; see duration.hpp.
#include "duration.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "errors.hpp"

namespace cairn {

namespace {

std::string Quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

}  // namespace

using std::chrono::milliseconds;

milliseconds ParseDuration(std::string_view text) {
  auto bad = [&](const std::string& why) -> InvalidArgumentError {
    return InvalidArgumentError("invalid duration " + Quoted(text) + ": " + why +
                                "; expected an integer with a unit (250ms, 30s, 5m, 2h, 1d, "
                                "or a sum such as 1h30m) or plain seconds");
  };
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  if (text.empty()) throw bad("empty");
  const bool plain =
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  int64_t total = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t digits_start = pos;
    int64_t value = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (__builtin_mul_overflow(value, 10, &value) ||
          __builtin_add_overflow(value, text[pos] - '0', &value)) {
        throw bad("too large");
      }
      ++pos;
    }
    if (pos == digits_start) {
      if (text[pos] == '-') throw bad("must not be negative");
      throw bad("a number must come before each unit");
    }
    const std::size_t unit_start = pos;
    while (pos < text.size() && ((text[pos] >= 'a' && text[pos] <= 'z'))) ++pos;
    const std::string_view unit = text.substr(unit_start, pos - unit_start);
    int64_t scale = 0;
    if (plain || unit == "s") {
      scale = 1000;
    } else if (unit == "ms") {
      scale = 1;
    } else if (unit == "m") {
      scale = 60'000;
    } else if (unit == "h") {
      scale = 3'600'000;
    } else if (unit == "d") {
      scale = 86'400'000;
    } else if (unit.empty()) {
      throw bad(pos < text.size() ? "unexpected " + Quoted(text.substr(pos, 1))
                                  : "missing unit after the last number");
    } else {
      throw bad("unknown unit " + Quoted(unit));
    }
    int64_t part = 0;
    if (__builtin_mul_overflow(value, scale, &part) ||
        __builtin_add_overflow(total, part, &total)) {
      throw bad("too large");
    }
  }
  return milliseconds(total);
}

std::string FormatDuration(milliseconds duration) {
  int64_t ms = duration.count();
  std::string out;
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  if (ms == 0) return "0s";
  const std::pair<int64_t, const char*> units[] = {
      {86'400'000, "d"}, {3'600'000, "h"}, {60'000, "m"}, {1000, "s"}, {1, "ms"}};
  for (const auto& [scale, name] : units) {
    if (ms >= scale) {
      out += std::to_string(ms / scale) + name;
      ms %= scale;
    }
  }
  return out;
}

}  // namespace cairn
