// The step process of process isolation: a child of the daemon (`cairn
// step-host`) that loads the plugins and runs the steps the daemon sends it,
// one at a time, on its main thread, over the protocol of step_protocol.hpp.
// A step that crashes, runs out of memory or hangs takes only this process
// down; the daemon notices, fails the attempt and starts another one. A
// transactional step's SQL travels back to the daemon, which runs it in the
// checkpoint's transaction.
#pragma once

#include <string>
#include <vector>

namespace cairn::plugins {

// The exit code of a step process whose memory ran out (plugins.memory_limit).
inline constexpr int kStepHostOutOfMemory = 86;

// Loads the plugins at `plugin_paths`, says "ready" (or why not) on fd, and
// serves step calls until the daemon closes its end. Returns the exit code.
int ServeSteps(int fd, const std::vector<std::string>& plugin_paths);

}  // namespace cairn::plugins
