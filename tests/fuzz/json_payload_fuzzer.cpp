// libFuzzer target: the JSON a caller gives `cairn start --input` and
// `cairn signal --payload` (ParseJsonPayload), then printing what it
// parsed, as the CLI and the store do. InvalidArgumentError is the
// documented answer to bad input; anything else, or any sanitizer report,
// is a defect.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "errors.hpp"
#include "json_payload.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const cairn::Json value = cairn::ParseJsonPayload("--input", text);
    (void)value.dump();  // strict, as the store prints it
  } catch (const cairn::InvalidArgumentError&) {
    // Refused with the reason: the right answer.
  }
  return 0;
}
