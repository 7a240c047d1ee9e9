// libFuzzer target: workflow-definition YAML (LoadDefinitionsFromString),
// then what the daemon does with a loaded definition (the set, the hash).
// A ConfigError is the documented answer to bad input; anything else that
// escapes, or any sanitizer report, is a defect.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "definition.hpp"
#include "yaml_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    cairn::DefinitionSet set(cairn::LoadDefinitionsFromString(text, "fuzz.yaml"));
  } catch (const cairn::ConfigError&) {
    // Refused with file, line and reason: the right answer.
  }
  return 0;
}
