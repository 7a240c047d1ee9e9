// End-to-end helpers: a real `cairn run` daemon as a child process, configured
// by a YAML file written into its own temporary folder, with its output in a
// log file; and a runner for one-shot CLI commands (`cairn start`, `show`...).
// Children are process::ChildProcess: started with an empty signal mask
// (test_main blocks SIGTERM and friends in every thread), they die with the
// test process (PDEATHSIG).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "temp_dir.hpp"
#include "test_paths.hpp"

namespace cairn::test {

// The build's paths, as cairn_add_test passes them to test binaries. Defined
// only where the compile definitions exist (test sources, not the support
// library), so every definition that exists is the same.

// A scratch folder that others may traverse (mode 0755), so that plugins
// may be loaded from below it.
class TempDir : public process::TempDir {
 public:
  explicit TempDir(const std::string& prefix = "cairn-e2e")
      : process::TempDir(
            prefix, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                        std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                        std::filesystem::perms::others_exec) {}
};

// Everything the daemon's YAML config says. Durations are cairn duration
// strings ("100ms", "2s").
struct DaemonOptions {
  std::string binary;  // the cairn executable; required
  std::string url;
  std::string schema;
  std::string worker_id;  // "" = a fresh "e2e-<pid>-<n>"
  std::vector<std::string> queues{"default"};
  std::vector<std::string> plugin_directories;
  std::vector<std::string> workflow_paths;
  int concurrency = 4;
  std::string poll_interval = "100ms";
  std::string lease = "5s";
  std::string shutdown_grace = "10s";
  std::string reaper_interval = "500ms";
  bool listen = true;
  std::string log_level = "info";
  std::string log_format = "text";
  std::string isolation = "process";  // plugins.isolation
  // plugins.isolation_by_workflow as a YAML flow mapping; "" leaves it unset.
  std::string isolation_by_workflow;
  std::string memory_limit = "0";  // plugins.memory_limit
  int crash_limit = 3;             // maintenance.crash_limit
  // HTTP addresses ("127.0.0.1:<port>"); "" disables (the default, so that
  // daemons of parallel tests never compete for a port).
  std::string metrics_listen;
  std::string backlog_interval = "15s";
  std::string health_listen;
  std::string health_grace = "10s";
  // Extra environment variables of the daemon, "NAME=value".
  std::vector<std::string> environment;
  // Another long-running cairn command instead of `run --config <file>`:
  // its arguments after the binary (say {"console", "--listen", ...}).
  std::vector<std::string> command;
};

// A daemon of the built binary and plugins, on the test's schema, serving the
// test workflow file tests/workflows/<workflow_file>.
inline DaemonOptions BuiltDaemonOptions(const std::string& url, const std::string& schema,
                                        const std::string& workflow_file, int concurrency) {
  DaemonOptions o;
  o.binary = CairnBinary();
  o.url = url;
  o.schema = schema;
  o.plugin_directories = {BuiltPluginDir()};
  o.workflow_paths = {SourceDir() + "/tests/workflows/" + workflow_file};
  o.concurrency = concurrency;
  return o;
}

// The YAML text of a daemon config for these options.
std::string DaemonConfigYaml(const DaemonOptions& options);

// One `cairn run --config <dir>/cairn.yaml` process. The destructor kills it
// (SIGKILL) if it still runs, and prints its log when the current test failed
// (or always, when CAIRN_E2E_DUMP_LOGS is set).
class DaemonProcess {
 public:
  explicit DaemonProcess(DaemonOptions options);
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // Spawns the daemon. Throws std::runtime_error when fork fails.
  void Start();
  // Start() then WaitReady(); false (the log says why) when the daemon exited
  // or did not report ready within the timeout.
  bool StartAndWaitReady(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Waits until the log says "worker <id> started"; false when the process
  // exited first or the timeout passed.
  bool WaitReady(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Waits until the log contains `text`; false when the process exited
  // without writing it or the timeout passed.
  bool WaitForLog(const std::string& text, std::chrono::milliseconds timeout);

  void Signal(int signal_number);
  void Terminate() { Signal(SIGTERM); }
  void Kill() { Signal(SIGKILL); }
  // Waits for the process to end. Returns its exit code (0..255), or
  // 128 + signal when a signal ended it; nullopt on timeout (it keeps running).
  std::optional<int> WaitExit(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  bool Running();

  pid_t pid() const { return child_ ? child_->pid() : 0; }
  const std::string& worker_id() const { return options_.worker_id; }
  const std::string& config_path() const { return config_path_; }
  const std::string& log_path() const { return log_path_; }
  const DaemonOptions& options() const { return options_; }
  // The whole log so far.
  std::string Log() const;
  // The "<N> claimed" figure of the "worker <id> stopped: ..." line, or -1.
  long ClaimedAtStop() const;

 private:
  DaemonOptions options_;
  TempDir dir_;
  std::string config_path_;
  std::string log_path_;
  std::optional<process::ChildProcess> child_;
};

struct CommandResult {
  int exit_code = -1;  // 0..255, 128 + signal, or -1 when it timed out
  std::string out;
  std::string err;
};

// Runs binary with args to completion (killed after the timeout) and
// captures its standard output and error. Throws when it cannot be started.
CommandResult RunCommand(const std::string& binary, const std::vector<std::string>& args,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Polls condition every `every` until it returns true or the timeout passes;
// returns its last value.
template <typename Condition>
bool PollUntil(Condition condition, std::chrono::milliseconds timeout,
               std::chrono::milliseconds every = std::chrono::milliseconds(50)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return condition();
    std::this_thread::sleep_for(every);
  }
}

}  // namespace cairn::test
