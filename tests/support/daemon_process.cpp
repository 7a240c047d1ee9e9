// See daemon_process.hpp.
#include "daemon_process.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace cairn::test {

namespace {

// A YAML double-quoted scalar.
std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string FlowList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + Quote(items[i]);
  return out + "]";
}

std::atomic<unsigned> worker_counter{0};

}  // namespace

std::string DaemonConfigYaml(const DaemonOptions& o) {
  std::ostringstream y;
  y << "database:\n"
    << "  url: " << Quote(o.url) << "\n"
    << "  schema: " << Quote(o.schema) << "\n"
    << "worker:\n"
    << "  id: " << Quote(o.worker_id) << "\n"
    << "  queues: " << FlowList(o.queues) << "\n"
    << "  concurrency: " << o.concurrency << "\n"
    << "  poll_interval: " << o.poll_interval << "\n"
    << "  lease: " << o.lease << "\n"
    << "  shutdown_grace: " << o.shutdown_grace << "\n"
    << "  listen: " << (o.listen ? "true" : "false") << "\n"
    << "plugins:\n"
    << "  directories: " << FlowList(o.plugin_directories) << "\n"
    << "  isolation: " << o.isolation << "\n"
    << (o.isolation_by_workflow.empty()
            ? ""
            : "  isolation_by_workflow: " + o.isolation_by_workflow + "\n")
    << "  memory_limit: " << o.memory_limit << "\n"
    << "workflows:\n"
    << "  paths: " << FlowList(o.workflow_paths) << "\n"
    << "log:\n"
    << "  level: " << o.log_level << "\n"
    << "  format: " << o.log_format << "\n"
    << "metrics:\n"
    << "  listen: " << Quote(o.metrics_listen) << "\n"
    << "  backlog_interval: " << o.backlog_interval << "\n"
    << "health:\n"
    << "  listen: " << Quote(o.health_listen) << "\n"
    << "  grace: " << o.health_grace << "\n"
    << "maintenance:\n"
    << "  reaper_interval: " << o.reaper_interval << "\n"
    << "  crash_limit: " << o.crash_limit << "\n";
  return y.str();
}

DaemonProcess::DaemonProcess(DaemonOptions options)
    : options_(std::move(options)), dir_("cairn-daemon") {
  if (options_.binary.empty()) throw std::invalid_argument("DaemonOptions.binary is required");
  if (options_.worker_id.empty()) {
    options_.worker_id =
        "e2e-" + std::to_string(::getpid()) + "-" + std::to_string(++worker_counter);
  }
  // The URL may carry the test server's password, which cairn refuses in a
  // file others may read.
  config_path_ = dir_.WritePrivate("cairn.yaml", DaemonConfigYaml(options_));
  log_path_ = dir_.path() / "daemon.log";
}

DaemonProcess::~DaemonProcess() {
  if (!child_) return;
  child_->Kill();
  const char* dump = std::getenv("CAIRN_E2E_DUMP_LOGS");
  if (::testing::Test::HasFailure() || (dump != nullptr && *dump != '\0')) {
    std::fprintf(stderr, "---- log of cairn daemon %s (%s) ----\n%s---- end of log ----\n",
                 options_.worker_id.c_str(), log_path_.c_str(), Log().c_str());
  }
}

void DaemonProcess::Start() {
  if (child_) throw std::logic_error("DaemonProcess::Start: already started");
  std::vector<std::string> argv{options_.binary, "run", "--config", config_path_};
  if (!options_.command.empty()) {
    argv = {options_.binary};
    argv.insert(argv.end(), options_.command.begin(), options_.command.end());
  }
  child_.emplace(argv, process::ChildEnvironment(options_.environment), log_path_);
}

bool DaemonProcess::StartAndWaitReady(std::chrono::milliseconds timeout) {
  Start();
  return WaitReady(timeout);
}

bool DaemonProcess::WaitReady(std::chrono::milliseconds timeout) {
  return WaitForLog("worker " + options_.worker_id + " started", timeout);
}

bool DaemonProcess::WaitForLog(const std::string& text, std::chrono::milliseconds timeout) {
  PollUntil(
      [&] {
        // Exited: what it wrote is all there will be.
        return !Running() || Log().find(text) != std::string::npos;
      },
      timeout, std::chrono::milliseconds(20));
  return Log().find(text) != std::string::npos;
}

void DaemonProcess::Signal(int signal_number) {
  if (child_) child_->Signal(signal_number);
}

std::optional<int> DaemonProcess::WaitExit(std::chrono::milliseconds timeout) {
  if (!child_) return std::nullopt;
  return child_->Wait(timeout);
}

bool DaemonProcess::Running() { return child_ && child_->Running(); }

std::string DaemonProcess::Log() const { return process::ReadFile(log_path_); }

long DaemonProcess::ClaimedAtStop() const {
  const std::string log = Log();
  const std::string marker = "worker " + options_.worker_id + " stopped: ";
  auto at = log.find(marker);
  if (at == std::string::npos) return -1;
  return std::strtol(log.c_str() + at + marker.size(), nullptr, 10);
}

CommandResult RunCommand(const std::string& binary, const std::vector<std::string>& args,
                         std::chrono::milliseconds timeout) {
  TempDir dir("cairn-cmd");
  std::vector<std::string> argv{binary};
  argv.insert(argv.end(), args.begin(), args.end());
  process::ChildProcess command(argv, process::ChildEnvironment(), dir.path() / "stdout",
                                dir.path() / "stderr");
  CommandResult result;
  const std::optional<int> code = command.Wait(timeout);
  if (!code) command.Kill();
  result.exit_code = code.value_or(-1);
  result.out = process::ReadFile(command.output_path());
  result.err = process::ReadFile(command.error_path());
  return result;
}

}  // namespace cairn::test
