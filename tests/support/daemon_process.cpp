// See daemon_process.hpp. Between fork and exec only async-signal-safe calls:
// everything the child needs (argv, environment, file names) is built first.
#include "daemon_process.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "pg_harness.hpp"

extern char** environ;

namespace cairn::test {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string ErrnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

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

// The child's environment: ours without CAIRN_* variables, which would
// override the config file.
std::vector<std::string> ChildEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "CAIRN_", 6) == 0) continue;
    env.emplace_back(*e);
  }
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

[[noreturn]] void ChildFail(const char* what) {
  const char* reason = std::strerror(errno);
  (void)!::write(2, "cairn e2e helper: ", 18);
  (void)!::write(2, what, std::strlen(what));
  (void)!::write(2, ": ", 2);
  (void)!::write(2, reason, std::strlen(reason));
  (void)!::write(2, "\n", 1);
  ::_exit(127);
}

// Forks and execs argv[0] with stdout to out_path and stderr to err_path
// (the same file when equal; appended), stdin from /dev/null.
pid_t Spawn(std::vector<std::string> argv_strings, const std::string& out_path,
            const std::string& err_path, const std::vector<std::string>& extra_env = {}) {
  std::vector<std::string> env_strings = ChildEnvironment();
  env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> argv = Pointers(argv_strings);
  std::vector<char*> envp = Pointers(env_strings);
  const pid_t parent = ::getpid();
  const bool same = out_path == err_path;
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(ErrnoText("fork"));
  if (pid > 0) return pid;

  // The child: die with the test process rather than outlive it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd < 0 || ::dup2(null_fd, 0) < 0) ChildFail("/dev/null");
  int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (out_fd < 0) ChildFail(out_path.c_str());
  int err_fd = same ? out_fd : ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (err_fd < 0) ChildFail(err_path.c_str());
  if (::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) ChildFail("dup2");
  if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
    for (int fd = 3; fd < 65536; ++fd) ::close(fd);
  }
  RestoreChildSignalMask();
  ::execve(argv[0], argv.data(), envp.data());
  ChildFail(argv[0]);
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::atomic<unsigned> worker_counter{0};

}  // namespace

TempDir::TempDir(const std::string& prefix) {
  std::string base = "/tmp";
  if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') base = tmp;
  std::string pattern = base + "/" + prefix + "-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr)
    throw std::runtime_error(ErrnoText("mkdtemp " + pattern));
  path_ = buffer.data();
  ::chmod(path_.c_str(), 0755);
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

std::string TempDir::Write(const std::string& name, const std::string& text) const {
  std::string file = path_ + "/" + name;
  std::ofstream out(file, std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + file);
  return file;
}

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
  config_path_ = dir_.Write("cairn.yaml", DaemonConfigYaml(options_));
  // The URL may carry the test server's password, which cairn refuses in a
  // file others may read.
  ::chmod(config_path_.c_str(), 0600);
  log_path_ = dir_.path() + "/daemon.log";
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0 && !exited_) {
    ::kill(pid_, SIGKILL);
    Reap(true);
  }
  const char* dump = std::getenv("CAIRN_E2E_DUMP_LOGS");
  if (pid_ > 0 && (::testing::Test::HasFailure() || (dump != nullptr && *dump != '\0'))) {
    std::fprintf(stderr, "---- log of cairn daemon %s (%s) ----\n%s---- end of log ----\n",
                 options_.worker_id.c_str(), log_path_.c_str(), Log().c_str());
  }
}

void DaemonProcess::Start() {
  if (pid_ > 0) throw std::logic_error("DaemonProcess::Start: already started");
  std::vector<std::string> argv{options_.binary, "run", "--config", config_path_};
  if (!options_.command.empty()) {
    argv = {options_.binary};
    argv.insert(argv.end(), options_.command.begin(), options_.command.end());
  }
  pid_ = Spawn(argv, log_path_, log_path_, options_.environment);
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
        return pid_ <= 0 || Reap(false) || Log().find(text) != std::string::npos;
      },
      timeout, std::chrono::milliseconds(20));
  return Log().find(text) != std::string::npos;
}

void DaemonProcess::Signal(int signal_number) {
  if (pid_ <= 0 || exited_) return;
  ::kill(pid_, signal_number);
}

bool DaemonProcess::Reap(bool block) {
  if (pid_ <= 0) return false;
  if (exited_) return true;
  int status = 0;
  while (true) {
    pid_t done = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
    if (done == pid_) {
      exited_ = true;
      exit_status_ = DecodeStatus(status);
      return true;
    }
    if (done < 0 && errno == EINTR) continue;
    return false;
  }
}

std::optional<int> DaemonProcess::WaitExit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return std::nullopt;
  if (!PollUntil([&] { return Reap(false); }, timeout, std::chrono::milliseconds(20))) {
    return std::nullopt;
  }
  return exit_status_;
}

bool DaemonProcess::Running() { return pid_ > 0 && !Reap(false); }

std::string DaemonProcess::Log() const { return ReadWholeFile(log_path_); }

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
  const std::string out_path = dir.path() + "/stdout";
  const std::string err_path = dir.path() + "/stderr";
  std::vector<std::string> argv{binary};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = Spawn(argv, out_path, err_path);
  CommandResult result;
  int status = 0;
  bool done = PollUntil(
      [&] {
        pid_t r = ::waitpid(pid, &status, WNOHANG);
        return r == pid || (r < 0 && errno != EINTR);
      },
      timeout, std::chrono::milliseconds(5));
  if (!done) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    result.exit_code = -1;
  } else {
    result.exit_code = DecodeStatus(status);
  }
  result.out = ReadWholeFile(out_path);
  result.err = ReadWholeFile(err_path);
  return result;
}

}  // namespace cairn::test
