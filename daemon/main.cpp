// cairn's entry point: the subcommand table, picking the subcommand, and
// turning every error that escapes it into one clear line and an exit code.
// No work happens here.
#include <iostream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "errors.hpp"
#include "logging.hpp"

namespace cairn::cli {

const std::vector<Subcommand>& Subcommands() {
  static const Argument kRunId{"run", "the run's id (a UUID)"};
  static const std::vector<Subcommand> kSubcommands = {
      {"run", "run the worker daemon", {}, DaemonOptions, RunDaemon},
      {"migrate", "apply pending schema migrations, or show them", {}, MigrateOptions, RunMigrate},
      {"start",
       "start a run of a workflow; prints the run id",
       {{"workflow", "the workflow's name"}},
       StartOptions,
       RunStart},
      {"show", "show one run: checkpoint, status, open waits", {kRunId}, ShowOptions, RunShow},
      {"list", "list runs with filters; stranded runs; re-pin runs", {}, ListOptions, RunList},
      {"history", "a run's audit events, oldest first", {kRunId}, HistoryOptions, RunHistory},
      {"signal",
       "deliver an event payload to the wait with this correlation key",
       {{"key", "the wait's correlation key"}},
       SignalOptions,
       RunSignal},
      {"cancel",
       "cancel a run, its waits and its unfinished children",
       {kRunId},
       CancelOptions,
       RunCancel},
      {"retry",
       "restart a failed run at its failed step (or compensation)",
       {kRunId},
       RetryOptions,
       RunRetry},
      {"plugins",
       "list the plugins and steps the daemon would load",
       {},
       PluginsOptions,
       RunPlugins},
      {"bench",
       "measure cairn's daemons against pgbench on the same database, in a scratch schema",
       {},
       BenchOptions,
       RunBench},
      {"schedules",
       "list recurring schedules and their next fire times",
       {},
       SchedulesOptions,
       RunSchedules},
      {"cleanup",
       "delete finished runs older than the retention now, and say what",
       {},
       CleanupOptions,
       RunCleanup},
      {"workers",
       "the workers of the fleet, live and dead, and what each runs",
       {},
       WorkersOptions,
       RunWorkers},
      {"idempotency",
       "show a key of the idempotency store and its record",
       {{"action", "show"}, {"key", "the idempotency key"}},
       IdempotencyOptions,
       RunIdempotency},
      {"console",
       "serve the web console: runs, queues, workers, schedules, definitions; actions with a token",
       {},
       ConsoleOptions,
       RunConsole},
      {"config",
       "check the configuration, plugins and workflows, or show every key and its source",
       {{"action", "check or show"}},
       ConfigOptions,
       RunConfig},
      {"version", "print the version", {}, VersionOptions, RunVersion},
      {"help",
       "show the help of a command, or the manual page",
       {{"command", "the command to explain", false}},
       HelpOptions,
       RunHelp},
      {"step-host",
       "a step process of process isolation",
       {},
       StepHostOptions,
       RunStepHost,
       /*internal=*/true},
  };
  return kSubcommands;
}

const Subcommand* FindSubcommand(const std::string& name) {
  for (const auto& command : Subcommands()) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

namespace {

// Text for people on standard error, one line at a time, escaped like all
// human output (an error may quote a value read from the database or the
// command line).
void PrintLines(std::string_view prefix, std::string_view message) {
  std::cerr << prefix;
  for (size_t start = 0;;) {
    const size_t end = message.find('\n', start);
    std::cerr << Printable(message.substr(start, end - start)) << "\n";
    if (end == std::string_view::npos || end + 1 == message.size()) break;
    start = end + 1;
  }
}

void PrintError(const std::string& command, std::string_view message) {
  PrintLines("cairn " + command + ": ", message);
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
  if (argc < 2) {
    PrintUsage(std::cerr);
    return kExitUsage;
  }
  std::string name = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  // Log lines go to standard error, so that a subcommand's standard output
  // is its data; `cairn run` and `cairn step-host` set their own logging up.
  cairn::SetUpLogging(cairn::LogSettings{"warn"});
  if (name == "--help" || name == "-h") name = "help";
  if (name == "--version") name = "version";
  const Subcommand* command = FindSubcommand(name);
  if (command == nullptr) {
    std::cerr << "cairn: unknown command \"" << Printable(name) << "\"\n\n";
    PrintUsage(std::cerr);
    return kExitUsage;
  }
  try {
    return command->run(args);
  } catch (const UsageError& e) {
    if (e.what()[0] == '\0') return kExitOk;  // --help was printed
    PrintLines("", e.what());
    return kExitUsage;
  } catch (const cairn::Error& e) {
    PrintError(name, e.what());
    return ExitCodeFor(e);
  } catch (const std::exception& e) {
    PrintError(name, e.what());
    return kExitFailure;
  }
}
