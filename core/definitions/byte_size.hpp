// Byte sizes as cairn's YAML writes them ("512MiB", "2GiB", "64KiB", or a
// plain number of bytes): parsing with clear errors and formatting back.
// Pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cairn {

// Parses a non-negative integer with an optional unit: B, KiB, MiB, GiB,
// TiB (powers of 1024), or kB, MB, GB, TB (powers of 1000). Throws
// InvalidArgumentError naming the text and the accepted syntax.
uint64_t ParseByteSize(std::string_view text);

// The shortest exact text ParseByteSize reads back, in binary units
// (536870912 -> "512MiB", 1000 -> "1000B").
std::string FormatByteSize(uint64_t bytes);

}  // namespace cairn
