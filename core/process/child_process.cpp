// Between fork and exec only async-signal-safe calls: argv, the environment
// and the files' names are built first.
#include "child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "errors.hpp"

namespace cairn::process {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

[[noreturn]] void ChildFail(const char* what) {
  const char* reason = std::strerror(errno);
  (void)!::write(2, "cairn: cannot start a child process: ", 37);
  (void)!::write(2, what, std::strlen(what));
  (void)!::write(2, ": ", 2);
  (void)!::write(2, reason, std::strlen(reason));
  (void)!::write(2, "\n", 1);
  ::_exit(127);
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

pid_t Spawn(std::vector<std::string> argv_strings, std::vector<std::string> env_strings,
            const std::string& output_path, const std::string& error_path) {
  std::vector<char*> argv = Pointers(argv_strings);
  std::vector<char*> envp = Pointers(env_strings);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    throw Error(ErrorKind::kPermanent,
                std::string("fork for ") + argv[0] + ": " + std::strerror(errno));
  }
  if (pid > 0) return pid;

  // The child: die with the parent rather than outlive it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  // O_CLOEXEC: dup2 gives the copies on 0, 1 and 2 no close-on-exec flag.
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0 || ::dup2(null_fd, 0) < 0) ChildFail("/dev/null");
  const int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
  const int out_fd = ::open(output_path.c_str(), flags, 0600);
  if (out_fd < 0) ChildFail(output_path.c_str());
  const int err_fd = error_path == output_path ? out_fd : ::open(error_path.c_str(), flags, 0600);
  if (err_fd < 0) ChildFail(error_path.c_str());
  if (::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) ChildFail("dup2");
  if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
    for (int fd = 3; fd < 65536; ++fd) ::close(fd);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(argv[0], argv.data(), envp.data());
  ChildFail(argv[0]);
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::vector<std::string>& env, std::string output_path,
                           std::string error_path)
    : output_path_(std::move(output_path)),
      error_path_(error_path.empty() ? output_path_ : std::move(error_path)) {
  if (argv.empty()) throw Error(ErrorKind::kInvalidArgument, "a child process needs an argv[0]");
  pid_ = Spawn(argv, env, output_path_, error_path_);
}

ChildProcess::~ChildProcess() { Kill(); }

bool ChildProcess::Reap(bool block) {
  if (exited_) return true;
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
    if (done == pid_) {
      exited_ = true;
      exit_code_ = DecodeStatus(status);
      return true;
    }
    if (done < 0 && errno == EINTR) continue;
    return false;
  }
}

bool ChildProcess::Running() { return !Reap(false); }

void ChildProcess::Signal(int signal_number) {
  if (!exited_) ::kill(pid_, signal_number);
}

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  // Short commands end in milliseconds: look soon, then less often.
  auto pause = std::chrono::microseconds(500);
  while (!Reap(false)) {
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
  }
  return exit_code_;
}

int ChildProcess::Kill() {
  if (!exited_) {
    ::kill(pid_, SIGKILL);
    Reap(true);
  }
  return exit_code_;
}

std::string ChildProcess::OutputTail(size_t bytes) const {
  const std::string all = ReadFile(output_path_);
  return all.size() > bytes ? "..." + all.substr(all.size() - bytes) : all;
}

std::vector<std::string> ChildEnvironment(const std::vector<std::string>& extra) {
  const auto replaced = [&](const char* entry) {
    return std::any_of(extra.begin(), extra.end(), [&](const std::string& e) {
      const size_t equals = e.find('=');
      return equals != std::string::npos && std::strncmp(entry, e.c_str(), equals + 1) == 0;
    });
  };
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "CAIRN_", 6) == 0 || std::strncmp(*e, "NOTIFY_SOCKET=", 14) == 0 ||
        replaced(*e)) {
      continue;
    }
    env.emplace_back(*e);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace cairn::process
