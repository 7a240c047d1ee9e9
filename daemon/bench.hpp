// What the files of `cairn bench` share: the settings of a run, its scratch
// folder, progress line and own database session, and the Bench class, whose
// entry and orchestration live in cli_bench.cpp, its daemons in
// bench_fleet.cpp, its phases in bench_throughput.cpp and bench_latency.cpp,
// and its output in bench_output.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_process.hpp"
#include "bench_report.hpp"
#include "child_process.hpp"
#include "cli.hpp"
#include "definition.hpp"
#include "store_bench.hpp"
#include "temp_dir.hpp"

namespace cairn::cli::benchmark {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline constexpr const char* kThroughputWorkflow = "noop3";
inline constexpr const char* kWaitWorkflow = "noop_wait";
inline constexpr const char* kStartsQueue = "cairn_bench_starts";
inline constexpr const char* kClaimQueue = "cairn_bench_claim";
inline constexpr int kBulkStarts = 1000;  // starts per statement of the bulk start
inline constexpr int kClaimReady = 1000;  // ready runs of the small claim backlog
inline constexpr int kMinClaimSamples = 20;

// Whether SIGINT or SIGTERM arrived (a second one stops at once); the
// handler is installed by RunBench.
bool Interrupted();
// Throws when Interrupted().
void CheckInterrupted();
// Sleeps, checking for an interruption every 20 ms.
void Sleep(milliseconds duration);

inline double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// What one run of the benchmark measures, from the options (--quick changes
// the defaults, explicit options beat both).
struct Settings {
  std::vector<int> workers{1, 2};
  std::vector<int> concurrency{1, 8, 32};
  // Batch mode rows: one process at each batch_concurrency, with each
  // worker.batch_size here.
  std::vector<int> batch_sizes{32};
  std::vector<int> batch_concurrency{1, 2, 8};
  int runs = 2000;
  // How many times the throughput rows are measured, each cairn row with its
  // pgbench run right after it; the report adds each row's medians.
  int rounds = 3;
  int claim_rows = 1000000;
  int claim_samples = 500;
  milliseconds claim_budget{30000};  // per backlog
  int single_starts = 2000;
  std::vector<int> start_sessions{1, 8};
  int bulk_batches = 10;
  int signals = 300;
  milliseconds signal_spacing{10};
  int ready_samples = 3;
  milliseconds idle_wait{2000};
  bool quick = false;
};

// One line on standard error that says what the benchmark is doing: redrawn
// in place on a terminal, one line per phase otherwise (logs, CI).
class Progress {
 public:
  Progress();
  void Begin(const std::string& phase);
  void Update(const std::string& state);
  void End(const std::string& summary);

 private:
  bool tty_;
  std::string phase_;
};

// The benchmark's own session. Its read-only transactions inside a measured
// window (progress polls, counter readings) are counted, so that they are
// not charged to the phase.
class Admin {
 public:
  explicit Admin(store::ConnectionOptions options) : connection_(std::move(options)) {}

  template <class F>
  auto Read(F&& fn) {
    ++reads_;
    return connection_.Autocommit(std::forward<F>(fn));
  }
  // A reading of the server's counters, with the own reads up to it.
  struct Reading {
    bench::Counters counters;
    int64_t own_reads = 0;
  };
  Reading Snapshot();
  store::Connection& connection() { return connection_; }

 private:
  store::Connection connection_;
  int64_t reads_ = 0;
};

bench::UnitCost Cost(const Admin::Reading& before, const Admin::Reading& after, int64_t units);

// A row of starts: its mode in the JSON ("single", or one per
// BulkStartApi), and the table's name for that mode.
std::string BulkStartsMode(store::bench::BulkStartApi api);
std::string StartsFigure(const std::string& mode);

// One run of `cairn bench`: Run() measures every phase in turn, in the
// scratch schema it creates, and prints the report. Used from one thread,
// but for the sessions of the concurrent starts (MeasureSingleStarts).
class Bench {
 public:
  Bench(DaemonConfig config, Settings settings, bool keep)
      : config_(std::move(config)),
        settings_(std::move(settings)),
        keep_(keep),
        definitions_(LoadDefinitionSet(config_.workflows.paths)) {}

