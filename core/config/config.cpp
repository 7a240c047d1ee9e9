// The daemon configuration: YAML loading, secrets and environment overrides;
// see config.hpp. The rules live in CheckConfig alone, shared by the loader
// (which maps key paths back to lines), ApplyEnvironment and ValidateConfig.
#include "config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "definition.hpp"
#include "errors.hpp"
#include "identifier.hpp"

namespace cairn {

namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using FailFn = std::function<void(const std::string& path, const std::string& problem)>;

constexpr std::array<std::string_view, 5> kLogLevels{"trace", "debug", "info", "warn", "error"};
constexpr std::array<std::string_view, 2> kLogFormats{"text", "json"};
constexpr std::array<std::string_view, 2> kIsolations{"process", "thread"};
constexpr uint64_t kMinMemoryLimit = uint64_t{64} << 20;
constexpr int kMaxConcurrency = 1024;
constexpr int kMaxPoolSize = 10000;
constexpr int kMaxClaimBatch = 10000;
constexpr int kMaxCrashLimit = 100;

std::string Quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::string ModeText(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// What others (neither owner nor group) may do with a file of this mode.
std::string OthersMayText(mode_t mode) {
  const bool read = (mode & S_IROTH) != 0;
  const bool write = (mode & S_IWOTH) != 0;
  return std::string(read && write ? "readable and writable"
                     : read        ? "readable"
                                   : "writable") +
         " by others";
}

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
                                   " (0 = concurrency + 2)");
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

fs::path Resolve(const fs::path& base, const std::string& text) {
  fs::path p(text);
  if (p.is_relative() && !base.empty()) p = base / p;
  return p.lexically_normal();
}

std::vector<fs::path> ReadPathList(const YAML::Node& node, const std::string& source,
                                   const std::string& path, const fs::path& base,
                                   yaml::LineMap& lines) {
  std::vector<fs::path> out;
  std::size_t i = 0;
  for (const std::string& item : yaml::ReadStringList(node, source, path, false)) {
    (void)item;
    lines.Record(yaml::Index(path, i), node[i]);
    out.push_back(Resolve(base, item));
    ++i;
  }
  return out;
}

void ParseDatabase(const YAML::Node& node, const std::string& source, const fs::path& base,
                   DaemonConfig& c, yaml::LineMap& lines) {
  const std::string path = "database";
  yaml::CheckMap(node, source, path,
                 {"url", "url_file", "url_credential", "schema", "pool_size", "idle_timeout"});
  std::vector<std::pair<std::string, YAML::Node>> secrets;
  for (const char* key : {"url", "url_file", "url_credential"}) {
    YAML::Node v = yaml::Get(node, key, path, lines);
    if (v.IsDefined() && !yaml::ReadString(v, source, yaml::Join(path, key), true).empty()) {
      secrets.emplace_back(key, v);
    }
  }
  if (secrets.size() > 1) {
    yaml::Fail(
        source, secrets[1].second, yaml::Join(path, secrets[1].first),
        "set only one of url, url_file and url_credential (" + secrets[0].first + " is set too)");
  }
  if (!secrets.empty()) {
    const auto& [key, v] = secrets.front();
    const std::string key_path = yaml::Join(path, key);
    const std::string value = v.Scalar();
    try {
      if (key == "url") {
        c.database.url = value;
        c.database.url_origin = "database.url in " + source;
      } else if (key == "url_file") {
        const fs::path file = Resolve(base, value);
        c.database.url = ReadSecretFile(file, "database URL file");
        c.database.url_origin = "file " + file.string();
      } else {
        if (value == "." || value == ".." || value.find('/') != std::string::npos) {
          yaml::Fail(source, v, key_path,
                     "must be a credential name (no \"/\"), got " + Quoted(value));
        }
        const char* dir = std::getenv("CREDENTIALS_DIRECTORY");
        if (dir == nullptr || *dir == '\0') {
          yaml::Fail(source, v, key_path,
                     "credential " + Quoted(value) +
                         " requested but $CREDENTIALS_DIRECTORY is not set (run under systemd "
                         "with LoadCredential=" +
                         value + ":/path/to/secret)");
        }
        c.database.url = ReadSecretFile(fs::path(dir) / value, "systemd credential " + value);
        c.database.url_origin = "systemd credential " + value;
      }
    } catch (const ConfigError& e) {
      if (e.source() == source) throw;
      yaml::Fail(source, v, key_path, e.what());
    }
  }
  if (auto v = yaml::Get(node, "schema", path, lines); v.IsDefined()) {
    c.database.schema = yaml::ReadString(v, source, "database.schema", false);
  }
  if (auto v = yaml::Get(node, "pool_size", path, lines); v.IsDefined()) {
    c.database.pool_size =
        static_cast<int>(yaml::ReadInt(v, source, "database.pool_size", 0, kMaxPoolSize));
  }
}

void ParseWorker(const YAML::Node& node, const std::string& source, DaemonConfig& c,
                 yaml::LineMap& lines) {
  const std::string path = "worker";
  yaml::CheckMap(node, source, path,
                 {"id", "queues", "concurrency", "poll_interval", "lease", "claim_batch",
                  "shutdown_grace", "listen"});
  WorkerConfig& w = c.worker;
  if (auto v = yaml::Get(node, "id", path, lines); v.IsDefined()) {
    w.id = yaml::ReadString(v, source, "worker.id", true);
  }
  if (auto v = yaml::Get(node, "queues", path, lines); v.IsDefined()) {
    w.queues = yaml::ReadStringList(v, source, "worker.queues", false);
    for (std::size_t i = 0; i < w.queues.size(); ++i) {
      lines.Record(yaml::Index("worker.queues", i), v[i]);
    }
  }
  if (auto v = yaml::Get(node, "concurrency", path, lines); v.IsDefined()) {
    w.concurrency =
        static_cast<int>(yaml::ReadInt(v, source, "worker.concurrency", 1, kMaxConcurrency));
  }
  if (auto v = yaml::Get(node, "poll_interval", path, lines); v.IsDefined()) {
    w.poll_interval = yaml::ReadDuration(v, source, "worker.poll_interval");
  }
  if (auto v = yaml::Get(node, "lease", path, lines); v.IsDefined()) {
    w.lease = yaml::ReadDuration(v, source, "worker.lease");
  }
  if (auto v = yaml::Get(node, "claim_batch", path, lines); v.IsDefined()) {
    w.claim_batch =
        static_cast<int>(yaml::ReadInt(v, source, "worker.claim_batch", 0, kMaxClaimBatch));
  }
  if (auto v = yaml::Get(node, "shutdown_grace", path, lines); v.IsDefined()) {
    w.shutdown_grace = yaml::ReadDuration(v, source, "worker.shutdown_grace");
  }
  if (auto v = yaml::Get(node, "listen", path, lines); v.IsDefined()) {
    w.listen = yaml::ReadBool(v, source, "worker.listen");
  }
}

void ParsePlugins(const YAML::Node& node, const std::string& source, const fs::path& base,
                  DaemonConfig& c, yaml::LineMap& lines) {
  const std::string path = "plugins";
  yaml::CheckMap(node, source, path,
                 {"directories", "isolation", "isolation_by_plugin", "memory_limit"});
  PluginsConfig& p = c.plugins;
  if (auto d = yaml::Get(node, "directories", path, lines); d.IsDefined()) {
    p.directories = ReadPathList(d, source, "plugins.directories", base, lines);
  }
  if (auto v = yaml::Get(node, "isolation", path, lines); v.IsDefined()) {
    p.isolation = yaml::ReadString(v, source, "plugins.isolation", false);
  }
  if (auto v = yaml::Get(node, "isolation_by_plugin", path, lines); v.IsDefined()) {
    if (!v.IsMap()) yaml::Fail(source, v, "plugins.isolation_by_plugin", "must be a mapping");
    for (const auto& entry : v) {
      const std::string plugin = entry.first.Scalar();
      const std::string key = yaml::Join("plugins.isolation_by_plugin", plugin);
      lines.Record(key, entry.second);
      p.isolation_by_plugin[plugin] = yaml::ReadString(entry.second, source, key, false);
    }
  }
  if (auto v = yaml::Get(node, "memory_limit", path, lines); v.IsDefined()) {
    p.memory_limit = yaml::ReadByteSize(v, source, "plugins.memory_limit");
  }
}

DaemonConfig ParseConfig(const YAML::Node& root, const std::string& source, const fs::path& base) {
  DaemonConfig c;
  c.source = source;
  if (!root.IsDefined() || root.IsNull()) return c;  // an empty file: all defaults
  yaml::LineMap lines;
  yaml::CheckMap(root, source, "",
                 {"database", "worker", "plugins", "workflows", "log", "metrics", "health",
                  "maintenance", "schedules"});
  if (auto v = yaml::Get(root, "database", "", lines); v.IsDefined()) {
    ParseDatabase(v, source, base, c, lines);
  }
  if (auto v = yaml::Get(root, "worker", "", lines); v.IsDefined()) {
    ParseWorker(v, source, c, lines);
  }
  if (auto v = yaml::Get(root, "plugins", "", lines); v.IsDefined()) {
    ParsePlugins(v, source, base, c, lines);
  }
  if (auto v = yaml::Get(root, "workflows", "", lines); v.IsDefined()) {
    yaml::CheckMap(v, source, "workflows", {"paths"});
    if (auto p = yaml::Get(v, "paths", "workflows", lines); p.IsDefined()) {
      c.workflows.paths = ReadPathList(p, source, "workflows.paths", base, lines);
    }
  }
  if (auto v = yaml::Get(root, "log", "", lines); v.IsDefined()) {
    yaml::CheckMap(v, source, "log", {"level", "format"});
    if (auto l = yaml::Get(v, "level", "log", lines); l.IsDefined()) {
      c.log.level = yaml::ReadString(l, source, "log.level", false);
    }
    if (auto f = yaml::Get(v, "format", "log", lines); f.IsDefined()) {
      c.log.format = yaml::ReadString(f, source, "log.format", false);
    }
  }
  if (auto v = yaml::Get(root, "metrics", "", lines); v.IsDefined()) {
    yaml::CheckMap(v, source, "metrics", {"listen", "backlog_interval"});
    if (auto l = yaml::Get(v, "listen", "metrics", lines); l.IsDefined()) {
      c.metrics.listen = yaml::ReadString(l, source, "metrics.listen", true);
    }
    if (auto b = yaml::Get(v, "backlog_interval", "metrics", lines); b.IsDefined()) {
      c.metrics.backlog_interval = yaml::ReadDuration(b, source, "metrics.backlog_interval");
    }
  }
  if (auto v = yaml::Get(root, "health", "", lines); v.IsDefined()) {
    yaml::CheckMap(v, source, "health", {"listen", "grace"});
    if (auto l = yaml::Get(v, "listen", "health", lines); l.IsDefined()) {
      c.health.listen = yaml::ReadString(l, source, "health.listen", true);
    }
    if (auto g = yaml::Get(v, "grace", "health", lines); g.IsDefined()) {
      c.health.grace = yaml::ReadDuration(g, source, "health.grace");
    }
  }
  if (auto v = yaml::Get(root, "maintenance", "", lines); v.IsDefined()) {
    yaml::CheckMap(v, source, "maintenance", {"reaper_interval", "crash_limit", "retention"});
    if (auto r = yaml::Get(v, "reaper_interval", "maintenance", lines); r.IsDefined()) {
      c.maintenance.reaper_interval = yaml::ReadDuration(r, source, "maintenance.reaper_interval");
    }
    if (auto r = yaml::Get(v, "crash_limit", "maintenance", lines); r.IsDefined()) {
      c.maintenance.crash_limit =
          static_cast<int>(yaml::ReadInt(r, source, "maintenance.crash_limit", 1, kMaxCrashLimit));
    }
    if (auto r = yaml::Get(v, "retention", "maintenance", lines); r.IsDefined()) {
      c.maintenance.retention = yaml::ReadDuration(r, source, "maintenance.retention");
    }
  }
  if (auto v = yaml::Get(root, "schedules", "", lines); v.IsDefined()) {
    c.schedules = ParseSchedules(v, source, lines);
    c.schedules_declared = true;
  }
  CheckConfig(c, [&](const std::string& path, const std::string& problem) {
    throw ConfigError(source, lines.Find(path), path, problem);
  });
  return c;
}

}  // namespace

