// See byte_size.hpp.
#include "byte_size.hpp"

#include <array>
#include <charconv>
#include <utility>

#include "errors.hpp"

namespace cairn {

namespace {

constexpr std::array<std::pair<std::string_view, uint64_t>, 9> kUnits = {{
    {"B", 1},
    {"KiB", uint64_t{1} << 10},
    {"MiB", uint64_t{1} << 20},
    {"GiB", uint64_t{1} << 30},
    {"TiB", uint64_t{1} << 40},
    {"kB", 1000},
    {"MB", 1000 * 1000},
    {"GB", 1000 * 1000 * 1000},
    {"TB", uint64_t{1000} * 1000 * 1000 * 1000},
}};

}  // namespace

uint64_t ParseByteSize(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("invalid size \"" + std::string(text) + "\": " + why +
                                "; expected an integer with an optional unit (B, KiB, MiB, GiB, "
                                "TiB, kB, MB, GB, TB), such as 512MiB");
  };
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) throw bad("too large");
  if (ec != std::errc() || end == text.data()) throw bad("a number must come first");
  const std::string_view unit = text.substr(static_cast<size_t>(end - text.data()));
  if (unit.empty()) return value;
  for (const auto& [name, scale] : kUnits) {
    if (unit != name) continue;
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(value, scale, &bytes)) throw bad("too large");
    return bytes;
  }
  throw bad("unknown unit \"" + std::string(unit) + "\"");
}

std::string FormatByteSize(uint64_t bytes) {
  // The binary units, TiB down to KiB (kUnits[4] .. kUnits[1]).
  for (size_t i = 4; i >= 1; --i) {
    const auto& [name, scale] = kUnits[i];
    if (bytes != 0 && bytes % scale == 0) return std::to_string(bytes / scale) + std::string(name);
  }
  return std::to_string(bytes) + "B";
}

}  // namespace cairn