  int Run(bool json);

 private:
  struct Throughput {
    int workers = 0;
    int slots = 0;
    int batch_size = 1;  // worker.batch_size
    int64_t runs = 0;
    int64_t steps = 0;
    double seconds = 0;
    double wall_seconds = 0;
    int round = 1;       // of settings_.rounds
    size_t ceiling = 0;  // its pgbench run, measured right after it (pgbench_runs_)
    bench::UnitCost draining;
    bench::UnitCost with_start;
  };
  struct Pgbench {
    int clients = 0;
    std::string after;  // the row it was measured right after
    int64_t steps = 0;
    double tps = 0;
    bench::UnitCost cost;
  };
  struct Starts {
    // "single" | "bulk" (start_run per row) | "bulk_set" (start_runs) |
    // "bulk_insert" (a plain INSERT of the same rows: the bulk rows' ceiling)
    std::string mode;
    int sessions = 1;
    bool wake_hints = true;  // cairn.wake_hints of the starting sessions
    int64_t starts = 0;
    double seconds = 0;
    bench::UnitCost cost;
    size_t ceiling = 0;  // its pgbench run, measured right after it (pgbench_runs_)
    // Bulk starts through the SQL API: the plain INSERT's rows a second,
    // measured right after them. 0 for the other rows.
    double insert_rate = 0;
  };
  struct Claims {
    std::string backlog;
    int64_t ready = 0;
    int64_t finished = 0;
    int samples = 0;
    double p50_ms = 0;
    double p99_ms = 0;
  };
  struct Fill {
    std::string what;
    int64_t rows = 0;
    double seconds = 0;
  };
  // pgbench's step from one session at the signals' pace, the floor under
  // a signal's resume: one durable commit of the same work.
  struct StepLatency {
    int signals = 0;  // transactions, as many as the signals
    int64_t spacing_ms = 0;
    double p50_ms = 0;
    double p99_ms = 0;
  };
  struct PgbenchRun {
    bench::PgbenchSummary summary;
    bench::UnitCost cost;
  };
  struct Resume {
    bool wake_hints = false;
    int signals = 0;
    double p50_ms = 0;
    double p99_ms = 0;
  };
  struct DaemonFigures {
    int slots = 0;
    int64_t rss_bytes = 0;
    int64_t step_process_rss_bytes = 0;
    // Proportional set sizes: what the daemon and its step processes take
    // together, shared pages counted once.
    int64_t pss_bytes = 0;
    int64_t step_process_pss_bytes = 0;
    int step_processes = 0;
    double ready_ms = 0;
  };

  // A `cairn run` of this benchmark, reporting READY on its own socket.
  class Daemon {
   public:
    Daemon(const std::vector<std::string>& argv, const std::vector<std::string>& env,
           const std::string& log, std::unique_ptr<bench::NotifySocket> socket)
        : socket_(std::move(socket)), process_(argv, env, log) {}
    bench::NotifySocket& socket() { return *socket_; }
    process::ChildProcess& process() { return process_; }

   private:
    std::unique_ptr<bench::NotifySocket> socket_;
    process::ChildProcess process_;
  };
  using Fleet = std::vector<std::unique_ptr<Daemon>>;

  // cli_bench.cpp
  const WorkflowDefinition& Workflow(const char* name) const;
  void Prepare();
  // Before a measured phase: a VACUUM of the phases before it, then a
  // CHECKPOINT when this role may run one (sql/bench/bench_vacuum.sql and
  // bench_checkpoint.sql say why).
  void SettleServer();

