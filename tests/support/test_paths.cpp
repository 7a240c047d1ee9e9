// See test_paths.hpp. tests/CMakeLists.txt defines the macros on this file.
#include "test_paths.hpp"

namespace cairn::test {

std::string CairnBinary() { return CAIRN_BINARY; }
std::string BuiltPluginDir() { return CAIRN_PLUGIN_DIR; }
std::string SourceDir() { return CAIRN_SOURCE_DIR; }
std::string Promtool() { return CAIRN_PROMTOOL; }

}  // namespace cairn::test
