// The daemon configuration: layers, rules and their errors; see config.hpp.
// What a key is and how it is read lives in the key table (config_keys.cpp);
// the rules that relate keys live in CheckConfig alone, shared by every way
// of loading. Secrets are read in config_secrets.cpp.
#include "config.hpp"

#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <set>

#include "config_keys.hpp"
#include "definition.hpp"
#include "errors.hpp"
#include "identifier.hpp"

namespace cairn {

namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using FailFn = std::function<void(const std::string& path, const std::string& problem)>;
using config::kMaxBatchSize;
using config::kMaxClaimBatch;
using config::kMaxConcurrency;
using config::kMaxCrashLimit;
using config::kMaxPoolSize;
using config::kMinMemoryLimit;

constexpr std::array<std::string_view, 5> kLogLevels{"trace", "debug", "info", "warn", "error"};
constexpr std::array<std::string_view, 2> kLogFormats{"text", "json"};
constexpr std::array<std::string_view, 2> kIsolations{"process", "thread"};

std::string Quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

template <std::size_t N>
std::string OneOf(const std::array<std::string_view, N>& values) {
  std::string out;
  for (std::string_view v : values) out += (out.empty() ? "" : " | ") + std::string(v);
  return out;
}

template <std::size_t N>
bool Contains(const std::array<std::string_view, N>& values, std::string_view v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

// "host:port", "[v6]:port" or ":port"; port 1..65535.
bool IsListenAddress(std::string_view address) {
  const std::size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view host = address.substr(0, colon);
  const std::string_view port = address.substr(colon + 1);
  if (host.find(':') != std::string_view::npos &&
      !(host.size() >= 2 && host.front() == '[' && host.back() == ']')) {
    return false;
  }
  int value = 0;
  const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  return !port.empty() && ec == std::errc() && ptr == port.data() + port.size() && value >= 1 &&
         value <= 65535;
}

// An address for the daemon's HTTP server: host:port or empty (disabled).
// Debian 12's civetweb is built without IPv6, so an IPv6 address is refused
// here rather than at start-up.
void CheckHttpListen(const std::string& listen, const std::string& key, const FailFn& fail) {
  if (listen.empty()) return;
  if (!IsListenAddress(listen)) {
    fail(key, "must be host:port (port 1-65535) or empty to disable, got " + Quoted(listen));
  }
  if (listen.front() == '[') {
    fail(key,
         "IPv6 addresses are not supported (the HTTP server is IPv4 only); use an IPv4 "
         "address such as 127.0.0.1 or 0.0.0.0, got " +
             Quoted(listen));
  }
}

// Every rule on a config. fail must throw.
void CheckConfig(const DaemonConfig& c, const FailFn& fail) {
  if (!IsValidIdentifier(c.database.schema)) {
    fail("database.schema", "invalid schema name " + Quoted(c.database.schema) +
                                ": must match ^[A-Za-z_][A-Za-z0-9_]{0,62}$");
  }
  if (const char* reason = ReservedSchemaReason(c.database.schema)) {
    fail("database.schema",
         "schema name " + Quoted(c.database.schema) + " is reserved: " + std::string(reason));
  }
  if (c.database.pool_size < 0 || c.database.pool_size > kMaxPoolSize) {
    fail("database.pool_size", "must be an integer between 0 and " + std::to_string(kMaxPoolSize) +
                                   " (0 = what worker.concurrency needs)");
  }
  if (c.database.pool_size > 0 && c.database.pool_size <= c.FixedConnections()) {
    fail("database.pool_size",
         "must leave a connection for at least one slot: more than " +
             std::to_string(c.FixedConnections()) +
             " (the poller, lease keeper, sweeper, schedule service, idempotency session, LISTEN, "
             "retention and the backlog reader each hold one)");
  }
  if (c.database.idle_timeout < std::chrono::seconds(1)) {
    fail("database.idle_timeout", "must be at least 1s");
  }
  if (c.worker.id.size() > 200 ||
      std::any_of(c.worker.id.begin(), c.worker.id.end(),
                  [](unsigned char ch) { return ch < 0x20 || ch == 0x7f; })) {
    fail("worker.id", "must be at most 200 printable characters");
  }
  if (c.worker.queues.empty()) fail("worker.queues", "must list at least one queue");
  std::set<std::string> queues;
  for (std::size_t i = 0; i < c.worker.queues.size(); ++i) {
    const std::string& q = c.worker.queues[i];
    const std::string path = "worker.queues[" + std::to_string(i) + "]";
    if (!IsValidDefinitionName(q)) {
      fail(path,
           "invalid queue name " + Quoted(q) + ": must match ^[A-Za-z_][A-Za-z0-9_.-]{0,127}$");
    }
    if (!queues.insert(q).second) fail(path, "duplicate queue " + Quoted(q));
  }
  for (const auto& [queue, limit] : c.queue_limits) {
    if (!IsValidDefinitionName(queue)) {
      fail("queue_limits." + queue,
           "invalid queue name " + Quoted(queue) + ": must match ^[A-Za-z_][A-Za-z0-9_.-]{0,127}$");
    }
  }
  if (c.worker.concurrency < 1 || c.worker.concurrency > kMaxConcurrency) {
    fail("worker.concurrency",
         "must be an integer between 1 and " + std::to_string(kMaxConcurrency));
  }
  if (c.worker.poll_interval <= milliseconds::zero()) {
    fail("worker.poll_interval", "must be longer than 0");
  }
  if (c.worker.lease < std::chrono::seconds(1)) fail("worker.lease", "must be at least 1s");
  if (c.worker.claim_batch < 0 || c.worker.claim_batch > kMaxClaimBatch) {
    fail("worker.claim_batch", "must be an integer between 0 and " +
                                   std::to_string(kMaxClaimBatch) + " (0 = concurrency)");
  }
  if (c.worker.batch_size < 1 || c.worker.batch_size > kMaxBatchSize) {
    fail("worker.batch_size",
         "must be an integer between 1 and " + std::to_string(kMaxBatchSize) + " (1 = no batches)");
  }
  if (c.worker.shutdown_grace < milliseconds::zero()) {
    fail("worker.shutdown_grace", "must not be negative");
  }
  for (std::size_t i = 0; i < c.plugins.directories.size(); ++i) {
    if (c.plugins.directories[i].empty()) {
      fail("plugins.directories[" + std::to_string(i) + "]", "must not be empty");
    }
  }
  for (const auto& [plugin, isolation] : c.plugins.isolation_by_plugin) {
    if (!Contains(kIsolations, isolation)) {
      fail("plugins.isolation_by_plugin." + plugin,
           "must be one of " + OneOf(kIsolations) + ", got " + Quoted(isolation));
    }
  }
  for (const auto& [workflow, isolation] : c.plugins.isolation_by_workflow) {
    if (!Contains(kIsolations, isolation)) {
      fail("plugins.isolation_by_workflow." + workflow,
           "must be one of " + OneOf(kIsolations) + ", got " + Quoted(isolation));
    }
  }
  if (!Contains(kIsolations, c.plugins.isolation)) {
    fail("plugins.isolation",
         "must be one of " + OneOf(kIsolations) + ", got " + Quoted(c.plugins.isolation));
  }
  if (c.plugins.memory_limit != 0 && c.plugins.memory_limit < kMinMemoryLimit) {
    fail("plugins.memory_limit",
         "must be 0 (no limit) or at least 64MiB: a step process "
         "needs room for cairn itself and its plugins");
  }
  for (std::size_t i = 0; i < c.workflows.paths.size(); ++i) {
    if (c.workflows.paths[i].empty()) {
      fail("workflows.paths[" + std::to_string(i) + "]", "must not be empty");
    }
  }
  if (!Contains(kLogLevels, c.log.level)) {
    fail("log.level", "must be one of " + OneOf(kLogLevels) + ", got " + Quoted(c.log.level));
  }
  if (!Contains(kLogFormats, c.log.format)) {
    fail("log.format", "must be one of " + OneOf(kLogFormats) + ", got " + Quoted(c.log.format));
  }
  CheckHttpListen(c.metrics.listen, "metrics.listen", fail);
  if (c.metrics.backlog_interval <= milliseconds::zero()) {
    fail("metrics.backlog_interval", "must be longer than 0");
  }
  CheckHttpListen(c.health.listen, "health.listen", fail);
  if (c.health.grace < milliseconds::zero()) fail("health.grace", "must not be negative");
  if (c.maintenance.reaper_interval <= milliseconds::zero()) {
    fail("maintenance.reaper_interval", "must be longer than 0");
  }
  if (c.maintenance.crash_limit < 1 || c.maintenance.crash_limit > kMaxCrashLimit) {
    fail("maintenance.crash_limit",
         "must be an integer between 1 and " + std::to_string(kMaxCrashLimit));
  }
  if (c.maintenance.retention < milliseconds::zero()) {
    fail("maintenance.retention", "must not be negative (0 keeps history forever)");
  }
}

// The origin of a key path, or of its nearest recorded ancestor
// ("worker.queues[1]" -> "worker.queues").
const ConfigOrigin* FindOrigin(const DaemonConfig& c, std::string path) {
  while (!path.empty()) {
    if (auto it = c.origins.find(path); it != c.origins.end()) return &it->second;
    const std::size_t cut = path.find_last_of(".[");
    if (cut == std::string::npos) break;
    path.resize(cut);
  }
  return nullptr;
}

// Throws the rule's problem where the offending value came from.
void Check(const DaemonConfig& c) {
  CheckConfig(c, [&](const std::string& path, const std::string& problem) {
    FailConfigKey(c, path, problem);
  });
}

// The allowed keys of a section ("" for the top level), from the key table.
std::vector<std::string_view> AllowedKeys(std::string_view section) {
  std::vector<std::string_view> allowed;
  for (const config::Key& key : config::Keys()) {
    const std::string_view path = key.path;
    const std::size_t dot = path.find('.');
    const std::string_view head = path.substr(0, dot);
    if (section.empty()) {
      if (std::find(allowed.begin(), allowed.end(), head) == allowed.end()) allowed.push_back(head);
    } else if (dot != std::string_view::npos && head == section) {
      allowed.push_back(path.substr(dot + 1));
    }
  }
  return allowed;
}

// Records where a key's value and, for a list or mapping, each entry came
// from.
void RecordOrigins(DaemonConfig& c, const std::string& path, const YAML::Node& node,
                   const ConfigOrigin& origin) {
  c.origins[path] = origin;
  if (!origin.name.empty()) return;
  if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      c.origins[yaml::Index(path, i)] = {origin.source, yaml::LineOf(node[i]), ""};
    }
  } else if (node.IsMap()) {
    for (const auto& entry : node) {
      c.origins[yaml::Join(path, entry.first.Scalar())] = {origin.source,
                                                           yaml::LineOf(entry.second), ""};
    }
  }
}