  // bench_fleet.cpp
  std::string DaemonConfigFile(int slots, bool listen, int batch_size = 1);
  std::unique_ptr<Daemon> Spawn(int slots, bool listen, int batch_size = 1);
  static void WaitReady(Daemon& daemon, const std::string& what);
  Fleet StartFleet(int workers, int slots, bool listen, int batch_size = 1);
  void StopFleet(Fleet& fleet);
  void WaitForSessions(int64_t before);
  // Polls the tagged runs that are not yet finished, per status, until
  // `done` says so, showing `state` as progress; fails when a daemon of the
  // fleet died or nothing moved for two minutes. The phase's runs are all
  // started before it: none left unfinished means all ended.
  using UnfinishedRuns = std::unordered_map<RunStatus, int64_t>;
  static int64_t Total(const UnfinishedRuns& unfinished);
  void WaitForRuns(const Json& tag, Fleet& fleet,
                   const std::function<bool(const UnfinishedRuns&)>& done,
                   const std::function<std::string(const UnfinishedRuns&, double)>& state);
  std::vector<std::string> StartRuns(const char* workflow, const Json& tag, int count);

  // bench_throughput.cpp
  Throughput MeasureThroughput(int round, int workers, int slots, int batch_size);
  // The pgbench step from `clients` sessions, `per_client` transactions
  // each, with more pgbench `options`, logged to the file `name` of the
  // temporary folder; on runs filled for it beforehand.
  PgbenchRun RunPgbenchStep(int clients, int64_t per_client,
                            const std::vector<std::string>& options, const std::string& name);
  // pgbench's step from `clients` sessions, measured right after the row
  // `after`, so that both meet the same moment of a shared machine; returns
  // its index in pgbench_runs_.
  size_t MeasurePgbench(int clients, const std::string& after);
  StepLatency MeasureStepLatency();
  Starts MeasureSingleStarts(int sessions, bool wake_hints);
  Starts MeasureBulkStarts(store::bench::BulkStartApi api);

  // bench_latency.cpp
  Resume MeasureResume(bool wake_hints);
  DaemonFigures MeasureDaemon();
  Claims MeasureClaims(const std::string& backlog, int64_t ready, int64_t finished);
  Fill FillClaimRuns(int count, bool finished);

  // bench_output.cpp
  static double StepsPerSecond(const Throughput& row);
  static double WorkflowsPerSecond(const Throughput& row);
  // A throughput row's fleet, and its round when there are several: how
  // the table and its pgbench run name it.
  std::string RowName(const Throughput& row) const;
  // Each throughput row's medians over its rounds (the ratio's: of each
  // round's ratio to the pgbench run right after it), in the order the
  // rows are measured in a round.
  struct RowMedians {
    int workers = 0;
    int slots = 0;
    int batch_size = 1;
    int rounds = 0;
    double steps_per_second = 0;
    double workflows_per_second = 0;
    double pgbench_steps_per_second = 0;
    double ratio = 0;
    double min_ratio = 0;
    double max_ratio = 0;
  };
  std::vector<RowMedians> Medians() const;
  std::string Report(const bench::Machine& machine, double load_before, double load_after) const;
  Json ReportJson(const bench::Machine& machine, double load_before, double load_after) const;

  DaemonConfig config_;
  Settings settings_;
  bool keep_;
  DefinitionSet definitions_;
  std::unique_ptr<Admin> admin_;
  std::unique_ptr<process::TempDir> temp_;
  store::bench::ServerInfo server_;
  bool may_checkpoint_ = false;
  std::string executable_;
  std::string pgbench_;
  std::string pgbench_script_;
  int daemon_count_ = 0;
  Progress progress_;

  std::vector<Throughput> throughput_;
  std::vector<Pgbench> pgbench_runs_;
  std::vector<Starts> starts_;
  std::vector<Resume> resumes_;
  StepLatency step_latency_;
  std::vector<Claims> claims_;
  std::vector<Fill> fills_;
  DaemonFigures daemon_;
};

}  // namespace cairn::cli::benchmark
