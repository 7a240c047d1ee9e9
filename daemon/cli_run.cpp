// `cairn run`: the daemon. Wires configuration, plugins, definitions, the
// worker, metrics and the health endpoints together, pushing each
// component's stop on a StopStack as it starts it, then waits for signals on
// the main thread: SIGTERM/SIGINT unwind the stack gracefully (a second one
// exits at once), SIGHUP reloads the log level, queues, concurrency,
// workflow definitions, schedules and queue limits without stopping (bracketed by
// RELOADING=1 and READY=1; STATUS= says what the worker is doing). The
// systemd watchdog is pinged from the main thread while the worker's loops
// come round (its Health), so systemd restarts a wedged daemon.
#include <signal.h>
#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include <atomic>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "backlog_monitor.hpp"
#include "cairn/plugin.h"
#include "cli.hpp"
#include "config.hpp"
#include "definition.hpp"
#include "http_server.hpp"
#include "logging.hpp"
#include "metrics.hpp"
#include "migrate.hpp"
#include "plugin_catalog.hpp"
#include "queue_limits.hpp"
#include "schedule_service.hpp"
#include "stop_stack.hpp"
#include "worker.hpp"

namespace cairn::cli {

namespace {

// Counts the daemon's database sessions and errors in its metrics.
class SessionMetrics : public store::SessionObserver {
 public:
  explicit SessionMetrics(Metrics& metrics) : metrics_(metrics) {}
  void Opened() override { metrics_.SetDatabaseConnections(++open_); }
  void Closed() override { metrics_.SetDatabaseConnections(--open_); }
  void Failed(ErrorKind kind) override {
    metrics_.DatabaseError(kind == ErrorKind::kTransient ? "transient"
                           : kind == ErrorKind::kInDoubt ? "in_doubt"
                                                         : "permanent");
  }

