// A child process with its standard output and error in files and
// /dev/null as its input, which dies with the process that started it
// (PR_SET_PDEATHSIG) and is killed and reaped when the object goes. Used
// from one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace cairn::process {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with argv and env ("NAME=value", the whole
  // environment), an empty signal mask and no descriptor but 0, 1 and 2.
  // Output and error are appended to their files; error_path "" means the
  // output's file. Throws when fork fails; a child that cannot exec writes
  // why to its error file and exits with 127.
  ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
               std::string output_path, std::string error_path = "");
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool Running();
  // Sends the signal unless the child was already reaped.
  void Signal(int signal_number);
  // The exit code (0..255, or 128 + the signal that ended it), or nullopt
  // when it still runs after the timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // SIGKILL unless it has ended, then its exit code.
  int Kill();

  const std::string& output_path() const { return output_path_; }
  const std::string& error_path() const { return error_path_; }
  // The end of the output file, for an error message.
  std::string OutputTail(size_t bytes = 2000) const;

 private:
  bool Reap(bool block);

  std::string output_path_;
  std::string error_path_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_code_ = 0;
};

// This process's environment for a child cairn: without the variables that
// would override what the child's config file says (CAIRN_*) or where it
// reports readiness (NOTIFY_SOCKET), plus `extra` ("NAME=value", replacing
// inherited NAMEs).
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& extra = {});

// The whole text of a file; "" when it cannot be read.
std::string ReadFile(const std::string& path);

}  // namespace cairn::process
