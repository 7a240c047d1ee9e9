// See bench_process.hpp.
#include "bench_process.hpp"

#include <dirent.h>
#include <glob.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "errors.hpp"

namespace cairn::bench {

namespace {

using Clock = std::chrono::steady_clock;

std::string ErrnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

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
