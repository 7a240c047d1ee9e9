// See config_keys.hpp. The builders below read one kind of value each; a new
// key of a known kind is one line in Keys().
#include "config_keys.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "byte_size.hpp"
#include "duration.hpp"

namespace cairn::config {

namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

fs::path Resolve(const fs::path& base, const std::string& text) {
  fs::path p(text);
  if (p.is_relative() && !base.empty()) p = base / p;
  return p.lexically_normal();
}

template <class S, class T>
using Member = T S::*;

template <class S>
Key IntKey(std::string path, S DaemonConfig::*section, Member<S, int> field, int64_t min,
           int64_t max) {
  return {path,
          [=](const YAML::Node& node, const Layer& layer, DaemonConfig& c) {
            (c.*section).*field =
                static_cast<int>(yaml::ReadInt(node, layer.source, path, min, max));
          },
          [=](const DaemonConfig& c) { return Json((c.*section).*field); }};
}

template <class S>
Key DurationKey(std::string path, S DaemonConfig::*section, Member<S, milliseconds> field) {
  return {path,
          [=](const YAML::Node& node, const Layer& layer, DaemonConfig& c) {
            (c.*section).*field = yaml::ReadDuration(node, layer.source, path);
          },
          [=](const DaemonConfig& c) { return Json(FormatDuration((c.*section).*field)); }};
}

template <class S>
Key StringKey(std::string path, S DaemonConfig::*section, Member<S, std::string> field,
              bool allow_empty) {
  return {path,
          [=](const YAML::Node& node, const Layer& layer, DaemonConfig& c) {
            (c.*section).*field = yaml::ReadString(node, layer.source, path, allow_empty);
          },
          [=](const DaemonConfig& c) { return Json((c.*section).*field); }};
}

template <class S>
Key BoolKey(std::string path, S DaemonConfig::*section, Member<S, bool> field) {
  return {path,
          [=](const YAML::Node& node, const Layer& layer, DaemonConfig& c) {
            (c.*section).*field = yaml::ReadBool(node, layer.source, path);
          },
          [=](const DaemonConfig& c) { return Json((c.*section).*field); }};
}

template <class S>
Key StringListKey(std::string path, S DaemonConfig::*section,
                  Member<S, std::vector<std::string>> field) {
  return {path,
          [=](const YAML::Node& node, const Layer& layer, DaemonConfig& c) {
            (c.*section).*field = yaml::ReadStringList(node, layer.source, path, false);
          },
          [=](const DaemonConfig& c) { return Json((c.*section).*field); }, true};
}

// A mapping of names to strings, such as {noop: thread}.
template <class S>
Key StringMapKey(std::string path, S DaemonConfig::*section,
                 Member<S, std::map<std::string, std::string>> field) {
  return {path,
          [=](const YAML::Node& node, const Layer& layer, DaemonConfig& c) {
            if (!node.IsMap()) yaml::Fail(layer.source, node, path, "must be a mapping");
            std::map<std::string, std::string> values;
            for (const auto& entry : node) {
              const std::string name = entry.first.Scalar();
              values[name] =
                  yaml::ReadString(entry.second, layer.source, yaml::Join(path, name), false);
            }
            (c.*section).*field = std::move(values);
          },
          [=](const DaemonConfig& c) { return Json((c.*section).*field); }, true};
}

// A list of paths; relative ones resolve against the layer's folder.
template <class S>
Key PathListKey(std::string path, S DaemonConfig::*section,
                Member<S, std::vector<fs::path>> field) {
  return {path,
          [=](const YAML::Node& node, const Layer& layer, DaemonConfig& c) {
            std::vector<fs::path> paths;
            for (const std::string& item : yaml::ReadStringList(node, layer.source, path, false)) {
              paths.push_back(Resolve(layer.base, item));
            }
            (c.*section).*field = std::move(paths);
          },
          [=](const DaemonConfig& c) {
            Json out = Json::array();
            for (const auto& p : (c.*section).*field) out.push_back(p.string());
            return out;
          },
          true};
}

// Where the database URL comes from: the URL itself, a file, or a systemd
// credential. A layer that sets one replaces whatever an earlier layer set;
// the secret is read once all layers are in (ResolveDatabaseUrl), so a
// credential named in the file does not stand in the way of a URL from the
// environment.
Key UrlKey(const std::string& path, DatabaseUrlSource::Kind kind) {
  return {path,
          [=](const YAML::Node& node, const Layer& layer, DaemonConfig& c) {
            const std::string value = yaml::ReadString(node, layer.source, path, true);
            if (value.empty()) return;
            if (kind == DatabaseUrlSource::kCredential &&
                (value == "." || value == ".." || value.find('/') != std::string::npos)) {
              yaml::Fail(layer.source, node, path,
                         R"(must be a credential name (no "/"), got ")" + value + '"');
            }
            DatabaseUrlSource& source = c.database.url_source;
            source.kind = kind;
            source.value =
                kind == DatabaseUrlSource::kFile ? Resolve(layer.base, value).string() : value;
            source.origin =
                layer.name.empty() ? path + " in " + layer.source : layer.source + " " + layer.name;
            source.layer = layer.source;
            source.line = yaml::LineOf(node);
          },
          [=](const DaemonConfig& c) -> Json {
            const DatabaseUrlSource& source = c.database.url_source;
            if (source.kind != kind) return nullptr;
            return kind == DatabaseUrlSource::kUrl ? RedactDatabaseUrl(source.value) : source.value;
          }};
}

// The `queue_limits:` section: queue name -> {max_running, rate_per_second,
// burst}. burst defaults to the rate rounded up (one second's worth).
Key QueueLimitsKey() {
  const std::string path = "queue_limits";
  return {path,
          [=](const YAML::Node& node, const Layer& layer, DaemonConfig& c) {
            if (!node.IsMap() && !node.IsNull()) {
              yaml::Fail(layer.source, node, path, "must be a mapping of queue names to limits");
            }
            std::map<std::string, QueueLimitConfig> limits;
            for (const auto& entry : node) {
              const std::string queue = entry.first.Scalar();
              const std::string at = yaml::Join(path, queue);
              const YAML::Node& limit = entry.second;
              yaml::CheckMap(limit, layer.source, at, {"max_running", "rate_per_second", "burst"});
              QueueLimitConfig q;
              if (const YAML::Node v = limit["max_running"]) {
                q.max_running = static_cast<int>(yaml::ReadInt(
                    v, layer.source, yaml::Join(at, "max_running"), 1, kMaxQueueLimit));
              }
              if (const YAML::Node v = limit["rate_per_second"]) {
                const std::string rate_path = yaml::Join(at, "rate_per_second");
                q.rate_per_second = yaml::ReadDouble(v, layer.source, rate_path);
                if (*q.rate_per_second <= 0 || *q.rate_per_second > kMaxQueueLimit) {
                  yaml::Fail(layer.source, v, rate_path,
                             "must be a number of steps a second greater than 0 and at most " +
                                 std::to_string(kMaxQueueLimit) +
                                 " (leave it out for no rate limit)");
                }
              }
              if (const YAML::Node v = limit["burst"]) {
                const std::string burst_path = yaml::Join(at, "burst");
                if (!q.rate_per_second) {
                  yaml::Fail(layer.source, v, burst_path, "needs rate_per_second beside it");
                }
                q.burst =
                    static_cast<int>(yaml::ReadInt(v, layer.source, burst_path, 1, kMaxQueueLimit));
              } else if (q.rate_per_second) {
                q.burst = static_cast<int>(std::max(1.0, std::ceil(*q.rate_per_second)));
              }
              if (!q.max_running && !q.rate_per_second) {
                yaml::Fail(layer.source, entry.first, at,
                           "sets no limit: give max_running, rate_per_second or both (a queue "
                           "left out of queue_limits has none)");
              }
              limits[queue] = q;
            }
            c.queue_limits = std::move(limits);
            c.queue_limits_declared = true;
          },
          [](const DaemonConfig& c) -> Json {
            if (!c.queue_limits_declared) return nullptr;
            Json out = Json::object();
            for (const auto& [queue, q] : c.queue_limits) {
              Json limit = Json::object();
              if (q.max_running) limit["max_running"] = *q.max_running;
              if (q.rate_per_second) limit["rate_per_second"] = *q.rate_per_second;
              if (q.burst) limit["burst"] = *q.burst;
              out[queue] = std::move(limit);
            }
            return out;
          },
          true};
}

// A key that SIGHUP applies while the daemon runs.
Key Reloadable(Key key) {
  key.reloadable = true;
  return key;
}

}  // namespace

