// The `cairn run` daemons of `cairn bench`: the configuration file each
// gets (the user's, confined to the scratch schema), starting and stopping a
// fleet of them, and waiting for the runs they work and the sessions they end.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>

#include "bench.hpp"

namespace cairn::cli::benchmark {

namespace {

namespace fs = std::filesystem;

std::string Ms(milliseconds duration) { return std::to_string(duration.count()) + "ms"; }

}  // namespace

std::string Bench::DaemonConfigFile(int slots, bool listen, int batch_size) {
  const std::string name = "daemon-" + std::to_string(slots) + "x" + std::to_string(batch_size) +
                           (listen ? "-listen" : "-poll") + ".yaml";
  const fs::path path = temp_->path() / name;
  if (fs::exists(path)) return path.string();
  // The user's configuration, less what would make daemons of one machine
  // collide (HTTP ports) or reach outside the scratch schema (schedules);
  // the queues are the bench workflows'. JSON is YAML.
  std::vector<std::string> plugin_dirs;
  for (const auto& dir : config_.plugins.directories) plugin_dirs.push_back(fs::absolute(dir));
  std::vector<std::string> workflow_paths;
  for (const auto& p : config_.workflows.paths) workflow_paths.push_back(fs::absolute(p));
  std::vector<std::string> queues{Workflow(kThroughputWorkflow).queue};
  if (Workflow(kWaitWorkflow).queue != queues[0]) queues.push_back(Workflow(kWaitWorkflow).queue);
  const Json yaml = {
      {"database",
       {{"schema", config_.database.schema}, {"idle_timeout", Ms(config_.database.idle_timeout)}}},
      {"worker",
       {{"queues", queues},
        {"concurrency", slots},
        {"poll_interval", Ms(config_.worker.poll_interval)},
        {"lease", Ms(config_.worker.lease)},
        {"claim_batch", config_.worker.claim_batch},
        {"batch_size", batch_size},
        {"shutdown_grace", Ms(config_.worker.shutdown_grace)},
        {"listen", listen}}},
      {"plugins",
       {{"directories", plugin_dirs},
        {"isolation", config_.plugins.isolation},
        {"isolation_by_plugin", config_.plugins.isolation_by_plugin},
        {"isolation_by_workflow", config_.plugins.isolation_by_workflow},
        {"memory_limit", std::to_string(config_.plugins.memory_limit)}}},
      {"workflows", {{"paths", workflow_paths}}},
      {"log", {{"level", "warn"}, {"format", "text"}}},
      {"metrics", {{"listen", ""}}},
      {"health", {{"listen", ""}}},
      {"maintenance",
       {{"reaper_interval", Ms(config_.maintenance.reaper_interval)},
        {"crash_limit", config_.maintenance.crash_limit},
        {"retention", Ms(config_.maintenance.retention)}}}};
  return temp_->WritePrivate(name, yaml.dump(2) + "\n");
}

std::unique_ptr<Bench::Daemon> Bench::Spawn(int slots, bool listen, int batch_size) {
  const int n = ++daemon_count_;
  const std::string id = "cairn-bench-" + std::to_string(::getpid()) + "-" + std::to_string(n);
  auto socket =
      std::make_unique<bench::NotifySocket>(temp_->path() / ("notify-" + std::to_string(n)));
  std::vector<std::string> env{"NOTIFY_SOCKET=" + socket->path()};
  if (!config_.database.url.empty()) env.push_back("CAIRN_DATABASE_URL=" + config_.database.url);
  return std::make_unique<Daemon>(
      std::vector<std::string>{executable_, "run", "--config",
                               DaemonConfigFile(slots, listen, batch_size), "--worker-id", id},
      process::ChildEnvironment(env), temp_->path() / (id + ".log"), std::move(socket));
}

void Bench::WaitReady(Daemon& daemon, const std::string& what) {
  const bool ready = daemon.socket().WaitReady(
      std::chrono::minutes(1), [&] { return !Interrupted() && daemon.process().Running(); });
  CheckInterrupted();
  if (!ready) {
    throw Error(ErrorKind::kPermanent, what + " did not report READY=1 within a minute (log " +
                                           daemon.process().output_path() + "):\n" +
                                           daemon.process().OutputTail());
  }
}

Bench::Fleet Bench::StartFleet(int workers, int slots, bool listen, int batch_size) {
  Fleet fleet;
  for (int i = 0; i < workers; ++i) fleet.push_back(Spawn(slots, listen, batch_size));
  for (auto& daemon : fleet) WaitReady(*daemon, "a cairn run of the benchmark");
  return fleet;
}

void Bench::StopFleet(Fleet& fleet) {
  for (auto& daemon : fleet) daemon->process().Signal(SIGTERM);
  for (auto& daemon : fleet) {
    const auto code =
        daemon->process().Wait(config_.worker.shutdown_grace + std::chrono::seconds(10));
    if (code != 0) {
      spdlog::warn("a cairn run of the benchmark ended with {}:\n{}",
                   code ? "exit code " + std::to_string(*code) : std::string("a timeout"),
                   daemon->process().OutputTail());
    }
  }
  fleet.clear();
}

void Bench::WaitForSessions(int64_t before) {
  // Sessions hand their last statistics over as they end; counters are read
  // once the ended ones are gone (bounded: others may come and go).
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    if (admin_->Read([](store::Tx& tx) { return store::bench::ClientSessions(tx); }) <= before) {
      return;
    }
    Sleep(milliseconds(20));
  }
}

int64_t Bench::Total(const UnfinishedRuns& unfinished) {
  int64_t total = 0;
  for (const auto& [status, runs] : unfinished) total += runs;
  return total;
}

void Bench::WaitForRuns(const Json& tag, Fleet& fleet,
                        const std::function<bool(const UnfinishedRuns&)>& done,
                        const std::function<std::string(const UnfinishedRuns&, double)>& state) {
  const auto started = Clock::now();
  auto moved = Clock::now();
  UnfinishedRuns last;
  while (true) {
    auto counts =
        admin_->Read([&](store::Tx& tx) { return store::bench::UnfinishedRunsOfPhase(tx, tag); });
    if (counts != last) moved = Clock::now();
    progress_.Update(state(counts, Seconds(Clock::now() - started)));
    if (done(counts)) return;
    last = std::move(counts);
    for (auto& daemon : fleet) {
      if (!daemon->process().Running()) {
        throw Error(ErrorKind::kPermanent, "a cairn run of the benchmark exited (log " +
                                               daemon->process().output_path() + "):\n" +
                                               daemon->process().OutputTail());
      }
    }
    if (Clock::now() - moved > std::chrono::minutes(2)) {
      throw Error(ErrorKind::kPermanent,
                  "no run of the benchmark moved for two minutes; the daemons' logs are in " +
                      temp_->path().string());
    }
    Sleep(milliseconds(200));
  }
}

std::vector<std::string> Bench::StartRuns(const char* workflow, const Json& tag, int count) {
  store::StartRequest request;
  request.workflow = workflow;
  request.input = tag;
  std::vector<std::string> ids;
  ids.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    if (i % 100 == 0) CheckInterrupted();
    // One start per transaction, as an application starts them.
    ids.push_back(admin_->connection().Autocommit(
        [&](store::Tx& tx) { return store::StartRun(tx, request).id; }));
  }
  return ids;
}

}  // namespace cairn::cli::benchmark
