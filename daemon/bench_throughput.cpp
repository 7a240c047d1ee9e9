// The throughput phases of `cairn bench`: tagged runs drained by a fleet of
// daemons, pgbench's ceiling at the same number of sessions, and starts one
// per transaction and in bulk, each with its commits and WAL per unit.
#include <algorithm>
#include <atomic>
#include <latch>
#include <mutex>
#include <thread>

#include "bench.hpp"

namespace cairn::cli::benchmark {

Bench::Throughput Bench::MeasureThroughput(int workers, int slots, int batch_size) {
  const std::string label =
      kThroughputWorkflow + std::string(", ") + bench::FormatFleet(workers, slots, batch_size);
  progress_.Begin(label);
  const Json tag = {{"cairn_bench", "throughput " + std::to_string(workers) + "x" +
                                        std::to_string(slots) + "x" + std::to_string(batch_size)}};
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
      tag, fleet,
      [&](const auto& counts) {
        int64_t ended = 0;
        for (const auto& [status, n] : counts) {
          if (status == RunStatus::kCompleted || status == RunStatus::kFailed) ended += n;
        }
        return ended >= settings_.runs;
      },
      [&](const auto& counts, double seconds) {
        const auto completed = counts.count(RunStatus::kCompleted) != 0
                                   ? counts.at(RunStatus::kCompleted)
                                   : int64_t{0};
        return std::to_string(completed) + "/" + std::to_string(settings_.runs) + " runs, ~" +
               bench::FormatRate(static_cast<double>(completed * steps_per_run) /
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
  Throughput result;
  result.workers = workers;
  result.slots = slots;
  result.batch_size = batch_size;
  result.runs = settings_.runs;
  result.steps = window.steps;
  result.seconds = std::max(window.seconds, 1e-6);
  result.wall_seconds = wall;
  result.draining = Cost(before_drain, after, window.steps);
  result.with_start = Cost(before_start, after, window.steps);
  progress_.End(bench::FormatRate(static_cast<double>(result.steps) / result.seconds) + " steps/s");
  return result;
}

const Bench::Pgbench& Bench::PgbenchAt(int clients) {
  if (auto found = pgbench_runs_.find(clients); found != pgbench_runs_.end()) return found->second;
  progress_.Begin("pgbench step, " + std::to_string(clients) +
                  (clients == 1 ? " session" : " sessions"));
  const int64_t steps_per_run = static_cast<int64_t>(Workflow(kThroughputWorkflow).steps.size());
  const int64_t wanted = std::max<int64_t>(int64_t{settings_.runs} * steps_per_run, clients);
  const int64_t per_client = (wanted + clients - 1) / clients;
  // Enough due runs that no client ever finds none: the others hold at most
  // clients - 1 of them locked.
  store::bench::RunFill fill;
  const auto& workflow = Workflow(kThroughputWorkflow);
  fill.count =
      static_cast<int>((per_client * clients + steps_per_run - 1) / steps_per_run + clients);
  fill.workflow = workflow.name;
  fill.definition_version = workflow.version;
  fill.definition_hash = workflow.hash;
  fill.queue = store::bench::kPgbenchQueue;
  fill.cursor = workflow.FirstStep();
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
  // The URL goes by the environment (pgbench expands a connection string
  // in PGDATABASE): a password on the command line would show in ps.
  std::vector<std::string> env;
  if (!config_.database.url.empty()) env.push_back("PGDATABASE=" + config_.database.url);
  const std::string log = temp_->path() + "/pgbench-" + std::to_string(clients) + ".log";
  std::optional<int> code;
  {
    bench::ChildProcess pgbench(argv, bench::ChildEnvironment(env), log);
    progress_.Update(std::to_string(per_client * clients) + " steps");
    while (!(code = pgbench.Wait(milliseconds(100)))) CheckInterrupted();
    const auto summary = bench::ParsePgbenchSummary(pgbench.LogTail(100000));
    if (*code != 0 || !summary || summary->failed != 0 || summary->transactions <= 0) {
      throw Error(ErrorKind::kPermanent, "pgbench failed (" + pgbench_ + ", exit code " +
                                             std::to_string(*code) + "):\n" + pgbench.LogTail());
    }
    WaitForSessions(sessions);
    const auto after = admin_->Snapshot();
    Pgbench result;
    result.clients = clients;
    result.steps = summary->transactions;
    result.tps = summary->tps;
    result.cost = Cost(before, after, summary->transactions);
    progress_.End(bench::FormatRate(result.tps) + " steps/s");
    return pgbench_runs_.emplace(clients, result).first->second;
  }
}

Bench::Starts Bench::MeasureSingleStarts(int sessions, bool wake_hints) {
  progress_.Begin("starts, one per transaction, " + std::to_string(sessions) +
                  (sessions == 1 ? " session" : " sessions") + ", wake hints " +
                  (wake_hints ? "on" : "off"));
  const Json tag = {{"cairn_bench", "starts"}};
  const int per_session = std::max(1, settings_.single_starts / sessions);
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

Bench::Starts Bench::MeasureBulkStarts(store::bench::BulkStartApi api) {
  const bool set_based = api == store::bench::BulkStartApi::kStartRuns;
  progress_.Begin("starts, " + std::to_string(kBulkStarts) + " per statement (" +
                  (set_based ? "start_runs" : "start_run") + ")");
  const Json tag = {{"cairn_bench", "starts"}};
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
  Starts result{set_based ? "bulk_set" : "bulk", 1, true, count, seconds,
                Cost(before, after, count)};
  progress_.End(bench::FormatRate(static_cast<double>(count) / seconds) + " starts/s");
  return result;
}

}  // namespace cairn::cli::benchmark