 private:
  Metrics& metrics_;
  std::atomic<int64_t> open_{0};
};

HttpResponse Text(int status, const std::string& body) {
  return {status, "text/plain; charset=utf-8", body + "\n"};
}

// The HTTP servers of the daemon: one per distinct address among
// metrics.listen (/metrics) and health.listen (/healthz, /readyz).
std::vector<std::unique_ptr<HttpServer>> HttpServers(const DaemonConfig& config, Metrics* metrics,
                                                     Health& health) {
  struct Site {
    std::string key;
    std::map<std::string, HttpHandler> routes;
  };
  std::map<std::string, Site> sites;
  if (metrics != nullptr) {
    Site& site = sites[config.metrics.listen];
    site.key = "metrics.listen";
    site.routes["/metrics"] = [metrics] {
      return HttpResponse{200, std::string(kMetricsContentType), metrics->Render()};
    };
  }
  if (!config.health.listen.empty()) {
    Site& site = sites[config.health.listen];
    site.key = site.key.empty() ? "health.listen" : site.key + " and health.listen";
    site.routes["/healthz"] = [&health] {
      const auto liveness = health.CheckLiveness();
      return Text(liveness.healthy ? 200 : 503, liveness.Detail());
    };
    site.routes["/readyz"] = [&health] {
      const auto readiness = health.CheckReadiness();
      return Text(readiness.ready ? 200 : 503, readiness.detail);
    };
  }
  std::vector<std::unique_ptr<HttpServer>> servers;
  for (auto& [listen, site] : sites) {
    HttpServerOptions options;
    options.listen = listen;
    options.key = site.key;
    servers.push_back(std::make_unique<HttpServer>(options, std::move(site.routes)));
  }
  return servers;
}

}  // namespace

po::options_description DaemonOptions() {
  po::options_description options("options");
  options.add_options()("concurrency", po::value<int>()->value_name("N"),
                        "executor slots (overrides worker.concurrency)")(
      "worker-id", po::value<std::string>()->value_name("ID"), "worker id (overrides worker.id)")(
      "log-level", po::value<std::string>()->value_name("LEVEL"),
      "trace, debug, info, warn or error (overrides log.level)");
  options.add(ConnectionOptions());
  return options;
}

DaemonConfig LoadDaemonConfig(const po::variables_map& vm) {
  ConfigSources sources;
  if (vm.count("config")) sources.file = vm["config"].as<std::string>();
  sources.env = ProcessEnvironment();
  // The flags a subcommand has, as the last layer.
  auto flag = [&](const std::string& name, const std::string& path) {
    if (vm.count(name) == 0) return;
    const auto& value = vm[name].value();
    const std::string text = value.type() == typeid(int) ? std::to_string(vm[name].as<int>())
                                                         : vm[name].as<std::string>();
    sources.flags.push_back({"--" + name, path, text});
  };
  flag("database-url", "database.url");
  flag("schema", "database.schema");
  flag("concurrency", "worker.concurrency");
  flag("worker-id", "worker.id");
  flag("log-level", "log.level");
  return cairn::LoadDaemonConfig(sources);
}

store::ConnectionOptions ConnectionFor(const DaemonConfig& config, const std::string& name) {
  store::ConnectionOptions options;
  options.url = config.database.url;
  options.schema = config.database.schema;
  options.application_name = name;
  return options;
}

DefinitionSet ReadWorkflows(const DaemonConfig& config) {
  DefinitionSet definitions = LoadDefinitionSet(config.workflows.paths);
  for (const auto& entry : config.plugins.isolation_by_workflow) {
    const std::string& workflow = entry.first;
    if (definitions.Find(workflow) == nullptr) {
      FailConfigKey(
          config, "plugins.isolation_by_workflow." + workflow,
          "names workflow \"" + workflow + "\", which no workflow file of workflows.paths defines");
    }
  }
  return definitions;
}

std::unique_ptr<PluginCatalog> LoadPlugins(const DaemonConfig& config,
                                           const DefinitionSet& definitions) {
  PluginCatalogOptions options;
  for (const auto& directory : config.plugins.directories) {
    options.paths.push_back(directory.string());
  }
  auto isolation = [](const std::string& name) {
    return name == "thread" ? Isolation::kThread : Isolation::kProcess;
  };
  options.isolation = isolation(config.plugins.isolation);
  for (const auto& [plugin, name] : config.plugins.isolation_by_plugin) {
    options.by_plugin[plugin] = isolation(name);
  }
  for (const auto& [workflow, name] : config.plugins.isolation_by_workflow) {
    options.by_workflow[workflow] = isolation(name);
  }
  for (const WorkflowDefinition* workflow : definitions.All()) {
    std::set<std::string>& steps = options.workflow_steps[workflow->name];
    for (const StepDefinition& step : workflow->steps) {
      steps.insert(step.run);
      if (step.compensate) steps.insert(*step.compensate);
    }
  }
  options.processes.log_level = config.log.level;
  options.processes.log_format = config.log.format;
  options.processes.memory_limit = config.plugins.memory_limit;
  try {
    return std::make_unique<PluginCatalog>(std::move(options));
  } catch (const PluginError& e) {
    // Say which layer of the configuration named the plugin at fault.
    const std::string message = e.what();
    const std::string key = message.rfind("plugins.isolation_by_plugin", 0) == 0
                                ? "plugins.isolation_by_plugin"
                                : "plugins.directories";
    const auto origin = config.origins.find(key);
    throw PluginError((origin == config.origins.end() ? "default" : origin->second.Text()) + ": " +
                      (key == "plugins.directories" ? key + ": " : "") + message);
  }
}

void CheckWorkflowSteps(const DefinitionSet& definitions, const PluginCatalog& plugins) {
  ValidateSteps(definitions, [&](const std::string& workflow, const std::string& step) {
    return plugins.Unrunnable(step, workflow);
  });
}

PluginsAndWorkflows LoadPluginsAndWorkflows(const DaemonConfig& config) {
  PluginsAndWorkflows loaded;
  loaded.definitions = ReadWorkflows(config);
  loaded.plugins = LoadPlugins(config, loaded.definitions);
  CheckWorkflowSteps(loaded.definitions, *loaded.plugins);
  return loaded;
}

namespace {

void Notify(const std::string& state) { sd_notify(0, state.c_str()); }

uint64_t MonotonicMicros() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000 + static_cast<uint64_t>(now.tv_nsec) / 1000;
}

// What systemctl status shows on the daemon's STATUS= line.
std::string StatusOf(const Worker& worker) {
  const auto [busy, slots] = worker.Busy();
  const WorkerStats stats = worker.Stats();
  return fmt::format("{} of {} slots running steps; {} runs claimed since start", busy, slots,
                     stats.claimed);
}

// Makes the fleet's queue_limits table match the configuration's
// `queue_limits:` section; a configuration without it leaves the table alone.
void SyncDeclaredQueueLimits(const DaemonConfig& config,
                             const store::ConnectionOptions& connection_options) {
  if (!config.queue_limits_declared) return;
  std::vector<store::QueueLimit> declared;
  for (const auto& [queue, limit] : config.queue_limits) {
    declared.push_back({queue, limit.max_running, limit.rate_per_second, limit.burst});
  }
  store::Connection connection(connection_options);
  SyncQueueLimits(connection, declared);
}

// SIGHUP: reads every layer again and applies what may change while runs
// are in flight, saying which other changes wait for a restart. Throws,
// having changed nothing, when the configuration or a workflow file is
// invalid. Returns what the daemon now runs with.
std::string ReloadDaemon(const po::variables_map& vm, const DaemonConfig& running,
                         const PluginCatalog& plugins, Worker& worker, ScheduleService& schedules,
                         const store::ConnectionOptions& connection_options) {
  const DaemonConfig reloaded = LoadDaemonConfig(vm);
  // Checked against the reloaded configuration, so that the files would
  // also start a daemon; run as the running catalog says (isolation is not
  // reloadable).
  DefinitionSet definitions = ReadWorkflows(reloaded);
  CheckWorkflowSteps(definitions, plugins);
  if (definitions.empty()) {
    throw InvalidArgumentError("no workflow definitions found in workflows.paths");
  }
  const Json before = ShowConfig(running);
  const Json after = ShowConfig(reloaded);
  for (size_t i = 0; i < before.size() && i < after.size(); ++i) {
    if (!before[i]["reloadable"].get<bool>() && before[i]["value"] != after[i]["value"]) {
      spdlog::warn("SIGHUP: {} changed; it takes effect when the daemon restarts",
                   before[i]["key"].get<std::string>());
    }
  }
  const size_t definition_count = definitions.size();
  worker.Reload({reloaded.worker.queues, reloaded.EffectiveConcurrency(),
                 reloaded.EffectiveClaimBatch(), reloaded.worker.batch_size,
                 std::move(definitions)});
  SetLogLevel(reloaded.log.level);
  if (reloaded.schedules_declared) schedules.Sync(reloaded.schedules);
  SyncDeclaredQueueLimits(reloaded, connection_options);
  return fmt::format("log level {}, queues [{}], {} slots, {} definitions", reloaded.log.level,
                     fmt::join(reloaded.worker.queues, ", "), reloaded.EffectiveConcurrency(),
                     definition_count);
}

}  // namespace

