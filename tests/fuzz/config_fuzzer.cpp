// libFuzzer target: the daemon configuration file (LoadConfigFromString),
// schedules and inline settings included. Relative paths resolve against a
// folder that does not exist, so nothing outside the input is read but what
// an absolute path in the input names. A ConfigError (or the
// InvalidArgumentError it derives from) is the documented answer to bad
// input; anything else that escapes, or any sanitizer report, is a defect.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "config.hpp"
#include "errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    cairn::LoadConfigFromString(text, "fuzz.yaml", "/nonexistent/cairn-fuzz");
  } catch (const cairn::InvalidArgumentError&) {
    // Refused with file, line and reason: the right answer.
  }
  return 0;
}
