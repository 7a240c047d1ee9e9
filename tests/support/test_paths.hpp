// Where the tests find what the build made and what the source tree holds.
// The paths are compiled into test_paths.cpp alone: as -D flags of every
// test file they would make each file's object depend on the folder of the
// checkout, and ccache could not reuse it from a clone in another folder.
#pragma once

#include <string>

namespace cairn::test {

std::string CairnBinary();     // the built cairn binary
std::string BuiltPluginDir();  // the built plugins (and fixtures/)
std::string SourceDir();       // the source tree: sql/, config/, ops/, docs/
std::string Promtool();        // promtool (Debian package prometheus)

}  // namespace cairn::test