int DaemonConfig::FixedConnections() const {
  return 4 + (worker.listen ? 1 : 0) + (maintenance.retention.count() > 0 ? 1 : 0);
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

DaemonConfig LoadConfig(const fs::path& file) {
  std::error_code ec;
  fs::path base = fs::absolute(file, ec).parent_path();
  if (ec) base = file.parent_path();
  // Refused as ssh refuses its configuration: a file anyone may change
  // decides which database, plugins and workflows cairn uses.
  struct stat st {};
  const bool have_mode = ::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  if (have_mode && (st.st_mode & S_IWOTH) != 0) {
    throw ConfigError(file.string(), 0, "",
                      "the configuration file is writable by others (mode " + ModeText(st.st_mode) +
                          "): anyone could change the database, plugins and workflows it names; "
                          "chmod o-w " +
                          file.string());
  }
  DaemonConfig config = LoadConfigFromString(ReadYamlFile(file), file.string(), base);
  if (have_mode && (st.st_mode & S_IROTH) != 0 &&
      config.database.url_origin == "database.url in " + file.string() &&
      DatabaseUrlHasPassword(config.database.url)) {
    throw ConfigError(file.string(), 0, "database.url",
                      "holds a password, and the file is readable by others (mode " +
                          ModeText(st.st_mode) + "): chmod o-r " + file.string() +
                          ", or keep the URL in database.url_file or database.url_credential");
  }
  return config;
}

DaemonConfig LoadConfigFromString(std::string_view text, const std::string& source,
                                  const fs::path& base_dir) {
  const fs::path base = base_dir.empty() ? fs::path(source).parent_path() : base_dir;
  return ParseConfig(yaml::Parse(text, source), source, base);
}

void ApplyEnvironment(DaemonConfig& config) {
  ApplyEnvironment(config, [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

void ApplyEnvironment(DaemonConfig& config, const EnvLookup& env) {
  auto get = [&](const char* name) -> std::optional<std::string> {
    auto value = env(name);
    if (value && value->empty()) return std::nullopt;
    return value;
  };
  DaemonConfig c = config;
  std::map<std::string, std::string> variable_of;  // key path -> variable, for errors
  if (auto v = get("CAIRN_DATABASE_URL")) {
    c.database.url = *v;
    c.database.url_origin = "environment CAIRN_DATABASE_URL";
  }
  if (auto v = get("CAIRN_SCHEMA")) {
    c.database.schema = *v;
    variable_of["database.schema"] = "CAIRN_SCHEMA";
  }
  if (auto v = get("CAIRN_CONCURRENCY")) {
    int value = 0;
    const auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), value);
    if (ec != std::errc() || ptr != v->data() + v->size() || value < 1 || value > kMaxConcurrency) {
      throw ConfigError("environment", 0, "CAIRN_CONCURRENCY",
                        "must be an integer between 1 and " + std::to_string(kMaxConcurrency) +
                            ", got " + Quoted(*v));
    }
    c.worker.concurrency = value;
    variable_of["worker.concurrency"] = "CAIRN_CONCURRENCY";
  }
  if (auto v = get("CAIRN_LOG_LEVEL")) {
    c.log.level = *v;
    variable_of["log.level"] = "CAIRN_LOG_LEVEL";
  }
  if (auto v = get("CAIRN_METRICS_LISTEN")) {
    c.metrics.listen = *v;
    variable_of["metrics.listen"] = "CAIRN_METRICS_LISTEN";
  }
  CheckConfig(c, [&](const std::string& path, const std::string& problem) {
    if (auto it = variable_of.find(path); it != variable_of.end()) {
      throw ConfigError("environment", 0, it->second, problem);
    }
    throw ConfigError(config.source.empty() ? "config" : config.source, 0, path, problem);
  });
  config = std::move(c);
}

void ValidateConfig(const DaemonConfig& config) {
  CheckConfig(config, [&](const std::string& path, const std::string& problem) {
    throw ConfigError(config.source.empty() ? "config" : config.source, 0, path, problem);
  });
}

std::string ReadSecretFile(const fs::path& file, const std::string& what) {
  constexpr std::size_t kMaxSecret = 64 * 1024;
  // O_NONBLOCK: opening a FIFO must not hang; a regular file ignores it.
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    throw ConfigError(
        file.string(), 0, "",
        what + ": " +
            (errno == ENOENT ? std::string("no such file")
                             : "cannot open for reading: " + std::string(std::strerror(errno))));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // The mode of the file that is read, not of whatever the path names later.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    throw ConfigError(file.string(), 0, "", what + ": not a regular file");
  }
  if ((st.st_mode & (S_IROTH | S_IWOTH)) != 0) {
    throw ConfigError(file.string(), 0, "",
                      what + ": " + OthersMayText(st.st_mode) + " (mode " + ModeText(st.st_mode) +
                          "); a secret must be for its owner and group alone: chmod o-rw " +
                          file.string());
  }
  std::string secret(kMaxSecret + 1, '\0');
  std::size_t filled = 0;
  while (filled < secret.size()) {
    const ssize_t n = ::read(fd, secret.data() + filled, secret.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ConfigError(file.string(), 0, "", what + ": read error");
    if (n == 0) break;
    filled += static_cast<std::size_t>(n);
  }
  secret.resize(filled);
  if (secret.size() > kMaxSecret) {
    throw ConfigError(file.string(), 0, "", what + ": larger than 64 KiB");
  }
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) throw ConfigError(file.string(), 0, "", what + ": file is empty");
  return secret;
}

namespace {

// Where the passwords of a connection string are, as (offset, length) pairs
// in increasing order: a URI's user:password@ and every password=... (a
// query parameter or a key=value pair, possibly quoted).
std::vector<std::pair<std::size_t, std::size_t>> PasswordSpans(std::string_view url) {
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  if (const std::size_t scheme = url.find("://"); scheme != std::string_view::npos) {
    const std::size_t authority = scheme + 3;
    const std::size_t end = url.find_first_of("/?#", authority);
    const std::size_t at = url.rfind('@', end == std::string_view::npos ? url.size() : end);
    if (at != std::string_view::npos && at > authority) {
      const std::size_t colon = url.find(':', authority);
      if (colon != std::string_view::npos && colon < at) {
        spans.emplace_back(colon + 1, at - colon - 1);
      }
    }
  }
  std::size_t pos = 0;
  while ((pos = url.find("password", pos)) != std::string_view::npos) {
    std::size_t eq = pos + 8;
    while (eq < url.size() && url[eq] == ' ') ++eq;
    const bool at_key =
        pos == 0 || url[pos - 1] == '?' || url[pos - 1] == '&' || url[pos - 1] == ' ';
    if (!at_key || eq >= url.size() || url[eq] != '=') {
      pos += 8;
      continue;
    }
    std::size_t start = eq + 1;
    while (start < url.size() && url[start] == ' ') ++start;
    std::size_t stop = start;
    if (stop < url.size() && url[stop] == '\'') {
      ++stop;
      while (stop < url.size() && url[stop] != '\'') stop += url[stop] == '\\' ? 2 : 1;
      stop = std::min(stop + 1, url.size());
    } else {
      while (stop < url.size() && url[stop] != '&' && url[stop] != ' ') ++stop;
    }
    spans.emplace_back(start, stop - start);
    pos = stop;
  }
  return spans;
}

}  // namespace

std::string RedactDatabaseUrl(std::string_view url) {
  std::string out;
  std::size_t copied = 0;
  for (const auto& [start, length] : PasswordSpans(url)) {
    if (start < copied) continue;
    out.append(url.substr(copied, start - copied));
    out += "****";
    copied = start + length;
  }
  out.append(url.substr(std::min(copied, url.size())));
  return out;
}

bool DatabaseUrlHasPassword(std::string_view url) {
  for (const auto& [start, length] : PasswordSpans(url)) {
    if (length > 0) return true;
  }
  return false;
}

}  // namespace cairn