// A top-level key read whole (schedules, queue_limits), not a section of keys.
bool IsTopLevelKey(const std::string& name) {
  const auto& keys = config::Keys();
  return std::any_of(keys.begin(), keys.end(),
                     [&](const config::Key& key) { return key.path == name; });
}

// Reads the keys one file names over what earlier layers set.
void ReadFileLayer(const YAML::Node& root, const config::Layer& layer, DaemonConfig& c) {
  if (!root.IsDefined() || root.IsNull()) return;  // an empty file sets nothing
  yaml::CheckMap(root, layer.source, "", AllowedKeys(""));
  for (const auto& entry : root) {
    const std::string section = entry.first.Scalar();
    if (entry.second.IsMap() || IsTopLevelKey(section)) continue;
    if (entry.second.IsNull()) continue;  // "worker:" with nothing under it
    yaml::Fail(layer.source, entry.second, section, "must be a mapping");
  }
  // Within one layer the database URL comes from one place.
  std::vector<std::string> url_keys;
  for (const char* key : {"url", "url_file", "url_credential"}) {
    const YAML::Node database = root["database"];
    if (database.IsDefined() && database.IsMap() && database[key].IsDefined() &&
        !database[key].IsNull() && !(database[key].IsScalar() && database[key].Scalar().empty())) {
      url_keys.emplace_back(key);
    }
  }
  if (url_keys.size() > 1) {
    yaml::Fail(layer.source, root["database"][url_keys[1]], "database." + url_keys[1],
               "set only one of url, url_file and url_credential (" + url_keys[0] + " is set too)");
  }
  for (const auto& entry : root) {
    const std::string section = entry.first.Scalar();
    if (entry.second.IsMap() && !IsTopLevelKey(section)) {
      yaml::CheckMap(entry.second, layer.source, section, AllowedKeys(section));
    }
  }
  for (const config::Key& key : config::Keys()) {
    const std::size_t dot = key.path.find('.');
    // yaml-cpp: an absent key gives an invalid node, on which only
    // IsDefined may be called (and which cannot be assigned to).
    const YAML::Node section = dot == std::string::npos ? root : root[key.path.substr(0, dot)];
    if (!section.IsDefined() || !section.IsMap()) continue;  // "worker:" with nothing under it
    const YAML::Node node = section[dot == std::string::npos ? key.path : key.path.substr(dot + 1)];
    if (!node.IsDefined()) continue;
    key.read(node, layer, c);
    RecordOrigins(c, key.path, node, {layer.source, yaml::LineOf(node), ""});
  }
}

