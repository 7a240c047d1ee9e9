// `cairn bench`: measures steps per second of a workflow through a real
// in-process worker, against a baseline measured in the same run on the same
// server: bare checkpoints (one OCC update with its audit event, one
// statement each, through the store, with as many connections as slots). The ratio is
// what the engine keeps of the database's own commit rate; machines are
// noisy, ratios much less so.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <iostream>
#include <thread>

#include "cli.hpp"
#include "definition.hpp"
#include "migrate.hpp"
#include "worker.hpp"

namespace cairn::cli {

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Checkpoint transactions per second: `threads` connections each commit
// `per_thread` checkpoints of their own run, with one audit event each.
double MeasureBaseline(const store::ConnectionOptions& options, const WorkflowDefinition& workflow,
                       int threads, int per_thread) {
  std::vector<std::thread> workers;
  std::atomic<bool> failed{false};
  auto started = Clock::now();
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      try {
        store::Connection connection(options);
        NewRun seed;
        seed.workflow = "cairn_bench_baseline";
        seed.definition_hash = workflow.hash;
        seed.definition_version = workflow.version;
        seed.cursor = workflow.FirstStep();
        Run run =
            connection.Transact([&](store::Tx& tx) { return store::CreateRun(tx, seed).run; });
        int64_t version = run.version;
        for (int i = 0; i < per_thread; ++i) {
          Checkpoint checkpoint;
          checkpoint.run_id = run.id;
          checkpoint.expected_version = version;
          checkpoint.context = {{"i", i}};
          checkpoint.cursor = workflow.FirstStep();
          checkpoint.status = RunStatus::kRunning;
          checkpoint.lease_owner = "baseline";
          RunEvent event;
          event.run_id = run.id;
          event.kind = "step_committed";
          event.step = workflow.FirstStep();
          version = connection.Autocommit([&](store::Tx& tx) {
            return store::SaveCheckpoint(tx, checkpoint, {event}).version;
          });
        }
      } catch (const std::exception& e) {
        spdlog::error("baseline: {}", e.what());
        failed = true;
      }
    });
  }
  for (auto& w : workers) w.join();
  if (failed) throw Error(ErrorKind::kPermanent, "the baseline measurement failed");
  return threads * per_thread / Seconds(Clock::now() - started);
}

}  // namespace

po::options_description BenchOptions() {
  po::options_description options("options");
  options.add_options()("workflow",
                        po::value<std::string>()->value_name("NAME")->default_value("noop3"),
                        "workflow to run (from the config's workflows.paths)")(
      "runs", po::value<int>()->value_name("N")->default_value(2000), "runs to start")(
      "concurrency", po::value<int>()->value_name("N"),
      "executor slots, and connections of the baseline (overrides worker.concurrency)")(
      "baseline-steps", po::value<int>()->value_name("N")->default_value(200),
      "checkpoints per connection in the baseline")(
      "keep",
      "keep the schema afterwards (default: drop it; without --schema it is cairn_bench_<pid>)")(
      "json", "print one JSON object");
  options.add(ConnectionOptions());
  return options;
}

int RunBench(const std::vector<std::string>& args) {
  auto vm = Parse("bench", args);
  DaemonConfig config = LoadDaemonConfig(vm);
  if (!vm.count("schema")) {
    config.database.schema = "cairn_bench_" + std::to_string(getpid());
  }
  spdlog::set_level(spdlog::level::warn);
  std::unique_ptr<PluginCatalog> plugins = LoadPlugins(config);
  DefinitionSet definitions = LoadWorkflows(config, *plugins);
  const WorkflowDefinition* workflow = definitions.Find(vm["workflow"].as<std::string>());
  if (!workflow) {
    throw NotFoundError("workflow " + vm["workflow"].as<std::string>() +
                        " is not in workflows.paths");
  }
  const int runs = vm["runs"].as<int>();
  const int concurrency = config.worker.concurrency;
  auto connection_options = ConnectionFor(config, "cairn bench");
  store::Connection admin(connection_options);
  store::Migrate(admin);

  double baseline =
      MeasureBaseline(connection_options, *workflow, concurrency, vm["baseline-steps"].as<int>());

  WorkerOptions worker_options;
  worker_options.connection = connection_options;
  worker_options.worker_id = "bench:" + std::to_string(getpid());
  worker_options.queues = {workflow->queue};
  worker_options.concurrency = concurrency;
  worker_options.claim_batch = config.EffectiveClaimBatch();
  worker_options.poll_interval = config.worker.poll_interval;
  worker_options.lease = config.worker.lease;
  worker_options.listen = config.worker.listen;
  Worker worker(worker_options, definitions, *plugins);
  worker.Start();  // registers the definitions, so start_run can resolve them

  auto started = Clock::now();
  admin.Transact([&](store::Tx& tx) {
    store::StartRequest request;
    request.workflow = workflow->name;
    for (int i = 0; i < runs; ++i) store::StartRun(tx, request);
  });
  int64_t completed = 0;
  int64_t failed = 0;
  while (completed + failed < runs) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto counts = admin.Transact([&](store::Tx& tx) { return store::CountRuns(tx); });
    completed = counts[RunStatus::kCompleted];
    failed = counts[RunStatus::kFailed];
  }
  double elapsed = Seconds(Clock::now() - started);
  worker.Stop();
  if (!vm.count("keep")) admin.Transact([&](store::Tx& tx) { store::DropSchema(tx); });

  const double steps = static_cast<double>(runs) * workflow->steps.size();
  const double steps_per_second = steps / elapsed;
  Json result = {{"workflow", workflow->name},
                 {"runs", runs},
                 {"steps", steps},
                 {"concurrency", concurrency},
                 {"failed_runs", failed},
                 {"seconds", elapsed},
                 {"steps_per_second", steps_per_second},
                 {"baseline_checkpoints_per_second", baseline},
                 {"ratio_to_baseline", steps_per_second / baseline}};
  if (vm.count("json")) {
    std::cout << result.dump() << "\n";
  } else {
    std::cout << "workflow " << workflow->name << ": " << runs << " runs, " << steps
              << " steps at concurrency " << concurrency << " in " << elapsed << " s\n"
              << "  cairn:    " << static_cast<int64_t>(steps_per_second) << " steps/s\n"
              << "  baseline: " << static_cast<int64_t>(baseline)
              << " bare checkpoint transactions/s\n"
              << "  ratio:    " << steps_per_second / baseline << "\n";
  }
  return failed == 0 ? kExitOk : kExitFailure;
}

}  // namespace cairn::cli
