// The daemon configuration (config/cairn.yaml documents every key), in
// layers, lowest first: built-in defaults, the main file, the drop-in files
// <file>.d/*.yaml in name order, the environment (every key as
// CAIRN_<PATH>, e.g. CAIRN_WORKER_CONCURRENCY), command-line flags. A later
// layer sets only the keys it names. The database URL secret is read once
// all layers are in, from whichever layer named it last. Every value
// remembers where it came from (`cairn config show`). A DaemonConfig is a
// plain value; nothing here is shared between threads.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schedule_config.hpp"
#include "yaml_input.hpp"

namespace cairn {

// Where the database URL comes from, as the last layer that named one said:
// database.url, database.url_file or database.url_credential.
struct DatabaseUrlSource {
  enum Kind { kNone, kUrl, kFile, kCredential } kind = kNone;
  std::string value;   // the URL, the file's path or the credential's name
  std::string origin;  // "database.url in <file>", "environment CAIRN_DATABASE_URL"...
  std::string layer;   // the layer's source, for errors
  int line = 0;
};

struct DatabaseConfig {
  // The connection string (URI or key=value), resolved once every layer is
  // read from url_source. A secret: never log it, log RedactDatabaseUrl(url)
  // or url_origin instead.
  std::string url;
  DatabaseUrlSource url_source;
  // Where url came from, for logs: "database.url in <file>", "file <path>",
  // "systemd credential <name>", "environment CAIRN_DATABASE_URL", or "".
  std::string url_origin;
  std::string schema = "cairn";
  // The most connections the daemon opens. 0 = what the configuration needs
  // (worker.concurrency + FixedConnections()). A lower figure runs fewer
  // slots: each running step holds a session of its own (its stack lock).
  int pool_size = 0;
  // A slot's connection left idle this long is closed, and opened again when
  // the slot gets work: an idle daemon holds only its fixed connections.
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(1)};
};

struct WorkerConfig {
  std::string id;  // "" = hostname:pid, see EffectiveWorkerId
  std::vector<std::string> queues{"default"};
  int concurrency = 8;  // executor slots, 1..1024
  std::chrono::milliseconds poll_interval{std::chrono::seconds(1)};
  std::chrono::milliseconds lease{std::chrono::seconds(30)};
  int claim_batch = 0;  // 0 = concurrency
  // Runs a slot executes together, committing their steps in one
  // transaction (batch mode); 1 executes one run at a time.
  int batch_size = 1;
  std::chrono::milliseconds shutdown_grace{std::chrono::seconds(30)};
  bool listen = true;  // LISTEN/NOTIFY wake-ups; false = poll only
};

struct PluginsConfig {
  std::vector<std::filesystem::path> directories{"/usr/lib/cairn/plugins"};
  // How steps run: "process" (each in a supervised step process, so a step
  // that crashes or hangs takes down only that process) or "thread" (on the
  // daemon's own threads); per plugin name in isolation_by_plugin, and per
  // workflow name in isolation_by_workflow. The most specific setting wins:
  // the workflow's, then the plugin's, then isolation.
  std::string isolation = "process";
  std::map<std::string, std::string> isolation_by_plugin;
  std::map<std::string, std::string> isolation_by_workflow;
  uint64_t memory_limit = 0;  // bytes of address space per step process; 0 = none
};

struct WorkflowsConfig {
  std::vector<std::filesystem::path> paths{"/etc/cairn/workflows"};
};

struct LogConfig {
  std::string level = "info";   // trace | debug | info | warn | error
  std::string format = "text";  // text | json
};

struct MetricsConfig {
  std::string listen = "127.0.0.1:9464";  // host:port serving /metrics; "" disables
  // How often the fleet's backlog is read from the database (by one daemon).
  std::chrono::milliseconds backlog_interval{std::chrono::seconds(15)};
};

struct HealthConfig {
  // host:port serving /healthz and /readyz; "" disables. When equal to
  // metrics.listen, one server serves all three.
  std::string listen = "127.0.0.1:9464";
  // A loop is late (unhealthy) once three of its intervals and this grace
  // passed without it coming round.
  std::chrono::milliseconds grace{std::chrono::seconds(10)};
};

struct MaintenanceConfig {
  std::chrono::milliseconds reaper_interval{std::chrono::seconds(5)};
  // A run whose lease expired this many times in a row without a commit (its
  // step takes workers down) fails with code "crashed".
  int crash_limit = 3;
  std::chrono::milliseconds retention{std::chrono::hours(24 * 30)};  // 0 = keep forever
};

// One queue's fleet-wide limits (`queue_limits:`); at least one is set.
struct QueueLimitConfig {
  std::optional<int> max_running;         // runs of the queue in status 'running' at once
  std::optional<double> rate_per_second;  // steps a second, every step of every run
  std::optional<int> burst;               // tokens the bucket holds; with a rate only
};

// Where a configuration value came from.
struct ConfigOrigin {
  std::string source;        // a file's path, "environment" or "command line"
  int line = 0;              // in a file; 0 when unknown
  std::string name;          // the variable or flag that set it; "" in a file
  std::string Text() const;  // "/etc/cairn/cairn.yaml:12", "environment CAIRN_SCHEMA"
};

