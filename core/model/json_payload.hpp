// JSON that callers hand to cairn as text (a run's input, a signal's
// payload): bounded in size and nesting before the parser sees it, so
// hostile text cannot exhaust memory or the stack. Pure functions, safe from
// any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "model.hpp"

namespace cairn {

// Payload text larger than this is refused before it reaches the database.
inline constexpr std::size_t kMaxPayloadBytes = std::size_t{1} << 20;
// Arrays and objects may nest at most this deep.
inline constexpr int kMaxPayloadDepth = 64;

// Parses text as JSON. Throws InvalidArgumentError naming `what` (say,
// "--input") when the text is larger than kMaxPayloadBytes, nests deeper
// than kMaxPayloadDepth (with the byte offset) or is not valid JSON.
Json ParseJsonPayload(const std::string& what, std::string_view text);

}  // namespace cairn
