// What `cairn bench` prints: the markdown table for people (the machine, the
// server and the settings above it) and one JSON object for scripts.
#include <algorithm>
#include <sstream>

#include "bench.hpp"
#include "duration.hpp"

namespace cairn::cli::benchmark {

namespace {

Json CostJson(const bench::UnitCost& cost) {
  return {{"transactions", cost.transactions},
          {"durable_commits", cost.durable_commits},
          {"read_only_transactions", cost.transactions - cost.durable_commits},
          {"wal_bytes", cost.wal_bytes},
          {"wal_full_page_images", cost.wal_fpi},
          {"wal_fsyncs", cost.wal_syncs}};
}

}  // namespace

double Bench::StepsPerSecond(const Throughput& row) {
  return static_cast<double>(row.steps) / row.seconds;
}

double Bench::WorkflowsPerSecond(const Throughput& row) {
  return static_cast<double>(row.runs) / row.seconds;
}

std::string Bench::RowName(const Throughput& row) const {
  std::string name = bench::FormatFleet(row.workers, row.slots, row.batch_size);
  if (settings_.rounds > 1) {
    name += ", round " + std::to_string(row.round) + " of " + std::to_string(settings_.rounds);
  }
  return name;
}

std::vector<Bench::RowMedians> Bench::Medians() const {
  std::vector<RowMedians> medians;
  for (const auto& first : throughput_) {
    if (first.round != 1) continue;
    std::vector<double> steps;
    std::vector<double> workflows;
    std::vector<double> ceilings;
    std::vector<double> ratios;
    for (const auto& row : throughput_) {
      if (row.workers != first.workers || row.slots != first.slots ||
          row.batch_size != first.batch_size) {
        continue;
      }
      const double ceiling = pgbench_runs_.at(row.ceiling).tps;
      steps.push_back(StepsPerSecond(row));
      workflows.push_back(WorkflowsPerSecond(row));
      ceilings.push_back(ceiling);
      ratios.push_back(StepsPerSecond(row) / ceiling);
    }
    RowMedians m;
    m.workers = first.workers;
    m.slots = first.slots;
    m.batch_size = first.batch_size;
    m.rounds = static_cast<int>(ratios.size());
    m.steps_per_second = bench::Percentile(steps, 50);
    m.workflows_per_second = bench::Percentile(workflows, 50);
    m.pgbench_steps_per_second = bench::Percentile(ceilings, 50);
    m.ratio = bench::Percentile(ratios, 50);
    m.min_ratio = *std::min_element(ratios.begin(), ratios.end());
    m.max_ratio = *std::max_element(ratios.begin(), ratios.end());
    medians.push_back(m);
  }
  return medians;
}

std::string Bench::Report(const bench::Machine& machine, double load_before,
                          double load_after) const {
  std::ostringstream out;
  out << "server: " << Printable(server_.version) << ", at " << Printable(server_.host) << ":"
      << server_.port << " (fsync " << server_.fsync << ", synchronous_commit "
      << server_.synchronous_commit << ", full_page_writes " << server_.full_page_writes
      << ", shared_buffers " << server_.shared_buffers << ", max_wal_size " << server_.max_wal_size
      << ")\n"
      << "machine: " << Printable(machine.cpu) << ", " << machine.cores << " cores, "
      << bench::FormatMiB(machine.memory_bytes) << "; load average " << load_before << " before, "
      << load_after << " after\n"
      << "daemons: `cairn run` processes, plugins.isolation " << config_.plugins.isolation
      << ", worker.claim_batch " << config_.worker.claim_batch
      << " (0: the slots), worker.poll_interval " << FormatDuration(config_.worker.poll_interval)
      << "; " << settings_.runs << " " << kThroughputWorkflow
      << " runs started beforehand per row, one per transaction; " << settings_.rounds
      << (settings_.rounds == 1 ? " round" : " rounds")
      << " of the throughput rows, each row with its pgbench run right after it\n"
      << "per step or start: transactions committed (read-only ones included) · durable commits "
         "(transactions that wrote) · WAL bytes · full-page images in the WAL\n"
      << (may_checkpoint_
              ? "each measured phase starts right after a VACUUM of the phases before it and a "
                "CHECKPOINT, so that neither falls into it\n\n"
              : "no CHECKPOINT before the phases (this role is neither a superuser nor a member "
                "of pg_checkpoint): a checkpoint the server starts during a phase adds its "
                "full-page images to that phase's WAL\n\n");

  std::vector<std::vector<std::string>> rows;
  const auto sessions = [](int n) {
    return std::to_string(n) + (n == 1 ? " session" : " sessions");
  };
  const auto throughput_figure = [](int batch_size) {
    return std::string(kThroughputWorkflow) +
           (batch_size > 1 ? " throughput, batch mode" : " throughput");
  };
  const auto rates = [](double steps, double workflows) {
    return bench::FormatRate(steps) + " steps/s, " + bench::FormatRate(workflows) + " workflows/s";
  };
  for (const auto& t : throughput_) {
    const double steps = StepsPerSecond(t);
    const double workflows = WorkflowsPerSecond(t);
    const auto& ceiling = pgbench_runs_.at(t.ceiling);
    rows.push_back({throughput_figure(t.batch_size), RowName(t), rates(steps, workflows),
                    bench::FormatRate(ceiling.tps) + " steps/s",
                    bench::FormatRatio(steps / ceiling.tps), bench::FormatCost(t.draining),
                    bench::FormatCost(t.with_start)});
  }
  if (settings_.rounds > 1) {
    for (const auto& m : Medians()) {
      rows.push_back(
          {throughput_figure(m.batch_size) + ", median of " + std::to_string(m.rounds) + " rounds",
           bench::FormatFleet(m.workers, m.slots, m.batch_size),
           rates(m.steps_per_second, m.workflows_per_second),
           bench::FormatRate(m.pgbench_steps_per_second) + " steps/s",
           bench::FormatRatio(m.ratio) + " (" + bench::FormatRatio(m.min_ratio) + " to " +
               bench::FormatRatio(m.max_ratio) + ")",
           "", ""});
    }
  }
  for (const auto& p : pgbench_runs_) {
    rows.push_back({"pgbench step (the ceiling)", sessions(p.clients) + ", after " + p.after, "",
                    bench::FormatRate(p.tps) + " steps/s", "", bench::FormatCost(p.cost), ""});
  }
  for (const auto& s : starts_) {
    const double rate = static_cast<double>(s.starts) / s.seconds;
    const std::string condition =
        sessions(s.sessions) + (s.mode != "single" ? ""
                                : s.wake_hints     ? ", wake gate held open (a daemon waiting)"
                                                   : ", wake hints off (cairn.wake_hints)");
    if (s.mode == "bulk_insert") {
      // The ceiling of the bulk starts above it.
      rows.push_back({StartsFigure(s.mode), condition, bench::FormatRate(rate) + " runs/s", "", "",
                      bench::FormatCost(s.cost), ""});
      continue;
    }
    // Bulk starts through the SQL API against the plain INSERT of the same
    // rows; the rest against pgbench's step.
    const double ceiling = s.insert_rate > 0 ? s.insert_rate : pgbench_runs_.at(s.ceiling).tps;
    rows.push_back(
        {StartsFigure(s.mode), condition, bench::FormatRate(rate) + " starts/s",
         bench::FormatRate(ceiling) + (s.insert_rate > 0 ? " runs/s (plain INSERT)" : " steps/s"),
         bench::FormatRatio(rate / ceiling), bench::FormatCost(s.cost), ""});
  }
  for (const auto& c : claims_) {
    rows.push_back({"claim latency p50 / p99 (ClaimRuns)", c.backlog,
                    bench::FormatMillis(c.p50_ms) + " / " + bench::FormatMillis(c.p99_ms) +
                        " ms (" + std::to_string(c.samples) + " claims)",
                    "", "", "", ""});
  }
  for (const auto& f : fills_) {
    rows.push_back({"backlog fill (generate_series)", bench::FormatRate(f.rows) + " " + f.what,
                    bench::FormatRate(f.seconds) + " s, " +
                        bench::FormatRate(static_cast<double>(f.rows) / f.seconds) + " rows/s",
                    "", "", "", ""});
  }
  for (const auto& r : resumes_) {
    rows.push_back({"signal to resume p50 / p99",
                    std::string("wake hints ") +
                        (r.wake_hints ? "on"
                                      : "off (polling every " +
                                            FormatDuration(config_.worker.poll_interval) + ")") +
                        ", " + std::to_string(r.signals) + " signals " +
                        std::to_string(settings_.signal_spacing.count()) + " ms apart",
                    bench::FormatMillis(r.p50_ms) + " / " + bench::FormatMillis(r.p99_ms) + " ms",
                    bench::FormatMillis(step_latency_.p50_ms) + " / " +
                        bench::FormatMillis(step_latency_.p99_ms) + " ms (a step)",
                    bench::FormatRatio(r.p99_ms / step_latency_.p99_ms) + " (p99)", "", ""});
  }
  rows.push_back({"pgbench step latency p50 / p99",
                  "1 session, one step every " + std::to_string(step_latency_.spacing_ms) +
                      " ms, " + std::to_string(step_latency_.signals) + " steps",
                  "",
                  bench::FormatMillis(step_latency_.p50_ms) + " / " +
                      bench::FormatMillis(step_latency_.p99_ms) + " ms",
                  "", "", ""});
  rows.push_back({"idle RSS", bench::FormatFleet(1, daemon_.slots),
                  bench::FormatMiB(daemon_.rss_bytes) + " + " +
                      bench::FormatMiB(daemon_.step_process_rss_bytes) + " in " +
                      std::to_string(daemon_.step_processes) + " step processes (PSS " +
                      bench::FormatMiB(daemon_.pss_bytes) + " + " +
                      bench::FormatMiB(daemon_.step_process_pss_bytes) + ")",
                  "", "", "", ""});
  rows.push_back({"start to READY=1 (sd_notify)", bench::FormatFleet(1, daemon_.slots),
                  bench::FormatMillis(daemon_.ready_ms) + " ms", "", "", "", ""});
  out << bench::MarkdownTable({"figure", "condition", "cairn", "ceiling", "cairn / ceiling",
                               "per step or start, draining", "per step, with its start"},
                              rows);
  return out.str();
}

Json Bench::ReportJson(const bench::Machine& machine, double load_before, double load_after) const {
  Json result;
  result["machine"] = {{"cpu", machine.cpu},
                       {"cores", machine.cores},
                       {"memory_bytes", machine.memory_bytes},
                       {"load_average_before", load_before},
                       {"load_average_after", load_after}};
  result["server"] = {{"version", server_.version},
                      {"host", server_.host},
                      {"port", server_.port},
                      {"fsync", server_.fsync},
                      {"synchronous_commit", server_.synchronous_commit},
                      {"full_page_writes", server_.full_page_writes},
                      {"shared_buffers", server_.shared_buffers},
                      {"max_wal_size", server_.max_wal_size}};
  result["settings"] = {{"quick", settings_.quick},
                        {"runs_per_row", settings_.runs},
                        {"rounds", settings_.rounds},
                        {"isolation", config_.plugins.isolation},
                        {"claim_batch", config_.EffectiveClaimBatch()},
                        {"poll_interval_ms", config_.worker.poll_interval.count()},
                        {"checkpoint_before_phases", may_checkpoint_},
                        {"schema", config_.database.schema}};
  Json pgbench = Json::array();
  for (const auto& p : pgbench_runs_) {
    pgbench.push_back({{"sessions", p.clients},
                       {"after", p.after},
                       {"steps", p.steps},
                       {"steps_per_second", p.tps},
                       {"per_step", CostJson(p.cost)}});
  }
  result["pgbench"] = pgbench;
  Json throughput = Json::array();
  for (const auto& t : throughput_) {
    const double steps = StepsPerSecond(t);
    const double ceiling = pgbench_runs_.at(t.ceiling).tps;
    throughput.push_back({{"workflow", kThroughputWorkflow},
                          {"daemons", "cairn run processes"},
                          {"processes", t.workers},
                          {"slots_per_process", t.slots},
                          {"batch_size", t.batch_size},
                          {"sessions", t.workers * t.slots},
                          {"round", t.round},
                          {"runs", t.runs},
                          {"steps", t.steps},
                          {"seconds", t.seconds},
                          {"wall_seconds", t.wall_seconds},
                          {"steps_per_second", steps},
                          {"workflows_per_second", WorkflowsPerSecond(t)},
                          {"pgbench_steps_per_second", ceiling},
                          {"ratio_to_pgbench", steps / ceiling},
                          {"per_step_draining", CostJson(t.draining)},
                          {"per_step_with_start", CostJson(t.with_start)}});
  }
  result["throughput"] = throughput;
  Json medians = Json::array();
  for (const auto& m : Medians()) {
    medians.push_back({{"processes", m.workers},
                       {"slots_per_process", m.slots},
                       {"batch_size", m.batch_size},
                       {"rounds", m.rounds},
                       {"steps_per_second", m.steps_per_second},
                       {"workflows_per_second", m.workflows_per_second},
                       {"pgbench_steps_per_second", m.pgbench_steps_per_second},
                       {"ratio_to_pgbench", m.ratio},
                       {"min_ratio_to_pgbench", m.min_ratio},
                       {"max_ratio_to_pgbench", m.max_ratio}});
  }
  result["throughput_medians"] = medians;
  Json starts = Json::array();
  for (const auto& s : starts_) {
    const double rate = static_cast<double>(s.starts) / s.seconds;
    const double ceiling = pgbench_runs_.at(s.ceiling).tps;
    starts.push_back({{"mode", s.mode},
                      {"sessions", s.sessions},
                      {"wake_hints", s.wake_hints},
                      {"starts", s.starts},
                      {"seconds", s.seconds},
                      {"starts_per_second", rate},
                      {"pgbench_steps_per_second", ceiling},
                      {"ratio_to_pgbench", rate / ceiling},
                      {"per_start", CostJson(s.cost)}});
    if (s.insert_rate > 0) {
      starts.back()["insert_runs_per_second"] = s.insert_rate;
      starts.back()["ratio_to_insert"] = rate / s.insert_rate;
    }
  }
  result["starts"] = starts;
  Json claims = Json::array();
  for (const auto& c : claims_) {
    claims.push_back({{"backlog", c.backlog},
                      {"ready_runs", c.ready},
                      {"finished_runs", c.finished},
                      {"claim_batch", config_.EffectiveClaimBatch()},
                      {"samples", c.samples},
                      {"p50_ms", c.p50_ms},
                      {"p99_ms", c.p99_ms}});
  }
  result["claim_latency"] = claims;
  Json fills = Json::array();
  for (const auto& f : fills_) {
    fills.push_back({{"what", f.what},
                     {"rows", f.rows},
                     {"seconds", f.seconds},
                     {"rows_per_second", static_cast<double>(f.rows) / f.seconds}});
  }
  result["backlog_fills"] = fills;
  Json resumes = Json::array();
  for (const auto& r : resumes_) {
    resumes.push_back({{"wake_hints", r.wake_hints},
                       {"signals", r.signals},
                       {"p50_ms", r.p50_ms},
                       {"p99_ms", r.p99_ms},
                       {"p99_ratio_to_pgbench", r.p99_ms / step_latency_.p99_ms}});
  }
  result["signal_to_resume"] = resumes;
  result["pgbench_step_latency"] = {{"sessions", 1},
                                    {"steps", step_latency_.signals},
                                    {"spacing_ms", step_latency_.spacing_ms},
                                    {"p50_ms", step_latency_.p50_ms},
                                    {"p99_ms", step_latency_.p99_ms}};
  result["daemon"] = {{"slots", daemon_.slots},
                      {"idle_rss_bytes", daemon_.rss_bytes},
                      {"idle_step_process_rss_bytes", daemon_.step_process_rss_bytes},
                      {"step_processes", daemon_.step_processes},
                      {"idle_pss_bytes", daemon_.pss_bytes},
                      {"idle_step_process_pss_bytes", daemon_.step_process_pss_bytes},
                      {"start_to_ready_ms", daemon_.ready_ms}};
  return result;
}

}  // namespace cairn::cli::benchmark
