// Private to the config room: the table of every daemon configuration key.
// A key is one entry here — its path, how a value is read into DaemonConfig
// and how it is shown — and the file, the drop-ins, the environment
// (CAIRN_<PATH>, see EnvironmentName) and `cairn config show` all go through
// it. The rules that relate keys to each other live in CheckConfig
// (config.cpp). Immutable after first use; safe from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "config.hpp"

namespace cairn::config {

inline constexpr int kMaxConcurrency = 1024;
inline constexpr int kMaxPoolSize = 10000;
inline constexpr int kMaxClaimBatch = 10000;
inline constexpr int kMaxBatchSize = 1000;
inline constexpr int kMaxCrashLimit = 100;
inline constexpr int kMaxQueueLimit = 1000000;  // max_running, burst and rate_per_second
inline constexpr uint64_t kMinMemoryLimit = uint64_t{64} << 20;

// One layer of configuration being read: a file, the environment or the
// command line.
struct Layer {
  std::string source;          // a file's path, "environment" or "command line"
  std::filesystem::path base;  // relative paths in it resolve against this
  // The variable or flag that sets the key being read ("CAIRN_DATABASE_URL",
  // "--schema"); "" in a file, where the key path says it.
  std::string name;
};

struct Key {
  std::string path;  // "worker.concurrency"
  // Reads the key's value from a node of a layer into the config; throws
  // ConfigError naming layer.source, the node's line and the path.
  std::function<void(const YAML::Node& node, const Layer& layer, DaemonConfig& config)> read;
  // The effective value, for `cairn config show` (secrets masked).
  std::function<Json(const DaemonConfig& config)> show;
  // A list or a mapping: the environment gives it in YAML flow style
  // ("[a, b]", "{noop: thread}"); other values are taken as written.
  bool structured = false;
  // SIGHUP applies it to a running daemon; any other key needs a restart.
  bool reloadable = false;
};

// Every key, in the order of config/cairn.yaml.
const std::vector<Key>& Keys();

// The environment variable of a key: CAIRN_ and the path in upper case with
// dots as underscores (worker.concurrency -> CAIRN_WORKER_CONCURRENCY).
std::string EnvironmentName(const std::string& path);

// A file mode as octal text ("0644"), and what others may do with it
// ("readable by others").
std::string ModeText(mode_t mode);
std::string OthersMayText(mode_t mode);

// Reads the database URL from the source the last layer named, into
// config.database.url and url_origin.
void ResolveDatabaseUrl(DaemonConfig& config);

// The older names still read: CAIRN_SCHEMA and CAIRN_CONCURRENCY.
const std::vector<std::pair<std::string, std::string>>& EnvironmentAliases();

}  // namespace cairn::config
