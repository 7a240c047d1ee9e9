// Shared pieces of the cairn command line: exit codes, the connection options
// every database subcommand accepts, the subcommand table (name, arguments,
// options, function) that parsing, --help and the manual page all read.
#pragma once

#include <boost/program_options.hpp>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "config.hpp"
#include "definition.hpp"
#include "plugin_catalog.hpp"
#include "store.hpp"

namespace cairn::cli {

// Exit codes, documented in the README; scripts rely on them.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,      // runtime failure (database unreachable, step error, ...)
  kExitUsage = 2,        // bad arguments or invalid input; nothing was changed
  kExitNotFound = 3,     // unknown run, wait or workflow
  kExitConflict = 4,     // lost a race or the object is in the wrong state
  kExitAlreadyDone = 5,  // nothing to do: already delivered / finished
  kExitExpired = 6,      // the wait expired
};

namespace po = boost::program_options;

// --config, --database-url and --schema: the options of every subcommand that
// connects to the database, and the connection they name (flags, then the
// environment, then the --config file).
po::options_description ConnectionOptions();
store::ConnectionOptions DatabaseOptions(const po::variables_map& vm,
                                         const std::string& application_name);

// A positional argument of a subcommand: its key in the variables_map, shown
// upper-cased in usage lines (e.g. "run" -> RUN).
struct Argument {
  std::string name;
  std::string help;
  bool required = true;
};

// One subcommand: its name, a one-line summary, its positional arguments and
// its options (everything its --help, the usage lines and the manual page
// show), and the function that runs it.
struct Subcommand {
  std::string name;
  std::string summary;
  std::vector<Argument> arguments;
  std::function<po::options_description()> options;
  std::function<int(const std::vector<std::string>& args)> run;
  // Started by cairn itself, not by people: left out of usage and the manual.
  bool internal = false;
};

// Every subcommand, in the order help lists them.
const std::vector<Subcommand>& Subcommands();
const Subcommand* FindSubcommand(const std::string& name);

// An argument as usage lines show it: "RUN", or "[COMMAND]" when optional.
std::string ArgumentName(const Argument& argument);
// "usage: cairn show RUN [options]": a subcommand's usage line.
std::string UsageLine(const Subcommand& command);
// `cairn --help`: the commands and their usage lines.
void PrintUsage(std::ostream& out);
// `cairn <command> --help`: usage line, summary, arguments and options.
void PrintCommandHelp(const Subcommand& command, std::ostream& out);
// `cairn help --man`: the manual page cairn(1) in roff (man(7)), made from the
// subcommand table. Dated by $SOURCE_DATE_EPOCH when set, else today (UTC).
void PrintManual(std::ostream& out);

// Text for a terminal: control characters (C0, DEL, C1), invalid UTF-8 and
// the bidirectional-override characters come out as \xHH or \uHHHH
// escapes, so no value read from the database (a run key, an error) can move
// the cursor, rewrite the screen or hide text. Every line for people goes
// through it; --json output stays JSON.
std::string Printable(std::string_view text);

// Prints rows under a header as aligned columns, for people (--json is for
// scripts); every cell goes through Printable.
void PrintTable(const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows);

// Parses args against the subcommand's options and positional arguments
// from the table; prints the subcommand's help and throws an empty UsageError
// on --help, throws UsageError naming the problem on a parse failure.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
po::variables_map Parse(const std::string& command, const std::vector<std::string>& args);

// The daemon config the flags produce over the environment and the --config
// file (flags a subcommand does not have are simply absent from vm).
DaemonConfig LoadDaemonConfig(const po::variables_map& vm);
// The workflow files of workflows.paths. Throws ConfigError, naming the key
// and where it was set, when plugins.isolation_by_workflow names a workflow
// they do not define.
DefinitionSet ReadWorkflows(const DaemonConfig& config);
// The configured plugins, each step run as plugins.isolation,
// isolation_by_plugin and isolation_by_workflow say for the workflows of
// `definitions` (whose plugins on threads are loaded in the daemon).
std::unique_ptr<PluginCatalog> LoadPlugins(const DaemonConfig& config,
                                           const DefinitionSet& definitions);
// Checks that every workflow can run each of its plugin steps as configured;
// throws ConfigError naming the file, workflow and step otherwise.
void CheckWorkflowSteps(const DefinitionSet& definitions, const PluginCatalog& plugins);
// What `cairn run` starts with and `cairn config check` checks: the
// workflows, then the plugins they need, then every step checked.
struct PluginsAndWorkflows {
  DefinitionSet definitions;
  std::unique_ptr<PluginCatalog> plugins;
};
PluginsAndWorkflows LoadPluginsAndWorkflows(const DaemonConfig& config);
store::ConnectionOptions ConnectionFor(const DaemonConfig& config, const std::string& name);

// The options of each subcommand (see Subcommand::options).
po::options_description MigrateOptions();
po::options_description VersionOptions();
po::options_description DaemonOptions();
po::options_description StartOptions();
po::options_description ShowOptions();
po::options_description ListOptions();
po::options_description HistoryOptions();
po::options_description CancelOptions();
po::options_description PluginsOptions();
po::options_description BenchOptions();
po::options_description SchedulesOptions();
po::options_description SignalOptions();
po::options_description RetryOptions();
po::options_description HelpOptions();
po::options_description StepHostOptions();
po::options_description CleanupOptions();
po::options_description WorkersOptions();
po::options_description ConfigOptions();
po::options_description IdempotencyOptions();
po::options_description ConsoleOptions();

int RunMigrate(const std::vector<std::string>& args);
int RunVersion(const std::vector<std::string>& args);
int RunDaemon(const std::vector<std::string>& args);
int RunStart(const std::vector<std::string>& args);
int RunShow(const std::vector<std::string>& args);
int RunList(const std::vector<std::string>& args);
int RunHistory(const std::vector<std::string>& args);
int RunCancel(const std::vector<std::string>& args);
int RunPlugins(const std::vector<std::string>& args);
int RunBench(const std::vector<std::string>& args);
int RunSchedules(const std::vector<std::string>& args);
int RunSignal(const std::vector<std::string>& args);
int RunRetry(const std::vector<std::string>& args);
int RunHelp(const std::vector<std::string>& args);
int RunStepHost(const std::vector<std::string>& args);
int RunCleanup(const std::vector<std::string>& args);
int RunWorkers(const std::vector<std::string>& args);
int RunConfig(const std::vector<std::string>& args);
int RunIdempotency(const std::vector<std::string>& args);
int RunConsole(const std::vector<std::string>& args);

}  // namespace cairn::cli
