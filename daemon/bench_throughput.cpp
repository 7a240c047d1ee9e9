// The throughput phases of `cairn bench`: tagged runs drained by a fleet of
// daemons, pgbench's ceiling at the same number of sessions, and starts one
// per transaction and in bulk, each with its commits and WAL per unit.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <latch>
#include <mutex>
#include <thread>

#include "bench.hpp"

namespace cairn::cli::benchmark {

Bench::Throughput Bench::MeasureThroughput(int round, int workers, int slots, int batch_size) {
  Throughput result;
  result.round = round;
  result.workers = workers;
  result.slots = slots;
  result.batch_size = batch_size;
  progress_.Begin(kThroughputWorkflow + std::string(", ") + RowName(result));
  // Each round's runs apart from the others', whose window is long over.
  const Json tag = {{"cairn_bench", "throughput " + std::to_string(workers) + "x" +
                                        std::to_string(slots) + "x" + std::to_string(batch_size) +
                                        " round " + std::to_string(round)}};
  SettleServer();
  const auto before_start = admin_->Snapshot();
  progress_.Update("starting " + std::to_string(settings_.runs) + " runs");
  StartRuns(kThroughputWorkflow, tag, settings_.runs);
  const auto before_drain = admin_->Snapshot();
  const int64_t sessions =
      admin_->Read([](store::Tx& tx) { return store::bench::ClientSessions(tx); });
  const auto spawned = Clock::now();
  Fleet fleet = StartFleet(workers, slots, true, batch_size);
  const int64_t steps_per_run = static_cast<int64_t>(Workflow(kThroughputWorkflow).steps.size());
  WaitForRuns(
      tag, fleet, [](const UnfinishedRuns& unfinished) { return Total(unfinished) == 0; },
      [&](const UnfinishedRuns& unfinished, double seconds) {
        const int64_t ended = settings_.runs - Total(unfinished);
        return std::to_string(ended) + "/" + std::to_string(settings_.runs) + " runs, ~" +
               bench::FormatRate(static_cast<double>(ended * steps_per_run) /
                                 std::max(seconds, 0.001)) +
               " steps/s";
      });
  const double wall = Seconds(Clock::now() - spawned);
  StopFleet(fleet);
  WaitForSessions(sessions);
  const auto after = admin_->Snapshot();
  const auto counts =
      admin_->Read([&](store::Tx& tx) { return store::bench::PhaseStatus(tx, tag); });
  if (counts.count(RunStatus::kFailed) != 0) {
    throw Error(ErrorKind::kPermanent, std::to_string(counts.at(RunStatus::kFailed)) +
                                           " runs of the benchmark failed; see cairn history in "
                                           "the schema (kept with --keep)");
  }
  const auto window =
      admin_->Read([&](store::Tx& tx) { return store::bench::ReadPhaseWindow(tx, tag); });
  result.runs = settings_.runs;
  result.steps = window.steps;
  result.seconds = std::max(window.seconds, 1e-6);
  result.wall_seconds = wall;
  result.draining = Cost(before_drain, after, window.steps);
  result.with_start = Cost(before_start, after, window.steps);
  progress_.End(bench::FormatRate(static_cast<double>(result.steps) / result.seconds) + " steps/s");
  return result;
}

Bench::PgbenchRun Bench::RunPgbenchStep(int clients, int64_t per_client,
                                        const std::vector<std::string>& options,
                                        const std::string& name) {
  // Enough due runs that no client ever finds none: the others hold at most
  // clients - 1 of them locked.
  const auto& workflow = Workflow(kThroughputWorkflow);
  const int64_t steps_per_run = static_cast<int64_t>(workflow.steps.size());
  store::bench::RunFill fill;
  fill.count =
      static_cast<int>((per_client * clients + steps_per_run - 1) / steps_per_run + clients);
  fill.workflow = workflow.name;
  fill.definition_version = workflow.version;
  fill.definition_hash = workflow.hash;
  fill.queue = store::bench::kPgbenchQueue;
  fill.cursor = workflow.FirstStep();
  SettleServer();
  admin_->connection().Transact([&](store::Tx& tx) { store::bench::FillRuns(tx, fill); });
  const int64_t sessions =
      admin_->Read([](store::Tx& tx) { return store::bench::ClientSessions(tx); });
  const auto before = admin_->Snapshot();
  const int threads = std::max(
      1,
      std::min<int>(clients, static_cast<int>(std::max(1U, std::thread::hardware_concurrency()))));
  std::vector<std::string> argv{pgbench_,
                                "--no-vacuum",
                                "--protocol=prepared",
                                "--client=" + std::to_string(clients),
                                "--jobs=" + std::to_string(threads),
                                "--transactions=" + std::to_string(per_client),
                                "--file=" + pgbench_script_};
  argv.insert(argv.end(), options.begin(), options.end());
  // The URL goes by the environment (pgbench expands a connection string
  // in PGDATABASE): a password on the command line would show in ps.
  std::vector<std::string> env;
  if (!config_.database.url.empty()) env.push_back("PGDATABASE=" + config_.database.url);
  std::optional<int> code;
  process::ChildProcess pgbench(argv, process::ChildEnvironment(env), temp_->path() / name);
  progress_.Update(std::to_string(per_client * clients) + " steps");
  while (!(code = pgbench.Wait(milliseconds(100)))) CheckInterrupted();
  const auto summary = bench::ParsePgbenchSummary(pgbench.OutputTail(100000));
  if (*code != 0 || !summary || summary->failed != 0 || summary->transactions <= 0) {
    throw Error(ErrorKind::kPermanent, "pgbench failed (" + pgbench_ + ", exit code " +
                                           std::to_string(*code) + "):\n" + pgbench.OutputTail());
  }
  WaitForSessions(sessions);
  return {*summary, Cost(before, admin_->Snapshot(), summary->transactions)};
}

size_t Bench::MeasurePgbench(int clients, const std::string& after) {
  progress_.Begin("pgbench step, " + std::to_string(clients) +
                  (clients == 1 ? " session" : " sessions") + ", after " + after);
  const int64_t steps_per_run = static_cast<int64_t>(Workflow(kThroughputWorkflow).steps.size());
  const int64_t wanted = std::max<int64_t>(int64_t{settings_.runs} * steps_per_run, clients);
  const int64_t per_client = (wanted + clients - 1) / clients;
  const PgbenchRun run = RunPgbenchStep(clients, per_client, {},
                                        "pgbench-" + std::to_string(pgbench_runs_.size()) + ".log");
  Pgbench result;
  result.clients = clients;
  result.after = after;
  result.steps = run.summary.transactions;
  result.tps = run.summary.tps;
  result.cost = run.cost;
  progress_.End(bench::FormatRate(result.tps) + " steps/s");
  pgbench_runs_.push_back(std::move(result));
  return pgbench_runs_.size() - 1;
}

Bench::StepLatency Bench::MeasureStepLatency() {
  const int64_t spacing = settings_.signal_spacing.count();
  progress_.Begin("pgbench step latency, 1 session, one step every " + std::to_string(spacing) +
                  " ms");
  // pgbench names its log <prefix>.<pid>, one per thread after the first.
  const std::string prefix = "pgbench-latency";
  RunPgbenchStep(1, settings_.signals,
                 {"--rate=" + std::to_string(1000 / std::max<int64_t>(spacing, 1)), "--log",
                  "--log-prefix=" + (temp_->path() / prefix).string()},
                 prefix + ".out");
  std::vector<double> latencies;
  for (const auto& entry : std::filesystem::directory_iterator(temp_->path())) {
    if (entry.path().filename().string().rfind(prefix + ".", 0) != 0 ||
        entry.path().extension() == ".out") {
      continue;
    }
    std::ifstream file(entry.path());
    const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    const auto some = bench::ParsePgbenchLatencies(text);
    latencies.insert(latencies.end(), some.begin(), some.end());
  }
  // Some lines may carry no time (bench::ParsePgbenchLatencies); pgbench's
  // summary has counted the transactions already.
  if (latencies.empty()) {
    throw Error(ErrorKind::kPermanent, "pgbench's log in " + temp_->path().string() +
                                           " times none of its " +
                                           std::to_string(settings_.signals) + " transactions");
  }
  StepLatency result{settings_.signals, spacing, bench::Percentile(latencies, 50),
                     bench::Percentile(latencies, 99)};
  progress_.End("p50 " + bench::FormatMillis(result.p50_ms) + " ms, p99 " +
                bench::FormatMillis(result.p99_ms) + " ms");
  return result;
}

Bench::Starts Bench::MeasureSingleStarts(int sessions, bool wake_hints) {
  progress_.Begin("starts, one per transaction, " + std::to_string(sessions) +
                  (sessions == 1 ? " session" : " sessions") + ", wake hints " +
                  (wake_hints ? "on" : "off"));
  const Json tag = {{"cairn_bench", "starts"}};
  const int per_session = std::max(1, settings_.single_starts / sessions);
  SettleServer();
  // With hints on, the queue's wake gate is held open throughout, as by a
  // daemon that never fills its slots: the starts' worst case.
  std::optional<store::WakeListener> waiting_daemon;
  if (wake_hints) {
    waiting_daemon.emplace(ConnectionFor(config_, "cairn bench listener"));
    if (!waiting_daemon->OpenGates({kStartsQueue})) {
      throw Error(ErrorKind::kTransient, "could not open the starts queue's wake gate");
    }
  }
  const int64_t open = admin_->Read([](store::Tx& tx) { return store::bench::ClientSessions(tx); });
  // Every session connects first: the clock and the counters start once
  // all are connected, so that connecting is not counted as starting.
  std::latch connected(sessions);
  std::latch go(1);
  std::vector<std::thread> threads;
  std::atomic<bool> failed{false};
  std::string failure;
  std::mutex failure_mutex;
  for (int s = 0; s < sessions; ++s) {
    threads.emplace_back([&] {
      bool arrived = false;
      try {
        store::Connection connection(ConnectionFor(config_, "cairn bench"));
        if (!wake_hints) connection.Autocommit(store::bench::TurnOffWakeHints);
        connected.count_down();
        arrived = true;
        go.wait();
        store::StartRequest request;
        request.workflow = kThroughputWorkflow;
        request.input = tag;
        request.queue = kStartsQueue;
        for (int i = 0; i < per_session && !failed.load() && !Interrupted(); ++i) {
          connection.Autocommit([&](store::Tx& tx) { store::StartRun(tx, request); });
        }
      } catch (const std::exception& e) {
        if (!arrived) connected.count_down();
        std::lock_guard lock(failure_mutex);
        failure = e.what();
        failed = true;
      }
    });
  }
  connected.wait();
  std::optional<Admin::Reading> before;
  try {
    before = admin_->Snapshot();
  } catch (...) {
    failed = true;
    go.count_down();
    for (auto& thread : threads) thread.join();
    throw;
  }
  const auto started = Clock::now();
  go.count_down();
  for (auto& thread : threads) thread.join();
  CheckInterrupted();
  if (failed) throw Error(ErrorKind::kPermanent, "starting runs failed: " + failure);
  const double seconds = Seconds(Clock::now() - started);
  WaitForSessions(open);
  const auto after = admin_->Snapshot();
  Starts result{"single", sessions, wake_hints, int64_t{per_session} * sessions, seconds, {}};
  result.cost = Cost(*before, after, result.starts);
  progress_.End(bench::FormatRate(static_cast<double>(result.starts) / seconds) + " starts/s");
  return result;
}

std::string BulkStartsMode(store::bench::BulkStartApi api) {
  switch (api) {
    case store::bench::BulkStartApi::kStartRun:
      return "bulk";
    case store::bench::BulkStartApi::kStartRuns:
      return "bulk_set";
    case store::bench::BulkStartApi::kBareInsert:
      return "bulk_insert";
  }
  return "bulk";
}

std::string StartsFigure(const std::string& mode) {
  if (mode == "single") return "starts, one per transaction (start_run)";
  const std::string per_statement = "starts, " + std::to_string(kBulkStarts) + " per statement";
  if (mode == "bulk_set") return per_statement + " (start_runs)";
  if (mode == "bulk_insert") return per_statement + " (plain INSERT, their ceiling)";
  return per_statement + " (start_run)";
}

Bench::Starts Bench::MeasureBulkStarts(store::bench::BulkStartApi api) {
  const std::string mode = BulkStartsMode(api);
  progress_.Begin(StartsFigure(mode));
  const Json tag = {{"cairn_bench", "starts"}};
  SettleServer();
  const auto before = admin_->Snapshot();
  const auto started = Clock::now();
  int64_t count = 0;
  for (int b = 0; b < settings_.bulk_batches; ++b) {
    CheckInterrupted();
    count += admin_->connection().Transact([&](store::Tx& tx) {
      return store::bench::StartRunsInBulk(tx, api, kThroughputWorkflow, tag, kStartsQueue,
                                           kBulkStarts);
    });
  }
  const double seconds = Seconds(Clock::now() - started);
  const auto after = admin_->Snapshot();
  Starts result{mode, 1, true, count, seconds, Cost(before, after, count)};
  progress_.End(bench::FormatRate(static_cast<double>(count) / seconds) +
                (api == store::bench::BulkStartApi::kBareInsert ? " runs/s" : " starts/s"));
  return result;
}

}  // namespace cairn::cli::benchmark
