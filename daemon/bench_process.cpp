// See bench_process.hpp. Between fork and exec only async-signal-safe
// calls: argv, the environment and the log's path are built first.
#include "bench_process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "errors.hpp"

namespace cairn::bench {

namespace {

using Clock = std::chrono::steady_clock;

std::string ErrnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

[[noreturn]] void ChildFail(const char* what) {
  const char* reason = std::strerror(errno);
  (void)!::write(2, "cairn bench: ", 13);
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

// The value of "Key:" in a /proc file of "Key: value" lines, or "".
std::string ProcField(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      const size_t start = line.find_first_not_of(" \t", key.size() + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  }
  return "";
}

}  // namespace

namespace {

// Forks and, in the child, execs argv with env and the log as standard
// output and error; returns the child's pid (in the parent only).
pid_t Spawn(const std::vector<std::string>& argv_strings,
            const std::vector<std::string>& env_strings, const std::string& log_path) {
  std::vector<std::string> args = argv_strings;
  std::vector<std::string> env = env_strings;
  std::vector<char*> argv = Pointers(args);
  std::vector<char*> envp = Pointers(env);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(ErrorKind::kPermanent, ErrnoText("fork"));
  if (pid > 0) return pid;

  // The child: die with the benchmark rather than outlive it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  // O_CLOEXEC: dup2 gives the copies on 0, 1 and 2 no close-on-exec flag.
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0 || ::dup2(null_fd, 0) < 0) ChildFail("/dev/null");
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) ChildFail(log_path.c_str());
  if (::dup2(log_fd, 1) < 0 || ::dup2(log_fd, 2) < 0) ChildFail("dup2");
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
                           const std::vector<std::string>& env, std::string log_path)
    : pid_(Spawn(argv, env, log_path)), log_path_(std::move(log_path)) {}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exited_) {
    ::kill(pid_, SIGKILL);
    Reap(true);
  }
}

bool ChildProcess::Reap(bool block) {
  if (pid_ <= 0) return false;
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

bool ChildProcess::Running() { return pid_ > 0 && !Reap(false); }

void ChildProcess::Signal(int signal_number) {
  if (pid_ > 0 && !exited_) ::kill(pid_, signal_number);
}

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!Reap(false)) {
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return exit_code_;
}

std::string ChildProcess::LogTail(size_t bytes) const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  return all.size() > bytes ? "..." + all.substr(all.size() - bytes) : all;
}

NotifySocket::NotifySocket(std::string path) : path_(std::move(path)) {
  sockaddr_un address{};
  if (path_.size() >= sizeof(address.sun_path)) {
    throw Error(ErrorKind::kPermanent, "the notify socket's path is too long: " + path_);
  }
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw Error(ErrorKind::kPermanent, ErrnoText("socket"));
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path_.c_str(), path_.size() + 1);
  ::unlink(path_.c_str());
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    const std::string message = ErrnoText("bind " + path_);
    ::close(fd_);
    throw Error(ErrorKind::kPermanent, message);
  }
}

NotifySocket::~NotifySocket() {
  if (fd_ >= 0) ::close(fd_);
  ::unlink(path_.c_str());
}

bool NotifySocket::WaitReady(std::chrono::milliseconds timeout,
                             const std::function<bool()>& keep_waiting) {
  const auto deadline = Clock::now() + timeout;
  char buffer[4096];
  while (Clock::now() < deadline) {
    pollfd entry{fd_, POLLIN, 0};
    const int ready = ::poll(&entry, 1, 50);
    if (ready > 0) {
      const ssize_t size = ::recv(fd_, buffer, sizeof(buffer) - 1, 0);
      if (size > 0) {
        const std::string message(buffer, static_cast<size_t>(size));
        // One assignment per line: "READY=1\nSTATUS=...".
        if (("\n" + message + "\n").find("\nREADY=1\n") != std::string::npos) return true;
      }
      continue;
    }
    if (!keep_waiting()) return false;
  }
  return false;
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

std::string SelfExecutable() {
  std::error_code error;
  auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error)
    throw Error(ErrorKind::kPermanent, "cannot resolve /proc/self/exe: " + error.message());
  return path.string();
}

std::string FindExecutable(const std::string& name, const std::string& fallback_glob) {
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      if (dir.empty()) continue;
      std::string candidate = dir + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  glob_t found{};
  std::vector<std::string> matches;
  if (::glob(fallback_glob.c_str(), 0, nullptr, &found) == 0) {
    for (size_t i = 0; i < found.gl_pathc; ++i) matches.emplace_back(found.gl_pathv[i]);
  }
  ::globfree(&found);
  // Version folders: the newest sorts last by length, then text (9 < 15).
  std::sort(matches.begin(), matches.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  std::reverse(matches.begin(), matches.end());
  for (const auto& match : matches) {
    if (::access(match.c_str(), X_OK) == 0) return match;
  }
  return "";
}

int64_t ResidentBytes(pid_t pid) {
  const std::string rss = ProcField("/proc/" + std::to_string(pid) + "/status", "VmRSS");
  return rss.empty() ? 0 : std::strtoll(rss.c_str(), nullptr, 10) * 1024;  // "1234 kB"
}

int64_t ProportionalBytes(pid_t pid) {
  const std::string pss = ProcField("/proc/" + std::to_string(pid) + "/smaps_rollup", "Pss");
  return pss.empty() ? 0 : std::strtoll(pss.c_str(), nullptr, 10) * 1024;  // "1234 kB"
}

std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> children;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return children;
  while (const dirent* entry = ::readdir(proc)) {
    const char* name = entry->d_name;
    if (name[0] < '0' || name[0] > '9') continue;
    const std::string ppid = ProcField(std::string("/proc/") + name + "/status", "PPid");
    if (!ppid.empty() && std::strtol(ppid.c_str(), nullptr, 10) == pid) {
      children.push_back(static_cast<pid_t>(std::strtol(name, nullptr, 10)));
    }
  }
  ::closedir(proc);
  return children;
}

Machine DescribeMachine() {
  Machine machine;
  machine.cpu = ProcField("/proc/cpuinfo", "model name");
  // "model name\t: AMD EPYC": the key is padded with a tab before its colon.
  if (machine.cpu.empty()) {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("model name", 0) != 0) continue;
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        machine.cpu = line.substr(std::min(line.size(), colon + 2));
        break;
      }
    }
  }
  machine.cores = std::thread::hardware_concurrency();
  const std::string memory = ProcField("/proc/meminfo", "MemTotal");
  machine.memory_bytes = memory.empty() ? 0 : std::strtoll(memory.c_str(), nullptr, 10) * 1024;
  return machine;
}

double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double load = 0;
  in >> load;
  return load;
}

}  // namespace cairn::bench