// Refused as ssh refuses its configuration: a file anyone may change
// decides which database, plugins and workflows cairn uses.
void CheckFileMode(const fs::path& file, const struct stat& st) {
  if ((st.st_mode & S_IWOTH) != 0) {
    throw ConfigError(file.string(), 0, "",
                      "the configuration file is writable by others (mode " +
                          config::ModeText(st.st_mode) +
                          "): anyone could change the database, plugins and workflows it names; "
                          "chmod o-w " +
                          file.string());
  }
}

// The main file, then its drop-ins in name order.
std::vector<fs::path> ConfigFiles(const fs::path& file) {
  std::vector<fs::path> files{file};
  const fs::path dropins = fs::path(file.string() + ".d");
  std::error_code ec;
  if (!fs::is_directory(dropins, ec)) return files;
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(dropins, ec)) {
    const std::string extension = entry.path().extension().string();
    if ((extension == ".yaml" || extension == ".yml") && entry.is_regular_file(ec)) {
      found.push_back(entry.path());
    }
  }
  std::sort(found.begin(), found.end());
  files.insert(files.end(), found.begin(), found.end());
  return files;
}

void ReadFiles(const fs::path& main_file, DaemonConfig& c) {
  c.source = main_file.string();
  for (const fs::path& file : ConfigFiles(main_file)) {
    struct stat st {};
    const bool have_mode = ::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode);
    if (have_mode) CheckFileMode(file, st);
    std::error_code ec;
    fs::path base = fs::absolute(file, ec).parent_path();
    if (ec) base = file.parent_path();
    ReadFileLayer(yaml::Parse(ReadYamlFile(file), file.string()), {file.string(), base, ""}, c);
    const DatabaseUrlSource& url = c.database.url_source;
    if (have_mode && (st.st_mode & S_IROTH) != 0 && url.kind == DatabaseUrlSource::kUrl &&
        url.layer == file.string() && DatabaseUrlHasPassword(url.value)) {
      throw ConfigError(file.string(), url.line, "database.url",
                        "holds a password, and the file is readable by others (mode " +
                            config::ModeText(st.st_mode) + "): chmod o-r " + file.string() +
                            ", or keep the URL in database.url_file or database.url_credential");
    }
  }
}

