// Durations as cairn's YAML and CLI write them ("250ms", "30s", "1h30m"):
// parsing with clear errors and formatting back to the shortest exact text.
// Pure functions, safe from any thread.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace cairn {

// Parses "250ms", "30s", "5m", "2h", "1d", a sum of those ("1h30m"), or a
// plain non-negative integer meaning seconds. Throws InvalidArgumentError
// with the accepted syntax otherwise (negative, fractional, overflow, junk).
std::chrono::milliseconds ParseDuration(std::string_view text);

// Shortest exact text ParseDuration accepts back ("90s" -> "1m30s", 0 -> "0s").
std::string FormatDuration(std::chrono::milliseconds duration);

}  // namespace cairn
