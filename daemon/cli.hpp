// Shared pieces of the cairn command line: exit codes, the database options
// every database subcommand accepts, and the subcommand table.
#pragma once

#include <boost/program_options.hpp>
#include <functional>
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

// --database-url, --schema and --config for every subcommand that connects;
// the connection they name (flags, then environment, then the file).
void AddDatabaseOptions(po::options_description& options);
store::ConnectionOptions DatabaseOptions(const po::variables_map& vm,
                                         const std::string& application_name);

struct Subcommand {
  std::string name;
  std::string summary;
  std::function<int(const std::vector<std::string>& args)> run;
};

const std::vector<Subcommand>& Subcommands();

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

// Parses args against options (positional names in order); prints usage and
// throws UsageError on --help or a parse failure.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
po::variables_map Parse(const std::string& command, const std::vector<std::string>& args,
                        const po::options_description& options,
                        const po::positional_options_description& positional = {});

// The daemon's own flags (--concurrency, --worker-id, --log-level), and the
// daemon config all flags produce over the environment and the --config file.
void AddDaemonConfigOptions(po::options_description& options);
DaemonConfig LoadDaemonConfig(const po::variables_map& vm);
// The configured plugins, each run as plugins.isolation says.
std::unique_ptr<PluginCatalog> LoadPlugins(const DaemonConfig& config);
// The configured workflows, checked against the loaded plugin steps.
DefinitionSet LoadWorkflows(const DaemonConfig& config, const StepCatalog& plugins);
store::ConnectionOptions ConnectionFor(const DaemonConfig& config, const std::string& name);

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
int RunStepHost(const std::vector<std::string>& args);
int RunCleanup(const std::vector<std::string>& args);
int RunWorkers(const std::vector<std::string>& args);

}  // namespace cairn::cli
