// The daemon's stop stack: each component `cairn run` starts pushes its stop
// right after it started, and shutdown runs the stops in reverse (last
// started, first stopped), the way Redpanda's deferred stops and userver's
// component system do, so no stop sequence is written by hand. Filled by the
// main thread; unwound by one thread at a time. The stops refer to
// components declared after the stack, so destroying it runs nothing: when
// start-up throws, the components' own destructors stop them.
#pragma once

#include <spdlog/spdlog.h>

#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace cairn::cli {

class StopStack {
 public:
  StopStack() = default;
  StopStack(const StopStack&) = delete;
  StopStack& operator=(const StopStack&) = delete;

  void Push(std::string name, std::function<void()> stop) {
    stops_.emplace_back(std::move(name), std::move(stop));
  }

  // Runs every stop, newest first, once. A stop that throws is logged and
  // the others still run.
  void Unwind() {
    while (!stops_.empty()) {
      auto [name, stop] = std::move(stops_.back());
      stops_.pop_back();
      try {
        spdlog::debug("stopping {}", name);
        stop();
      } catch (const std::exception& e) {
        spdlog::error("stopping {}: {}", name, e.what());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::function<void()>>> stops_;
};

}  // namespace cairn::cli