// Reads one value given by name (a variable or a flag) into its key.
void ReadNamedValue(const config::Key& key, const config::Layer& layer, const std::string& text,
                    DaemonConfig& c) {
  YAML::Node node;
  if (key.structured) {
    try {
      node = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw ConfigError(layer.source, 0, layer.name, "not valid YAML: " + e.msg);
    }
  } else {
    node = YAML::Node(text);
  }
  try {
    key.read(node, layer, c);
  } catch (const ConfigError& e) {
    throw ConfigError(layer.source, 0, layer.name, e.problem());
  }
  c.origins[key.path] = {layer.source, 0, layer.name};
}

const config::Key& KeyAt(const std::string& path) {
  for (const config::Key& key : config::Keys()) {
    if (key.path == path) return key;
  }
  throw InvalidArgumentError("no configuration key " + path);
}

void ReadEnvironment(const EnvLookup& env, DaemonConfig& c) {
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  auto read = [&](const std::string& variable, const std::string& path) {
    std::optional<std::string> value = env(variable);
    if (!value || value->empty()) return;
    ReadNamedValue(KeyAt(path), {"environment", cwd, variable}, *value, c);
  };
  for (const auto& [variable, path] : config::EnvironmentAliases()) read(variable, path);
  for (const config::Key& key : config::Keys()) read(config::EnvironmentName(key.path), key.path);
}

