// What `cairn bench` needs around the processes it starts (`cairn run`
// daemons and pgbench, as process::ChildProcess): the socket daemons report
// READY=1 on, with sd_notify's own protocol (NOTIFY_SOCKET), as systemd would
// see them; where executables are; and what /proc says about a process's
// memory and the machine. Used from one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cairn::bench {

// A unix datagram socket for sd_notify messages (pass path() as
// NOTIFY_SOCKET to one daemon). Removed when destroyed.
class NotifySocket {
 public:
  explicit NotifySocket(std::string path);
  ~NotifySocket();
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  const std::string& path() const { return path_; }
  // Waits for a message holding READY=1; false when the timeout passed or
  // keep_waiting returned false (the daemon died, the benchmark was
  // interrupted), asked every 50 ms.
  bool WaitReady(std::chrono::milliseconds timeout, const std::function<bool()>& keep_waiting);

 private:
  std::string path_;
  int fd_ = -1;
};

// The path of this executable (/proc/self/exe resolved).
std::string SelfExecutable();

// The first executable named `name` in $PATH, else the newest of the
// `fallback_glob` matches (e.g. /usr/lib/postgresql/*/bin/pgbench); "" when none.
std::string FindExecutable(const std::string& name, const std::string& fallback_glob);

// Resident memory of a process (VmRSS), and of its child processes (their
// VmRSS added up); 0 when gone.
int64_t ResidentBytes(pid_t pid);
// Its proportional set size: each page it shares counted as its share, so
// that processes sharing the binary's and libraries' pages (a daemon and
// its step processes) add up to the memory they take together.
int64_t ProportionalBytes(pid_t pid);
std::vector<pid_t> ChildrenOf(pid_t pid);

// The machine, for the report: the processor's model name, cores, memory,
// and the 1-minute load average now.
struct Machine {
  std::string cpu;
  unsigned cores = 0;
  int64_t memory_bytes = 0;
};
Machine DescribeMachine();
double LoadAverage();

}  // namespace cairn::bench