const std::vector<Key>& Keys() {
  static const std::vector<Key> kKeys = {
      UrlKey("database.url", DatabaseUrlSource::kUrl),
      UrlKey("database.url_file", DatabaseUrlSource::kFile),
      UrlKey("database.url_credential", DatabaseUrlSource::kCredential),
      StringKey("database.schema", &DaemonConfig::database, &DatabaseConfig::schema, false),
      IntKey("database.pool_size", &DaemonConfig::database, &DatabaseConfig::pool_size, 0,
             kMaxPoolSize),
      DurationKey("database.idle_timeout", &DaemonConfig::database, &DatabaseConfig::idle_timeout),

      StringKey("worker.id", &DaemonConfig::worker, &WorkerConfig::id, true),
      Reloadable(StringListKey("worker.queues", &DaemonConfig::worker, &WorkerConfig::queues)),
      Reloadable(IntKey("worker.concurrency", &DaemonConfig::worker, &WorkerConfig::concurrency, 1,
                        kMaxConcurrency)),
      DurationKey("worker.poll_interval", &DaemonConfig::worker, &WorkerConfig::poll_interval),
      DurationKey("worker.lease", &DaemonConfig::worker, &WorkerConfig::lease),
      Reloadable(IntKey("worker.claim_batch", &DaemonConfig::worker, &WorkerConfig::claim_batch, 0,
                        kMaxClaimBatch)),
      Reloadable(IntKey("worker.batch_size", &DaemonConfig::worker, &WorkerConfig::batch_size, 1,
                        kMaxBatchSize)),
      DurationKey("worker.shutdown_grace", &DaemonConfig::worker, &WorkerConfig::shutdown_grace),
      BoolKey("worker.listen", &DaemonConfig::worker, &WorkerConfig::listen),

      PathListKey("plugins.directories", &DaemonConfig::plugins, &PluginsConfig::directories),
      StringKey("plugins.isolation", &DaemonConfig::plugins, &PluginsConfig::isolation, false),
      StringMapKey("plugins.isolation_by_plugin", &DaemonConfig::plugins,
                   &PluginsConfig::isolation_by_plugin),
      // Not reloadable: a workflow moved onto threads may need a plugin the
      // daemon never loaded in-process, and one moved into step processes
      // needs step processes a daemon on threads never started.
      StringMapKey("plugins.isolation_by_workflow", &DaemonConfig::plugins,
                   &PluginsConfig::isolation_by_workflow),
      {"plugins.memory_limit",
       [](const YAML::Node& node, const Layer& layer, DaemonConfig& c) {
         c.plugins.memory_limit = yaml::ReadByteSize(node, layer.source, "plugins.memory_limit");
       },
       [](const DaemonConfig& c) {
         return c.plugins.memory_limit == 0 ? Json(0)
                                            : Json(FormatByteSize(c.plugins.memory_limit));
       }},

      Reloadable(PathListKey("workflows.paths", &DaemonConfig::workflows, &WorkflowsConfig::paths)),

      Reloadable(StringKey("log.level", &DaemonConfig::log, &LogConfig::level, false)),
      StringKey("log.format", &DaemonConfig::log, &LogConfig::format, false),

      StringKey("metrics.listen", &DaemonConfig::metrics, &MetricsConfig::listen, true),
      DurationKey("metrics.backlog_interval", &DaemonConfig::metrics,
                  &MetricsConfig::backlog_interval),

      StringKey("health.listen", &DaemonConfig::health, &HealthConfig::listen, true),
      DurationKey("health.grace", &DaemonConfig::health, &HealthConfig::grace),

      DurationKey("maintenance.reaper_interval", &DaemonConfig::maintenance,
                  &MaintenanceConfig::reaper_interval),
      IntKey("maintenance.crash_limit", &DaemonConfig::maintenance, &MaintenanceConfig::crash_limit,
             1, kMaxCrashLimit),
      DurationKey("maintenance.retention", &DaemonConfig::maintenance,
                  &MaintenanceConfig::retention),

      Reloadable(QueueLimitsKey()),

      Reloadable({"schedules",
                  [](const YAML::Node& node, const Layer& layer, DaemonConfig& c) {
                    yaml::LineMap lines;
                    c.schedules = ParseSchedules(node, layer.source, lines);
                    c.schedules_declared = true;
                  },
                  [](const DaemonConfig& c) -> Json {
                    if (!c.schedules_declared) return nullptr;
                    Json out = Json::array();
                    for (const ScheduleDefinition& s : c.schedules) {
                      out.push_back({{"name", s.name},
                                     {"workflow", s.workflow},
                                     {"cron", s.cron},
                                     {"enabled", s.enabled}});
                    }
                    return out;
                  },
                  true}),
  };
  return kKeys;
}

std::string EnvironmentName(const std::string& path) {
  std::string name = "CAIRN_";
  for (const char c : path) {
    name += c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return name;
}

const std::vector<std::pair<std::string, std::string>>& EnvironmentAliases() {
  static const std::vector<std::pair<std::string, std::string>> kAliases = {
      {"CAIRN_SCHEMA", "database.schema"},
      {"CAIRN_CONCURRENCY", "worker.concurrency"},
  };
  return kAliases;
}

}  // namespace cairn::config
