// The bounded JSON payload parser (json_payload.hpp).
#include "json_payload.hpp"

#include "errors.hpp"

namespace cairn {

Json ParseJsonPayload(const std::string& what, std::string_view text) {
  if (text.size() > kMaxPayloadBytes) {
    throw InvalidArgumentError(what + " is more than " + std::to_string(kMaxPayloadBytes) +
                               " bytes, the limit");
  }
  // Check nesting with a flat scan first, so no deeply nested value is ever
  // built (destroying and printing one recurses).
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxPayloadDepth) {
        throw InvalidArgumentError(what + " nests deeper than " + std::to_string(kMaxPayloadDepth) +
                                   " levels (at byte " + std::to_string(i) + ")");
      }
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    // A parse error, or a number too large for a double (out_of_range).
    throw InvalidArgumentError(what + " is not valid JSON: " + e.what());
  }
}

}  // namespace cairn