void ReadFlags(const std::vector<ConfigFlag>& flags, DaemonConfig& c) {
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  for (const ConfigFlag& flag : flags) {
    ReadNamedValue(KeyAt(flag.path), {"command line", cwd, flag.flag}, flag.value, c);
  }
}

}  // namespace

void FailConfigKey(const DaemonConfig& config, const std::string& path,
                   const std::string& problem) {
  const ConfigOrigin* origin = FindOrigin(config, path);
  if (origin == nullptr) {
    throw ConfigError(config.source.empty() ? "config" : config.source, 0, path, problem);
  }
  if (!origin->name.empty()) throw ConfigError(origin->source, 0, origin->name, problem);
  throw ConfigError(origin->source, origin->line, path, problem);
}

std::string ConfigOrigin::Text() const {
  if (!name.empty()) return source + " " + name;
  return line > 0 ? source + ":" + std::to_string(line) : source;
}

int DaemonConfig::FixedConnections() const {
  return 5 + (worker.listen ? 1 : 0) + (maintenance.retention.count() > 0 ? 1 : 0) +
         (metrics.listen.empty() ? 0 : 1);
}

int DaemonConfig::EffectivePoolSize() const {
  return database.pool_size > 0 ? database.pool_size : worker.concurrency + FixedConnections();
}

int DaemonConfig::EffectiveConcurrency() const {
  return std::min(worker.concurrency, EffectivePoolSize() - FixedConnections());
}

int DaemonConfig::EffectiveClaimBatch() const {
  return worker.claim_batch > 0 ? worker.claim_batch : worker.concurrency;
}

std::string DaemonConfig::EffectiveWorkerId() const {
  if (!worker.id.empty()) return worker.id;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof host, "localhost");
  }
  return std::string(host) + ":" + std::to_string(getpid());
}

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

DaemonConfig LoadDaemonConfig(const ConfigSources& sources) {
  DaemonConfig c;
  if (sources.file) ReadFiles(*sources.file, c);
  if (sources.env) ReadEnvironment(sources.env, c);
  ReadFlags(sources.flags, c);
  config::ResolveDatabaseUrl(c);
  Check(c);
  return c;
}

DaemonConfig LoadConfig(const fs::path& file) { return LoadDaemonConfig({file, nullptr, {}}); }

DaemonConfig LoadConfigFromString(std::string_view text, const std::string& source,
                                  const fs::path& base_dir) {
  DaemonConfig c;
  c.source = source;
  const fs::path base = base_dir.empty() ? fs::path(source).parent_path() : base_dir;
  ReadFileLayer(yaml::Parse(text, source), {source, base, ""}, c);
  config::ResolveDatabaseUrl(c);
  Check(c);
  return c;
}

void ApplyEnvironment(DaemonConfig& config) { ApplyEnvironment(config, ProcessEnvironment()); }

void ApplyEnvironment(DaemonConfig& config, const EnvLookup& env) {
  DaemonConfig c = config;
  ReadEnvironment(env, c);
  if (c.database.url_source.origin != config.database.url_source.origin ||
      c.database.url_source.value != config.database.url_source.value) {
    config::ResolveDatabaseUrl(c);
  }
  Check(c);
  config = std::move(c);
}

void ValidateConfig(const DaemonConfig& config) { Check(config); }

Json ShowConfig(const DaemonConfig& config) {
  Json out = Json::array();
  for (const config::Key& key : config::Keys()) {
    const auto origin = config.origins.find(key.path);
    out.push_back({{"key", key.path},
                   {"value", key.show(config)},
                   {"source", origin == config.origins.end() ? "default" : origin->second.Text()},
                   {"env", config::EnvironmentName(key.path)},
                   {"reloadable", key.reloadable}});
  }
  return out;
}

std::string ConfigEnvironmentName(const std::string& path) { return config::EnvironmentName(path); }

}  // namespace cairn
