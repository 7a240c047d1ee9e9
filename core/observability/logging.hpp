// Log lines of cairn's processes. One logger writes to standard error (which
// journald and docker keep), as text for people or as one JSON object per
// line for machines. Either way a message cannot break its line: control
// characters are escaped in text, and JSON is written by a JSON library,
// whatever the message holds (quotes, backslashes, newlines, bytes that are
// not UTF-8). A line logged while a thread works on a run carries the run's
// id, workflow, step and attempt as fields of its own (ScopedRunLog).
// Identical warnings and errors repeated within a window (a database that is
// down) are written once, then counted. Safe from any thread.
#pragma once

#include <spdlog/formatter.h>
#include <spdlog/sinks/sink.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace cairn {

struct LogSettings {
  std::string level = "info";   // trace | debug | info | warn | error
  std::string format = "text";  // text | json
  std::string process;          // names a process that is not the daemon ("step-host")
  std::chrono::seconds repeat_window{30};
};

// Installs the default logger as `settings` say. Call once, early.
void SetUpLogging(const LogSettings& settings);
// Changes the level of the installed logger (SIGHUP).
void SetLogLevel(const std::string& level);

struct RunLogFields {
  std::string run_id;
  std::string workflow;
  std::string step;
  int attempt = 0;
};

// For its lifetime, lines logged by this thread carry these fields.
class ScopedRunLog {
 public:
  explicit ScopedRunLog(RunLogFields fields);
  ~ScopedRunLog();
  ScopedRunLog(const ScopedRunLog&) = delete;
  ScopedRunLog& operator=(const ScopedRunLog&) = delete;

 private:
  std::optional<RunLogFields> previous_;
};

namespace logging {

// The pieces SetUpLogging assembles, for tests.
std::unique_ptr<spdlog::formatter> MakeFormatter(const std::string& format,
                                                 const std::string& process);
spdlog::sink_ptr MakeRateLimitedSink(spdlog::sink_ptr inner, std::chrono::seconds window);
// The text of a message with control characters escaped ("\n" as \n, other
// control bytes as \xNN).
std::string EscapeControl(std::string_view text);

}  // namespace logging
}  // namespace cairn
