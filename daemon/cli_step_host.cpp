// `cairn step-host`: the step process of process isolation, started by the
// daemon (never by hand) with its socket on fd 3. It ignores the stop
// signals (the daemon drains first; the process ends when the daemon closes
// the socket, or dies with it), caps its own memory, and serves steps
// (core/plugins/step_host.hpp).
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "cli.hpp"
#include "logging.hpp"
#include "step_host.hpp"

namespace cairn::cli {

namespace {

constexpr int kDaemonSocket = 3;

// ASan and TSan reserve terabytes of address space at start: under them an
// address-space cap would fail every allocation, so it is not applied.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kAddressSpaceCapWorks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kAddressSpaceCapWorks = false;
#else
constexpr bool kAddressSpaceCapWorks = true;
#endif
#else
constexpr bool kAddressSpaceCapWorks = true;
#endif

void OutOfMemory() {
  constexpr char kMessage[] = "cairn step-host: out of memory (plugins.memory_limit)\n";
  (void)!::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  ::_exit(plugins::kStepHostOutOfMemory);
}

}  // namespace

po::options_description StepHostOptions() {
  po::options_description options("options");
  options.add_options()("parent-pid", po::value<long>()->value_name("PID")->required(),
                        "the daemon's pid")(
      "plugin", po::value<std::vector<std::string>>()->value_name("PATH")->default_value({}, ""),
      "a plugin file or directory (repeatable)")(
      "log-level", po::value<std::string>()->value_name("LEVEL")->default_value("info"),
      "log level")(
      "log-format", po::value<std::string>()->value_name("FORMAT")->default_value("text"),
      "text or json")("memory-limit", po::value<uint64_t>()->value_name("BYTES")->default_value(0),
                      "address space of this process; 0 = no limit");
  return options;
}

int RunStepHost(const std::vector<std::string>& args) {
  auto vm = Parse("step-host", args);

  // Die with the daemon, even if it is killed while a step runs here.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != static_cast<pid_t>(vm["parent-pid"].as<long>())) return kExitFailure;
  for (int signal_number : {SIGTERM, SIGINT, SIGHUP}) ::signal(signal_number, SIG_IGN);

  SetUpLogging(LogSettings{vm["log-level"].as<std::string>(), vm["log-format"].as<std::string>(),
                           "step-host"});
  if (const uint64_t limit = vm["memory-limit"].as<uint64_t>();
      limit > 0 && !kAddressSpaceCapWorks) {
    spdlog::warn("plugins.memory_limit is not applied in a sanitizer build");
  } else if (limit > 0) {
    const rlimit memory{limit, limit};
    if (::setrlimit(RLIMIT_AS, &memory) != 0) {
      throw std::runtime_error("step process: cannot limit its memory to " + std::to_string(limit) +
                               " bytes: " + std::strerror(errno));
    }
    std::set_new_handler(&OutOfMemory);
  }
  return plugins::ServeSteps(kDaemonSocket, vm["plugin"].as<std::vector<std::string>>());
}

}  // namespace cairn::cli