int RunDaemon(const std::vector<std::string>& args) {
  // Signals are blocked before any thread starts so that only the main
  // thread's sigtimedwait sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto vm = Parse("run", args);
  DaemonConfig config = LoadDaemonConfig(vm);
  SetUpLogging(LogSettings{config.log.level, config.log.format});

  // Metrics count the sessions and errors of every connection of the daemon.
  std::unique_ptr<Metrics> metrics;
  std::shared_ptr<store::SessionObserver> session_metrics;
  if (!config.metrics.listen.empty()) {
    metrics = std::make_unique<Metrics>();
    metrics->SetBuildInfo(CAIRN_VERSION,
                          std::to_string(CAIRN_ABI_MAJOR) + "." + std::to_string(CAIRN_ABI_MINOR),
                          std::to_string(store::ShippedSchemaVersion()));
    session_metrics = std::make_shared<SessionMetrics>(*metrics);
  }
  auto daemon_connection = [&] {
    store::ConnectionOptions options = ConnectionFor(config, "cairn run");
    options.observer = session_metrics;
    return options;
  };

  WorkerOptions worker_options;
  worker_options.connection = daemon_connection();
  worker_options.worker_id = config.EffectiveWorkerId();
  worker_options.version = CAIRN_VERSION;
  worker_options.queues = config.worker.queues;
  worker_options.concurrency = config.EffectiveConcurrency();
  if (worker_options.concurrency < config.worker.concurrency) {
    spdlog::warn(
        "database.pool_size {} leaves room for {} slots: running {} of the {} that "
        "worker.concurrency asks for",
        config.EffectivePoolSize(), worker_options.concurrency, worker_options.concurrency,
        config.worker.concurrency);
  }
  worker_options.connection_budget = config.EffectivePoolSize();
  worker_options.idle_timeout = config.database.idle_timeout;
  worker_options.claim_batch = config.EffectiveClaimBatch();
  worker_options.batch_size = config.worker.batch_size;
  worker_options.poll_interval = config.worker.poll_interval;
  worker_options.lease = config.worker.lease;
  worker_options.reaper_interval = config.maintenance.reaper_interval;
  worker_options.crash_limit = config.maintenance.crash_limit;
  worker_options.retention = config.maintenance.retention;
  worker_options.shutdown_grace = config.worker.shutdown_grace;
  worker_options.listen = config.worker.listen;
  worker_options.metrics = metrics.get();
  worker_options.health.grace = config.health.grace;

  // The database session the worker starts on is opened while the step
  // process loads the plugins: both are new processes, and READY=1 waited
  // for one after the other. A plugin or workflow error still comes first;
  // it waits for the connection attempt to end.
  std::future<std::unique_ptr<store::Connection>> start_session = std::async(
      std::launch::async, [&worker_options] { return Worker::OpenStartSession(worker_options); });
  PluginsAndWorkflows loaded = LoadPluginsAndWorkflows(config);
  const DefinitionSet& definitions = loaded.definitions;
  const std::unique_ptr<PluginCatalog>& plugins = loaded.plugins;
  if (definitions.empty()) {
    throw InvalidArgumentError("no workflow definitions found in workflows.paths");
  }

  spdlog::info("cairn {} starting: database {} schema {}, {} plugins, {} workflows", CAIRN_VERSION,
               RedactDatabaseUrl(config.database.url), config.database.schema,
               plugins->List().size(), definitions.size());
  StopStack stops;
  // Unwound last: the warm-up may still be starting step processes, and
  // they log.
  if (plugins->processes() != nullptr) {
    stops.Push("step process warm-up", [&plugins] { plugins->processes()->StopWarmUp(); });
  }
  Worker worker(worker_options, definitions, *plugins);
  if (metrics) {
    metrics->OnScrape([&worker, &m = *metrics] {
      m.SetWorkerHealth(worker.health().CheckLiveness().healthy,
                        worker.health().CheckReadiness().ready);
    });
  }
  // HTTP listens before the worker claims anything: a bad metrics.listen or
  // health.listen is a start-up error, not a daemon that already holds runs.
  auto servers = HttpServers(config, metrics.get(), worker.health());
  for (auto& server : servers) {
    server->Start();
    stops.Push("http server", [&server] { server->Stop(); });
  }
  for (const auto& server : servers) {
    spdlog::info("http: serving on http://{}", server->address());
  }
  // Recurring schedules: the declared list is synced before any claim (a
  // config without `schedules:` leaves the table alone); every daemon fires
  // due ticks, each tick exactly once across the fleet.
  ScheduleServiceOptions schedule_options;
  schedule_options.connection = daemon_connection();
  schedule_options.interval = config.worker.poll_interval;
  schedule_options.metrics = metrics.get();
  ScheduleService schedules(schedule_options);
  if (config.schedules_declared) schedules.Sync(config.schedules);
  // Queue limits hold before this daemon claims anything.
  SyncDeclaredQueueLimits(config, daemon_connection());
  worker.Start(start_session.get());
  bool clean = true;  // false: steps still ran when the grace period ended
  stops.Push("worker", [&] { clean = worker.Stop(); });
  schedules.Start();
  stops.Push("schedule service", [&] { schedules.Stop(); });
  std::unique_ptr<BacklogMonitor> backlog;
  if (metrics) {
    BacklogMonitorOptions backlog_options;
    backlog_options.service.connection = daemon_connection();
    backlog_options.service.interval = config.metrics.backlog_interval;
    backlog = std::make_unique<BacklogMonitor>(backlog_options, *metrics);
    backlog->Start();
    stops.Push("backlog monitor", [&] { backlog->Stop(); });
  }
  // Pushed last so it runs first: /readyz says 503 while the rest drains.
  stops.Push("health", [&] { worker.health().MarkDraining(); });
  sd_notify(0, "READY=1\nSTATUS=claiming work");
  // A step process per slot, started once the daemon is ready: launching
  // them took the CPU the start-up needed, and they made READY=1 three
  // times later. A step that comes before its process starts one itself.
  if (plugins->processes() != nullptr) {
    plugins->processes()->KeepReady(config.EffectiveConcurrency());
  }

  uint64_t watchdog_usec = 0;
  const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0;
  const auto tick =
      watchdog ? std::chrono::microseconds(watchdog_usec / 2) : std::chrono::microseconds(1000000);
  bool watchdog_withheld = false;
  std::string status;
  while (true) {
    timespec timeout{static_cast<time_t>(tick.count() / 1000000),
                     static_cast<long>((tick.count() % 1000000) * 1000)};
    int signal = sigtimedwait(&signals, nullptr, &timeout);
    if (signal < 0) {
      if (std::string now = StatusOf(worker); now != status) {
        status = std::move(now);
        Notify("STATUS=" + status);
      }
      if (!watchdog) continue;
      // Pinged only while the loops come round: a wedged daemon is restarted.
      const auto liveness = worker.health().CheckLiveness();
      if (liveness.healthy) {
        sd_notify(0, "WATCHDOG=1");
        if (watchdog_withheld) spdlog::info("watchdog: the loops come round again; pinging");
        watchdog_withheld = false;
      } else if (!watchdog_withheld) {
        spdlog::error("watchdog: not pinging systemd: {}", liveness.Detail());
        watchdog_withheld = true;
      }
      continue;
    }
    if (signal == SIGHUP) {
      Notify(fmt::format("RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading the configuration",
                         MonotonicMicros()));
      try {
        spdlog::info("SIGHUP: reloaded: {}",
                     ReloadDaemon(vm, config, *plugins, worker, schedules, daemon_connection()));
      } catch (const std::exception& e) {
        spdlog::error("SIGHUP: configuration not reloaded, the daemon goes on as it was: {}",
                      e.what());
      }
      Notify("READY=1\nSTATUS=" + StatusOf(worker));
      continue;
    }
    break;
  }

  spdlog::info("stopping: no new claims; steps in flight finish within {} ms",
               worker_options.shutdown_grace.count());
  sd_notify(0, "STOPPING=1\nSTATUS=draining");
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    stops.Unwind();
    stopped = true;
  });
  // A second SIGTERM or SIGINT exits at once; leases expire on their own.
  while (!stopped.load()) {
    timespec poll{0, 100 * 1000 * 1000};
    int signal = sigtimedwait(&signals, nullptr, &poll);
    if (signal == SIGTERM || signal == SIGINT) {
      spdlog::warn("second stop signal: exiting now");
      spdlog::shutdown();
      std::_Exit(kExitFailure);
    }
  }
  stopper.join();
  if (!clean) {
    // Steps still running belong to detached threads: leave without running
    // destructors under their feet.
    spdlog::shutdown();
    std::cout.flush();
    std::_Exit(kExitOk);
  }
  // The loggers stay: the destructors of what this function holds may log.
  spdlog::default_logger()->flush();
  return kExitOk;
}

}  // namespace cairn::cli
