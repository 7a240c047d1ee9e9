// The latency phases of `cairn bench`: signal to resume with wake hints on
// and off, a daemon's start to READY=1 and its idle memory, and the claim's
// latency over backlogs filled with generate_series.
#include <algorithm>

#include "bench.hpp"

namespace cairn::cli::benchmark {

Bench::Resume Bench::MeasureResume(bool wake_hints) {
  const int slots = config_.worker.concurrency;
  progress_.Begin(std::string("signal to resume, wake hints ") + (wake_hints ? "on" : "off"));
  const Json tag = {{"cairn_bench", wake_hints ? "resume listen" : "resume poll"}};
  const std::vector<std::string> ids = StartRuns(kWaitWorkflow, tag, settings_.signals);
  Fleet fleet = StartFleet(1, slots, wake_hints);
  const int64_t total = settings_.signals;
  auto waiting = [](const UnfinishedRuns& unfinished) {
    auto found = unfinished.find(RunStatus::kWaiting);
    return found == unfinished.end() ? int64_t{0} : found->second;
  };
  WaitForRuns(
      tag, fleet, [&](const UnfinishedRuns& unfinished) { return waiting(unfinished) >= total; },
      [&](const UnfinishedRuns& unfinished, double) {
        return std::to_string(waiting(unfinished)) + "/" + std::to_string(total) + " runs waiting";
      });
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto outcome = admin_->connection().Autocommit(
        [&](store::Tx& tx) { return store::Signal(tx, "noop_wait:" + ids[i], Json::object()); });
    if (outcome != store::SignalOutcome::kDelivered) {
      throw Error(ErrorKind::kPermanent, "the signal to run " + ids[i] + " was " +
                                             std::string(store::ToString(outcome)) +
                                             ", not delivered");
    }
    if (i % 10 == 0) {
      progress_.Update(std::to_string(i + 1) + "/" + std::to_string(ids.size()) + " signals");
    }
    Sleep(settings_.signal_spacing);
  }
  WaitForRuns(
      tag, fleet, [](const UnfinishedRuns& unfinished) { return Total(unfinished) == 0; },
      [&](const UnfinishedRuns& unfinished, double) {
        return std::to_string(total - Total(unfinished)) + "/" + std::to_string(total) +
               " runs resumed and ended";
      });
  StopFleet(fleet);
  const auto latencies =
      admin_->Read([&](store::Tx& tx) { return store::bench::ResumeLatencies(tx, tag); });
  if (static_cast<int64_t>(latencies.size()) != total) {
    throw Error(ErrorKind::kPermanent, std::to_string(latencies.size()) + " of " +
                                           std::to_string(total) + " waits were resumed");
  }
  Resume result{wake_hints, settings_.signals, bench::Percentile(latencies, 50),
                bench::Percentile(latencies, 99)};
  progress_.End("p50 " + bench::FormatMillis(result.p50_ms) + " ms, p99 " +
                bench::FormatMillis(result.p99_ms) + " ms");
  return result;
}

Bench::DaemonFigures Bench::MeasureDaemon() {
  DaemonFigures figures;
  figures.slots = config_.worker.concurrency;
  progress_.Begin("daemon start-up and idle memory");
  std::vector<double> ready;
  for (int i = 0; i < settings_.ready_samples; ++i) {
    const auto spawned = Clock::now();
    Fleet fleet;
    fleet.push_back(Spawn(figures.slots, true));
    WaitReady(*fleet.front(), "a cairn run of the benchmark");
    ready.push_back(Seconds(Clock::now() - spawned) * 1000);
    if (i == 0) {
      Sleep(settings_.idle_wait);
      const pid_t pid = fleet.front()->process().pid();
      figures.rss_bytes = bench::ResidentBytes(pid);
      figures.pss_bytes = bench::ProportionalBytes(pid);
      for (pid_t child : bench::ChildrenOf(pid)) {
        figures.step_process_rss_bytes += bench::ResidentBytes(child);
        figures.step_process_pss_bytes += bench::ProportionalBytes(child);
        ++figures.step_processes;
      }
    }
    StopFleet(fleet);
  }
  figures.ready_ms = bench::Percentile(ready, 50);
  progress_.End(bench::FormatMillis(figures.ready_ms) + " ms to READY, " +
                bench::FormatMiB(figures.rss_bytes) + " idle");
  return figures;
}

Bench::Fill Bench::FillClaimRuns(int count, bool finished) {
  Fill result;
  result.what = std::string(finished ? "finished" : "ready") + " runs";
  result.rows = count;
  progress_.Update("inserting " + bench::FormatRate(count) + " " + result.what +
                   " with generate_series");
  const auto& workflow = Workflow(kThroughputWorkflow);
  store::bench::RunFill fill;
  fill.count = count;
  fill.workflow = workflow.name;
  fill.definition_version = workflow.version;
  fill.definition_hash = workflow.hash;
  fill.queue = kClaimQueue;
  fill.cursor = workflow.FirstStep();
  fill.finished = finished;
  const auto started = Clock::now();
  admin_->connection().Transact([&](store::Tx& tx) { store::bench::FillRuns(tx, fill); });
  result.seconds = Seconds(Clock::now() - started);
  admin_->connection().Autocommit([](store::Tx& tx) { store::bench::AnalyzeRuns(tx); });
  CheckInterrupted();
  return result;
}

Bench::Claims Bench::MeasureClaims(const std::string& backlog, int64_t ready, int64_t finished) {
  const auto& workflow = Workflow(kThroughputWorkflow);
  const int batch = config_.EffectiveClaimBatch();
  // A session like the daemon's poller: its plans are generic, planned once.
  store::ConnectionOptions poller = ConnectionFor(config_, "cairn bench claim");
  poller.generic_plans = true;
  store::Connection connection(poller);
  std::vector<double> latencies;
  // A slow claim (a large ready backlog) gets fewer samples, never fewer
  // than kMinClaimSamples, so that the benchmark ends in minutes.
  const auto budget_end = Clock::now() + settings_.claim_budget;
  for (int i = 0; i < settings_.claim_samples; ++i) {
    if (i >= kMinClaimSamples && Clock::now() > budget_end) break;
    if (i % 50 == 0) {
      CheckInterrupted();
      progress_.Update(backlog + ": claim " + std::to_string(i + 1) + "/" +
                       std::to_string(settings_.claim_samples));
    }
    // Rolled back: every sample claims from the same backlog.
    const size_t claimed = connection.Transact([&](store::Tx& tx) {
      const auto started = Clock::now();
      const auto runs = store::ClaimRuns(tx, {kClaimQueue}, {workflow.hash}, batch,
                                         "cairn-bench-claim", config_.worker.lease);
      latencies.push_back(Seconds(Clock::now() - started) * 1000);
      tx.RollBackOnReturn();
      return runs.size();
    });
    if (static_cast<int64_t>(claimed) != std::min<int64_t>(batch, ready)) {
      throw Error(ErrorKind::kPermanent, "a claim of " + std::to_string(batch) + " runs from " +
                                             backlog + " claimed " + std::to_string(claimed));
    }
  }
  return {backlog,
          ready,
          finished,
          static_cast<int>(latencies.size()),
          bench::Percentile(latencies, 50),
          bench::Percentile(latencies, 99)};
}

}  // namespace cairn::cli::benchmark
