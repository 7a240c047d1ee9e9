// `cairn run`: the daemon. Wires configuration, plugins, definitions and the
// worker together, pushing each component's stop on a StopStack as it starts
// it, then waits for signals on the main thread: SIGTERM/SIGINT unwind the
// stack gracefully (a second one exits at once), SIGHUP re-reads the log
// level and the schedules.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <iostream>
#include <memory>
#include <thread>

#include "cli.hpp"
#include "config.hpp"
#include "definition.hpp"
#include "logging.hpp"
#include "metrics.hpp"
#include "metrics_server.hpp"
#include "plugin_catalog.hpp"
#include "schedule_service.hpp"
#include "stop_stack.hpp"
#include "worker.hpp"

namespace cairn::cli {

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
  DaemonConfig config =
      vm.count("config") ? LoadConfig(vm["config"].as<std::string>()) : DaemonConfig{};
  ApplyEnvironment(config);
  if (vm.count("database-url")) config.database.url = vm["database-url"].as<std::string>();
  if (vm.count("schema")) config.database.schema = vm["schema"].as<std::string>();
  if (vm.count("concurrency")) config.worker.concurrency = vm["concurrency"].as<int>();
  if (vm.count("worker-id")) config.worker.id = vm["worker-id"].as<std::string>();
  if (vm.count("log-level")) config.log.level = vm["log-level"].as<std::string>();
  ValidateConfig(config);
  return config;
}

store::ConnectionOptions ConnectionFor(const DaemonConfig& config, const std::string& name) {
  store::ConnectionOptions options;
  options.url = config.database.url;
  options.schema = config.database.schema;
  options.application_name = name;
  return options;
}

std::unique_ptr<PluginCatalog> LoadPlugins(const DaemonConfig& config) {
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
  options.processes.log_level = config.log.level;
  options.processes.log_format = config.log.format;
  options.processes.memory_limit = config.plugins.memory_limit;
  return std::make_unique<PluginCatalog>(std::move(options));
}

DefinitionSet LoadWorkflows(const DaemonConfig& config, const StepCatalog& plugins) {
  DefinitionSet definitions = LoadDefinitionSet(config.workflows.paths);
  ValidateSteps(definitions,
                [&](const std::string& step) { return plugins.Find(step) != nullptr; });
  return definitions;
}

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

  std::unique_ptr<PluginCatalog> plugins = LoadPlugins(config);
  DefinitionSet definitions = LoadWorkflows(config, *plugins);
  if (definitions.empty()) {
    throw InvalidArgumentError("no workflow definitions found in workflows.paths");
  }

  WorkerOptions worker_options;
  worker_options.connection = ConnectionFor(config, "cairn run");
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
  worker_options.poll_interval = config.worker.poll_interval;
  worker_options.lease = config.worker.lease;
  worker_options.reaper_interval = config.maintenance.reaper_interval;
  worker_options.crash_limit = config.maintenance.crash_limit;
  worker_options.retention = config.maintenance.retention;
  worker_options.shutdown_grace = config.worker.shutdown_grace;
  worker_options.listen = config.worker.listen;

  spdlog::info("cairn {} starting: database {} schema {}, {} plugins, {} workflows", CAIRN_VERSION,
               RedactDatabaseUrl(config.database.url), config.database.schema,
               plugins->List().size(), definitions.size());
  StopStack stops;
  // Metrics listen before the worker claims anything: a bad metrics.listen
  // is a start-up error, not a daemon that already holds runs.
  std::unique_ptr<Metrics> metrics;
  std::unique_ptr<MetricsServer> metrics_server;
  if (!config.metrics.listen.empty()) {
    metrics = std::make_unique<Metrics>(config.worker.poll_interval);
    worker_options.metrics = metrics.get();
    metrics_server =
        std::make_unique<MetricsServer>(MetricsServerOptions{config.metrics.listen}, *metrics);
    metrics_server->Start();
    stops.Push("metrics server", [&] { metrics_server->Stop(); });
  }
  // Recurring schedules: the declared list is synced before any claim (a
  // config without `schedules:` leaves the table alone); every daemon fires
  // due ticks, each tick exactly once across the fleet.
  ScheduleServiceOptions schedule_options;
  schedule_options.connection = ConnectionFor(config, "cairn run");
  schedule_options.interval = config.worker.poll_interval;
  ScheduleService schedules(schedule_options);
  if (config.schedules_declared) schedules.Sync(config.schedules);
  Worker worker(worker_options, definitions, *plugins);
  worker.Start();
  bool clean = true;  // false: steps still ran when the grace period ended
  stops.Push("worker", [&] { clean = worker.Stop(); });
  schedules.Start();
  stops.Push("schedule service", [&] { schedules.Stop(); });
  if (metrics) {
    // Pushed last so it runs first: /healthz says 503 while the rest drains.
    stops.Push("health", [&] { metrics->MarkStopping(); });
  }
  sd_notify(0, "READY=1\nSTATUS=claiming work");

  uint64_t watchdog_usec = 0;
  const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0;
  const auto tick =
      watchdog ? std::chrono::microseconds(watchdog_usec / 2) : std::chrono::microseconds(1000000);
  while (true) {
    timespec timeout{static_cast<time_t>(tick.count() / 1000000),
                     static_cast<long>((tick.count() % 1000000) * 1000)};
    int signal = sigtimedwait(&signals, nullptr, &timeout);
    if (signal < 0) {
      if (watchdog) sd_notify(0, "WATCHDOG=1");
      continue;
    }
    if (signal == SIGHUP) {
      try {
        DaemonConfig reloaded = LoadDaemonConfig(vm);
        SetLogLevel(reloaded.log.level);
        if (reloaded.schedules_declared) schedules.Sync(reloaded.schedules);
        spdlog::info("SIGHUP: log level is now {}", reloaded.log.level);
      } catch (const std::exception& e) {
        spdlog::error("SIGHUP: configuration not reloaded: {}", e.what());
      }
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
  spdlog::shutdown();
  if (!clean) {
    // Steps still running belong to detached threads: leave without running
    // destructors under their feet.
    std::cout.flush();
    std::_Exit(kExitOk);
  }
  return kExitOk;
}

}  // namespace cairn::cli