struct DaemonConfig {
  DatabaseConfig database;
  WorkerConfig worker;
  PluginsConfig plugins;
  WorkflowsConfig workflows;
  LogConfig log;
  MetricsConfig metrics;
  HealthConfig health;
  MaintenanceConfig maintenance;
  // The `schedules:` section; declared = the key is present (even empty), so
  // the daemon makes the schedules table match it.
  std::vector<ScheduleDefinition> schedules;
  bool schedules_declared = false;
  // The `queue_limits:` section, by queue; declared = the key is present
  // (even empty), so the daemon makes the fleet's queue_limits table match
  // it at start and on SIGHUP.
  std::map<std::string, QueueLimitConfig> queue_limits;
  bool queue_limits_declared = false;
  std::string source;  // the config file, "" for defaults only
  // Where each key set by a layer came from (key path, or path of a list
  // item such as worker.queues[1]); keys absent here have their defaults.
  std::map<std::string, ConfigOrigin> origins;

  // The connections the daemon holds besides its slots: poller, lease
  // keeper, sweeper, schedule service, the idempotency session (opened when
  // a step first uses the idempotency store), and LISTEN, retention and the
  // backlog reader (metrics) when on.
  int FixedConnections() const;
  int EffectivePoolSize() const;          // pool_size, or concurrency + FixedConnections()
  int EffectiveConcurrency() const;       // slots that fit in the pool (at most concurrency)
  int EffectiveClaimBatch() const;        // claim_batch, or concurrency
  std::string EffectiveWorkerId() const;  // id, or "<hostname>:<pid>"
};

// Looks an environment variable up; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
// The process environment.
EnvLookup ProcessEnvironment();

// A command-line flag that sets a key: {"--concurrency", "worker.concurrency", "16"}.
struct ConfigFlag {
  std::string flag;
  std::string path;
  std::string value;
};

// Every layer of a daemon's configuration.
struct ConfigSources {
  std::optional<std::filesystem::path> file;  // with its drop-ins <file>.d/*.yaml
  EnvLookup env;                              // null: no environment layer
  std::vector<ConfigFlag> flags;
};

// Reads every layer, resolves the database URL, checks every rule. Throws
// ConfigError "file:line: key.path: problem" (or "environment: CAIRN_X:
// problem", "command line: --flag: problem") for malformed YAML, unknown
// keys, invalid values and unreadable secrets. Relative paths resolve
// against the folder of the file that names them (the working directory for
// the environment and flags). A configuration file or drop-in writable by
// others is refused, as is one readable by others whose database.url holds a
// password (docs/security.md).
DaemonConfig LoadDaemonConfig(const ConfigSources& sources);

// One file and its drop-ins, without the environment.
DaemonConfig LoadConfig(const std::filesystem::path& file);

// One layer from text. Relative paths resolve against base_dir, or against
// the folder of `source` when base_dir is empty.
DaemonConfig LoadConfigFromString(std::string_view text, const std::string& source,
                                  const std::filesystem::path& base_dir = {});

// Lays the environment over a loaded config (CAIRN_<PATH> for every key, and
// the older CAIRN_SCHEMA and CAIRN_CONCURRENCY). A variable set to the empty
// string counts as unset. Throws ConfigError naming the variable for an
// invalid value, and leaves config unchanged then. The one-argument form
// reads the process environment.
void ApplyEnvironment(DaemonConfig& config);
void ApplyEnvironment(DaemonConfig& config, const EnvLookup& env);

// Re-checks every rule on a config. Throws ConfigError naming where the
// offending value came from.
void ValidateConfig(const DaemonConfig& config);

// Throws ConfigError for a problem with the value at a key path (such as
// "plugins.isolation_by_workflow.order") found by a check outside the config
// room, naming where that value came from: file and line, variable or flag.
[[noreturn]] void FailConfigKey(const DaemonConfig& config, const std::string& path,
                                const std::string& problem);

// The effective configuration, one entry per key: {key, value, source,
// env, reloadable (SIGHUP applies it)}; secrets masked, "default" for a key
// no layer set.
Json ShowConfig(const DaemonConfig& config);

// The environment variable of a key path (worker.concurrency ->
// CAIRN_WORKER_CONCURRENCY).
std::string ConfigEnvironmentName(const std::string& path);

// Reads a secret file: the whole content without trailing CR/LF. Throws
// ConfigError naming `what` when missing, unreadable, empty, over 64 KiB, or
// readable or writable by others (group access is allowed: a service's
// group may share a secret).
std::string ReadSecretFile(const std::filesystem::path& file, const std::string& what);

// The URL with any password replaced by "****" (URI user:password@, the
// password= query parameter, and password=... in key=value form).
std::string RedactDatabaseUrl(std::string_view url);

// True when the URL carries a non-empty password in one of those forms.
bool DatabaseUrlHasPassword(std::string_view url);

}  // namespace cairn
