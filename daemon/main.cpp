// cairn's entry point: picks the subcommand and turns every error that
// escapes it into one clear line and an exit code. No work happens here.
#include <iostream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "errors.hpp"
#include "logging.hpp"

namespace cairn::cli {

const std::vector<Subcommand>& Subcommands() {
  static const std::vector<Subcommand> kSubcommands = {
      {"run", "run the worker daemon", RunDaemon},
      {"migrate", "apply pending schema migrations (--dry-run, --status)", RunMigrate},
      {"start", "start a run of a workflow; prints the run id", RunStart},
      {"show", "show one run: checkpoint, status, open waits", RunShow},
      {"list", "list runs with filters; --stranded, --repin", RunList},
      {"history", "a run's audit events", RunHistory},
      {"signal", "deliver an event payload to a waiting run", RunSignal},
      {"cancel", "cancel a run and its waits", RunCancel},
      {"retry", "restart a failed run at its failed step", RunRetry},
      {"plugins", "list the plugins and steps the daemon would load", RunPlugins},
      {"bench", "measure steps per second against a same-run baseline", RunBench},
      {"schedules", "list recurring schedules and their next fire times", RunSchedules},
      {"cleanup", "delete finished runs older than the retention now", RunCleanup},
      {"workers", "the workers of the fleet, live and dead, and what each runs", RunWorkers},
      {"version", "print the version", RunVersion},
      {"step-host", "", RunStepHost},  // started by `cairn run` only; not listed
  };
  return kSubcommands;
}

namespace {

void PrintUsage(std::ostream& out) {
  out << "usage: cairn <command> [options]\n\ncommands:\n";
  for (const auto& command : Subcommands()) {
    if (command.summary.empty()) continue;
    out << "  " << command.name << std::string(12 - std::min<size_t>(11, command.name.size()), ' ')
        << command.summary << "\n";
  }
  out << "\nrun 'cairn <command> --help' for a command's options\n";
}

// An error for people: one line each, escaped like all human output (an
// error may quote a value read from the database or the command line).
void PrintError(const std::string& command, std::string_view message) {
  std::cerr << "cairn " << command << ": ";
  for (size_t start = 0;;) {
    const size_t end = message.find('\n', start);
    std::cerr << Printable(message.substr(start, end - start)) << "\n";
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
}

int ExitCodeFor(const Error& e) {
  switch (e.kind()) {
    case ErrorKind::kInvalidArgument:
      return kExitUsage;
    case ErrorKind::kNotFound:
      return kExitNotFound;
    case ErrorKind::kConflict:
      return kExitConflict;
    default:
      return kExitFailure;
  }
}

}  // namespace

}  // namespace cairn::cli

int main(int argc, char** argv) {
  using namespace cairn::cli;
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    PrintUsage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? kExitUsage : kExitOk;
  }
  const std::string name = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  // Log lines go to standard error, so that a subcommand's standard output
  // is its data; `cairn run` and `cairn step-host` set their own logging up.
  cairn::SetUpLogging(cairn::LogSettings{"warn"});
  for (const auto& command : Subcommands()) {
    if (command.name != name) continue;
    try {
      return command.run(args);
    } catch (const UsageError& e) {
      if (e.what()[0] == '\0') return kExitOk;  // --help was printed
      std::cerr << Printable(e.what()) << "\n";
      return kExitUsage;
    } catch (const cairn::Error& e) {
      PrintError(name, e.what());
      return ExitCodeFor(e);
    } catch (const std::exception& e) {
      PrintError(name, e.what());
      return kExitFailure;
    }
  }
  std::cerr << "cairn: unknown command \"" << Printable(name) << "\"\n\n";
  PrintUsage(std::cerr);
  return kExitUsage;
}
