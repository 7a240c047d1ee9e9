// `cairn bench`: measures what the fleet users run (real `cairn run`
// processes, on the configuration they use) against the ceiling of the same
// database, measured in the same run by pgbench executing one cairn step as
// one statement (sql/bench/pgbench_step.sql) at the same number of sessions.
// Everything happens in a scratch schema that the benchmark creates and
// drops (docs/benchmark.md says what each figure means and how it is taken).
// The arithmetic and the table live in bench_report, the child processes in
// bench_process. Single-threaded, but for the sessions of the concurrent
// starts.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <latch>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "bench_process.hpp"
#include "bench_report.hpp"
#include "cli.hpp"
#include "definition.hpp"
#include "duration.hpp"
#include "migrate.hpp"
#include "store_bench.hpp"

namespace cairn::cli {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kThroughputWorkflow = "noop3";
constexpr const char* kWaitWorkflow = "noop_wait";
constexpr const char* kStartsQueue = "cairn_bench_starts";
constexpr const char* kClaimQueue = "cairn_bench_claim";
constexpr int kBulkStarts = 1000;  // starts per statement of the bulk start
constexpr int kClaimReady = 1000;  // ready runs of the small claim backlog
constexpr int kMinClaimSamples = 20;

std::atomic<bool> interrupted{false};

extern "C" void OnInterrupt(int signal_number) {
  if (interrupted.exchange(true)) {
    // A second one: stop at once, leaving the scratch schema behind.
    ::signal(signal_number, SIG_DFL);
    ::raise(signal_number);
  }
}

void CheckInterrupted() {
  if (interrupted.load()) throw Error(ErrorKind::kPermanent, "interrupted");
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

void Sleep(milliseconds duration) {
  const auto until = Clock::now() + duration;
  while (Clock::now() < until) {
    CheckInterrupted();
    std::this_thread::sleep_for(std::min<Clock::duration>(milliseconds(20), until - Clock::now()));
  }
}

std::string Ms(milliseconds duration) { return std::to_string(duration.count()) + "ms"; }

// "1,8,32" -> {1, 8, 32}; each between 1 and max.
std::vector<int> ParseList(const std::string& option, const std::string& text, int max) {
  std::vector<int> values;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || value < 1 || value > max) {
      throw InvalidArgumentError("--" + option +
                                 " takes a comma-separated list of integers from 1 to " +
                                 std::to_string(max) + ", got \"" + text + "\"");
    }
    values.push_back(value);
  }
  if (values.empty()) throw InvalidArgumentError("--" + option + " is empty");
  return values;
}

// What one run of the benchmark measures, from the options (--quick changes
// the defaults, explicit options beat both).
struct Settings {
  std::vector<int> workers{1, 2};
  std::vector<int> concurrency{1, 8, 32};
  int runs = 2000;
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

Settings ReadSettings(const po::variables_map& vm) {
  Settings s;
  if (vm.count("quick")) {
    s.quick = true;
    s.concurrency = {1, 8};
    s.runs = 200;
    s.claim_rows = 20000;
    s.claim_samples = 50;
    s.single_starts = 200;
    s.bulk_batches = 1;
    s.signals = 50;
    s.signal_spacing = milliseconds(5);
    s.ready_samples = 1;
    s.idle_wait = milliseconds(500);
  }
  if (vm.count("workers")) s.workers = ParseList("workers", vm["workers"].as<std::string>(), 8);
  if (vm.count("concurrency")) {
    s.concurrency = ParseList("concurrency", vm["concurrency"].as<std::string>(), 1024);
  }
  auto positive = [&](const char* name, int& value, int min, int max) {
    if (!vm.count(name)) return;
    value = vm[name].as<int>();
    if (value < min || value > max) {
      throw InvalidArgumentError("--" + std::string(name) + " must be between " +
                                 std::to_string(min) + " and " + std::to_string(max) + ", got " +
                                 std::to_string(value));
    }
  };
  positive("runs", s.runs, 1, 10000000);
  positive("claim-rows", s.claim_rows, 2 * kClaimReady, 100000000);
  positive("signals", s.signals, 1, 100000);
  return s;
}

// A mkdtemp folder, private to this user, removed with its contents.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/cairn-bench-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw Error(ErrorKind::kPermanent, "cannot create a folder like " + pattern);
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& text) const {
    std::string file = path_ + "/" + name;
    std::ofstream out(file, std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw Error(ErrorKind::kPermanent, "cannot write " + file);
    fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
    return file;
  }

 private:
  std::string path_;
};

// One line on standard error that says what the benchmark is doing: redrawn
// in place on a terminal, one line per phase otherwise (logs, CI).
class Progress {
 public:
  Progress() : tty_(::isatty(2) != 0) {}
  void Begin(const std::string& phase) {
    phase_ = phase;
    if (tty_) {
      std::cerr << "\r\033[K" << phase_ << std::flush;
    } else {
      std::cerr << "cairn bench: " << phase_ << "\n";
    }
  }
  void Update(const std::string& state) {
    if (tty_) std::cerr << "\r\033[K" << phase_ << ": " << state << std::flush;
  }
  void End(const std::string& summary) {
    if (tty_) {
      std::cerr << "\r\033[K" << phase_ << ": " << summary << "\n";
    } else {
      std::cerr << "cairn bench: " << phase_ << ": " << summary << "\n";
    }
  }

 private:
  bool tty_;
  std::string phase_;
};

bench::Counters Convert(const store::bench::ServerCounters& c) {
  return {c.commits, c.next_xid, c.wal_bytes, c.wal_fpi, c.wal_syncs};
}

Json CostJson(const bench::UnitCost& cost) {
  return {{"transactions", cost.transactions},
          {"durable_commits", cost.durable_commits},
          {"read_only_transactions", cost.transactions - cost.durable_commits},
          {"wal_bytes", cost.wal_bytes},
          {"wal_full_page_images", cost.wal_fpi},
          {"wal_fsyncs", cost.wal_syncs}};
}

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
  Reading Snapshot() {
    auto counters = store::bench::ReadServerCounters(connection_);
    reads_ += 2;
    return {Convert(counters), reads_};
  }
  store::Connection& connection() { return connection_; }

 private:
  store::Connection connection_;
  int64_t reads_ = 0;
};

bench::UnitCost Cost(const Admin::Reading& before, const Admin::Reading& after, int64_t units) {
  return bench::CostPerUnit(before.counters, after.counters, after.own_reads - before.own_reads,
                            units);
}

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
    int64_t runs = 0;
    int64_t steps = 0;
    double seconds = 0;
    double wall_seconds = 0;
    bench::UnitCost draining;
    bench::UnitCost with_start;
  };
  struct Pgbench {
    int clients = 0;
    int64_t steps = 0;
    double tps = 0;
    bench::UnitCost cost;
  };
  struct Starts {
    std::string mode;  // "single" | "bulk"
    int sessions = 1;
    int64_t starts = 0;
    double seconds = 0;
    bench::UnitCost cost;
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
    bench::ChildProcess& process() { return process_; }

   private:
    std::unique_ptr<bench::NotifySocket> socket_;
    bench::ChildProcess process_;
  };
  using Fleet = std::vector<std::unique_ptr<Daemon>>;

  const WorkflowDefinition& Workflow(const char* name) const;
  void Prepare();
  std::string DaemonConfigFile(int slots, bool listen);
  std::unique_ptr<Daemon> Spawn(int slots, bool listen);
  static void WaitReady(Daemon& daemon, const std::string& what);
  Fleet StartFleet(int workers, int slots, bool listen);
  void StopFleet(Fleet& fleet);
  void WaitForSessions(int64_t before);
  // Polls the tagged runs until `done` says so, showing `state` as progress;
  // fails when a daemon of the fleet died or nothing moved for two minutes.
  void WaitForRuns(const Json& tag, Fleet& fleet,
                   const std::function<bool(const std::unordered_map<RunStatus, int64_t>&)>& done,
                   const std::function<std::string(const std::unordered_map<RunStatus, int64_t>&,
                                                   double)>& state);
  std::vector<std::string> StartRuns(const char* workflow, const Json& tag, int count,
                                     const std::optional<std::string>& queue = std::nullopt);

  Throughput MeasureThroughput(int workers, int slots);
  const Pgbench& PgbenchAt(int clients);
  Starts MeasureSingleStarts(int sessions);
  Starts MeasureBulkStarts();
  Resume MeasureResume(bool wake_hints);
  DaemonFigures MeasureDaemon();
  Claims MeasureClaims(const std::string& backlog, int64_t ready, int64_t finished);
  Fill FillClaimRuns(int count, bool finished);

  std::string Report(const bench::Machine& machine, double load_before, double load_after) const;
  Json ReportJson(const bench::Machine& machine, double load_before, double load_after) const;

  DaemonConfig config_;
  Settings settings_;
  bool keep_;
  DefinitionSet definitions_;
  std::unique_ptr<Admin> admin_;
  std::unique_ptr<TempDir> temp_;
  store::bench::ServerInfo server_;
  std::string executable_;
  std::string pgbench_;
  std::string pgbench_script_;
  int daemon_count_ = 0;
  Progress progress_;

  std::vector<Throughput> throughput_;
  std::map<int, Pgbench> pgbench_runs_;
  std::vector<Starts> starts_;
  std::vector<Resume> resumes_;
  std::vector<Claims> claims_;
  std::vector<Fill> fills_;
  DaemonFigures daemon_;
};

const WorkflowDefinition& Bench::Workflow(const char* name) const {
  const WorkflowDefinition* workflow = definitions_.Find(name);
  if (workflow == nullptr) {
    throw NotFoundError(std::string("workflow ") + name +
                        " is not in the config's workflows.paths; cairn bench runs the workflows "
                        "of config/workflows/bench.yaml (examples/workflows/bench.yaml when "
                        "installed) with the noop plugin");
  }
  return *workflow;
}

void Bench::Prepare() {
  executable_ = bench::SelfExecutable();
  pgbench_ = bench::FindExecutable("pgbench", "/usr/lib/postgresql/*/bin/pgbench");
  if (pgbench_.empty()) {
    throw Error(ErrorKind::kPermanent,
                "pgbench, which measures the database's own ceiling, is neither on PATH nor in "
                "/usr/lib/postgresql/*/bin: install it (Debian: apt-get install postgresql-15)");
  }
  temp_ = std::make_unique<TempDir>();
  pgbench_script_ =
      temp_->Write("pgbench_step.sql", store::bench::PgbenchStepScript(config_.database.schema));
  // Every definition of workflows.paths, as a daemon registers them, so that
  // runs can be started before the first daemon is up.
  admin_->connection().Transact([&](store::Tx& tx) {
    for (const auto* d : definitions_.All()) {
      store::RegisterDefinition(tx, {d->hash, d->name, d->version, d->FirstStep(), ToJson(*d)});
    }
  });
}

std::string Bench::DaemonConfigFile(int slots, bool listen) {
  const std::string name =
      "daemon-" + std::to_string(slots) + (listen ? "-listen" : "-poll") + ".yaml";
  const fs::path path = fs::path(temp_->path()) / name;
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
        {"shutdown_grace", Ms(config_.worker.shutdown_grace)},
        {"listen", listen}}},
      {"plugins",
       {{"directories", plugin_dirs},
        {"isolation", config_.plugins.isolation},
        {"isolation_by_plugin", config_.plugins.isolation_by_plugin},
        {"memory_limit", std::to_string(config_.plugins.memory_limit)}}},
      {"workflows", {{"paths", workflow_paths}}},
      {"log", {{"level", "warn"}, {"format", "text"}}},
      {"metrics", {{"listen", ""}}},
      {"health", {{"listen", ""}}},
      {"maintenance",
       {{"reaper_interval", Ms(config_.maintenance.reaper_interval)},
        {"crash_limit", config_.maintenance.crash_limit},
        {"retention", Ms(config_.maintenance.retention)}}}};
  return temp_->Write(name, yaml.dump(2) + "\n");
}

std::unique_ptr<Bench::Daemon> Bench::Spawn(int slots, bool listen) {
  const int n = ++daemon_count_;
  const std::string id = "cairn-bench-" + std::to_string(::getpid()) + "-" + std::to_string(n);
  auto socket =
      std::make_unique<bench::NotifySocket>(temp_->path() + "/notify-" + std::to_string(n));
  std::vector<std::string> env{"NOTIFY_SOCKET=" + socket->path()};
  if (!config_.database.url.empty()) env.push_back("CAIRN_DATABASE_URL=" + config_.database.url);
  return std::make_unique<Daemon>(
      std::vector<std::string>{executable_, "run", "--config", DaemonConfigFile(slots, listen),
                               "--worker-id", id},
      bench::ChildEnvironment(env), temp_->path() + "/" + id + ".log", std::move(socket));
}

void Bench::WaitReady(Daemon& daemon, const std::string& what) {
  const bool ready = daemon.socket().WaitReady(
      std::chrono::minutes(1), [&] { return !interrupted.load() && daemon.process().Running(); });
  CheckInterrupted();
  if (!ready) {
    throw Error(ErrorKind::kPermanent, what + " did not report READY=1 within a minute (log " +
                                           daemon.process().log_path() + "):\n" +
                                           daemon.process().LogTail());
  }
}

Bench::Fleet Bench::StartFleet(int workers, int slots, bool listen) {
  Fleet fleet;
  for (int i = 0; i < workers; ++i) fleet.push_back(Spawn(slots, listen));
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
                   daemon->process().LogTail());
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

void Bench::WaitForRuns(
    const Json& tag, Fleet& fleet,
    const std::function<bool(const std::unordered_map<RunStatus, int64_t>&)>& done,
    const std::function<std::string(const std::unordered_map<RunStatus, int64_t>&, double)>&
        state) {
  const auto started = Clock::now();
  auto moved = Clock::now();
  std::unordered_map<RunStatus, int64_t> last;
  while (true) {
    auto counts = admin_->Read([&](store::Tx& tx) { return store::bench::PhaseStatus(tx, tag); });
    if (counts != last) moved = Clock::now();
    progress_.Update(state(counts, Seconds(Clock::now() - started)));
    if (done(counts)) return;
    last = std::move(counts);
    for (auto& daemon : fleet) {
      if (!daemon->process().Running()) {
        throw Error(ErrorKind::kPermanent, "a cairn run of the benchmark exited (log " +
                                               daemon->process().log_path() + "):\n" +
                                               daemon->process().LogTail());
      }
    }
    if (Clock::now() - moved > std::chrono::minutes(2)) {
      throw Error(ErrorKind::kPermanent,
                  "no run of the benchmark moved for two minutes; the daemons' logs are in " +
                      temp_->path());
    }
    Sleep(milliseconds(200));
  }
}

std::vector<std::string> Bench::StartRuns(const char* workflow, const Json& tag, int count,
                                          const std::optional<std::string>& queue) {
  store::StartRequest request;
  request.workflow = workflow;
  request.input = tag;
  request.queue = queue;
  std::vector<std::string> ids;
  ids.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    if (i % 100 == 0) CheckInterrupted();
    // One start per transaction, as an application starts them.
    ids.push_back(admin_->connection().Autocommit(
        [&](store::Tx& tx) { return store::StartRun(tx, request); }));
  }
  return ids;
}

Bench::Throughput Bench::MeasureThroughput(int workers, int slots) {
  const std::string label = kThroughputWorkflow + std::string(", ") + std::to_string(workers) +
                            (workers == 1 ? " process × " : " processes × ") +
                            std::to_string(slots) + (slots == 1 ? " slot" : " slots");
  progress_.Begin(label);
  const Json tag = {
      {"cairn_bench", "throughput " + std::to_string(workers) + "x" + std::to_string(slots)}};
  const auto before_start = admin_->Snapshot();
  progress_.Update("starting " + std::to_string(settings_.runs) + " runs");
  StartRuns(kThroughputWorkflow, tag, settings_.runs);
  const auto before_drain = admin_->Snapshot();
  const int64_t sessions =
      admin_->Read([](store::Tx& tx) { return store::bench::ClientSessions(tx); });
  const auto spawned = Clock::now();
  Fleet fleet = StartFleet(workers, slots, true);
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

Bench::Starts Bench::MeasureSingleStarts(int sessions) {
  progress_.Begin("starts, one per transaction, " + std::to_string(sessions) +
                  (sessions == 1 ? " session" : " sessions"));
  const Json tag = {{"cairn_bench", "starts"}};
  const int per_session = std::max(1, settings_.single_starts / sessions);
  const int64_t open = admin_->Read([](store::Tx& tx) { return store::bench::ClientSessions(tx); });
  std::optional<Admin::Reading> before;
  Clock::time_point started;
  if (sessions == 1) {
    before = admin_->Snapshot();
    started = Clock::now();
    StartRuns(kThroughputWorkflow, tag, per_session, std::string(kStartsQueue));
  } else {
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
          connected.count_down();
          arrived = true;
          go.wait();
          store::StartRequest request;
          request.workflow = kThroughputWorkflow;
          request.input = tag;
          request.queue = kStartsQueue;
          for (int i = 0; i < per_session && !failed.load() && !interrupted.load(); ++i) {
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
    try {
      before = admin_->Snapshot();
    } catch (...) {
      failed = true;
      go.count_down();
      for (auto& thread : threads) thread.join();
      throw;
    }
    started = Clock::now();
    go.count_down();
    for (auto& thread : threads) thread.join();
    CheckInterrupted();
    if (failed) throw Error(ErrorKind::kPermanent, "starting runs failed: " + failure);
  }
  const double seconds = Seconds(Clock::now() - started);
  WaitForSessions(open);
  const auto after = admin_->Snapshot();
  Starts result{"single", sessions, int64_t{per_session} * sessions, seconds, {}};
  result.cost = Cost(*before, after, result.starts);
  progress_.End(bench::FormatRate(static_cast<double>(result.starts) / seconds) + " starts/s");
  return result;
}

Bench::Starts Bench::MeasureBulkStarts() {
  progress_.Begin("starts, " + std::to_string(kBulkStarts) + " per statement");
  const Json tag = {{"cairn_bench", "starts"}};
  const auto before = admin_->Snapshot();
  const auto started = Clock::now();
  int64_t count = 0;
  for (int b = 0; b < settings_.bulk_batches; ++b) {
    CheckInterrupted();
    count += admin_->connection().Transact([&](store::Tx& tx) {
      return store::bench::StartRunsInBulk(tx, kThroughputWorkflow, tag, kStartsQueue, kBulkStarts);
    });
  }
  const double seconds = Seconds(Clock::now() - started);
  const auto after = admin_->Snapshot();
  Starts result{"bulk", 1, count, seconds, Cost(before, after, count)};
  progress_.End(bench::FormatRate(static_cast<double>(count) / seconds) + " starts/s");
  return result;
}

Bench::Resume Bench::MeasureResume(bool wake_hints) {
  const int slots = config_.worker.concurrency;
  progress_.Begin(std::string("signal to resume, wake hints ") + (wake_hints ? "on" : "off"));
  const Json tag = {{"cairn_bench", wake_hints ? "resume listen" : "resume poll"}};
  const std::vector<std::string> ids = StartRuns(kWaitWorkflow, tag, settings_.signals);
  Fleet fleet = StartFleet(1, slots, wake_hints);
  const int64_t total = settings_.signals;
  auto count_of = [](const std::unordered_map<RunStatus, int64_t>& counts, RunStatus status) {
    auto found = counts.find(status);
    return found == counts.end() ? int64_t{0} : found->second;
  };
  WaitForRuns(
      tag, fleet,
      [&](const auto& counts) { return count_of(counts, RunStatus::kWaiting) >= total; },
      [&](const auto& counts, double) {
        return std::to_string(count_of(counts, RunStatus::kWaiting)) + "/" + std::to_string(total) +
               " runs waiting";
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
      tag, fleet,
      [&](const auto& counts) {
        return count_of(counts, RunStatus::kCompleted) + count_of(counts, RunStatus::kFailed) >=
               total;
      },
      [&](const auto& counts, double) {
        return std::to_string(count_of(counts, RunStatus::kCompleted)) + "/" +
               std::to_string(total) + " runs resumed and completed";
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
      for (pid_t child : bench::ChildrenOf(pid)) {
        figures.step_process_rss_bytes += bench::ResidentBytes(child);
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
    const size_t claimed = admin_->connection().Transact([&](store::Tx& tx) {
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
      << " runs started beforehand per row, one per transaction\n"
      << "per step or start: transactions committed (read-only ones included) · durable commits "
         "(transactions that wrote) · WAL bytes\n\n";

  std::vector<std::vector<std::string>> rows;
  const auto sessions = [](int n) {
    return std::to_string(n) + (n == 1 ? " session" : " sessions");
  };
  for (const auto& t : throughput_) {
    const double steps = static_cast<double>(t.steps) / t.seconds;
    const double workflows = static_cast<double>(t.runs) / t.seconds;
    const auto& ceiling = pgbench_runs_.at(t.workers * t.slots);
    rows.push_back(
        {std::string(kThroughputWorkflow) + " throughput",
         std::to_string(t.workers) + (t.workers == 1 ? " process × " : " processes × ") +
             std::to_string(t.slots) + (t.slots == 1 ? " slot" : " slots"),
         bench::FormatRate(steps) + " steps/s, " + bench::FormatRate(workflows) + " workflows/s",
         bench::FormatRate(ceiling.tps) + " steps/s", bench::FormatRatio(steps / ceiling.tps),
         bench::FormatCost(t.draining), bench::FormatCost(t.with_start)});
  }
  for (const auto& [clients, p] : pgbench_runs_) {
    rows.push_back({"pgbench step (the ceiling)", sessions(clients), "",
                    bench::FormatRate(p.tps) + " steps/s", "", bench::FormatCost(p.cost), ""});
  }
  for (const auto& s : starts_) {
    const double rate = static_cast<double>(s.starts) / s.seconds;
    const auto& ceiling = pgbench_runs_.at(s.sessions);
    rows.push_back({s.mode == "single"
                        ? "starts, one per transaction (start_run)"
                        : "starts, " + std::to_string(kBulkStarts) + " per statement (start_run)",
                    sessions(s.sessions), bench::FormatRate(rate) + " starts/s",
                    bench::FormatRate(ceiling.tps) + " steps/s",
                    bench::FormatRatio(rate / ceiling.tps), bench::FormatCost(s.cost), ""});
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
                    "", "", "", ""});
  }
  rows.push_back({"idle RSS", "1 process × " + std::to_string(daemon_.slots) + " slots",
                  bench::FormatMiB(daemon_.rss_bytes) + " + " +
                      bench::FormatMiB(daemon_.step_process_rss_bytes) + " in " +
                      std::to_string(daemon_.step_processes) + " step processes",
                  "", "", "", ""});
  rows.push_back({"start to READY=1 (sd_notify)",
                  "1 process × " + std::to_string(daemon_.slots) + " slots",
                  bench::FormatMillis(daemon_.ready_ms) + " ms", "", "", "", ""});
  out << bench::MarkdownTable({"figure", "condition", "cairn", "pgbench", "cairn / pgbench",
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
                        {"isolation", config_.plugins.isolation},
                        {"claim_batch", config_.EffectiveClaimBatch()},
                        {"poll_interval_ms", config_.worker.poll_interval.count()},
                        {"schema", config_.database.schema}};
  Json pgbench = Json::array();
  for (const auto& [clients, p] : pgbench_runs_) {
    pgbench.push_back({{"sessions", clients},
                       {"steps", p.steps},
                       {"steps_per_second", p.tps},
                       {"per_step", CostJson(p.cost)}});
  }
  result["pgbench"] = pgbench;
  Json throughput = Json::array();
  for (const auto& t : throughput_) {
    const double steps = static_cast<double>(t.steps) / t.seconds;
    const double ceiling = pgbench_runs_.at(t.workers * t.slots).tps;
    throughput.push_back({{"workflow", kThroughputWorkflow},
                          {"daemons", "cairn run processes"},
                          {"processes", t.workers},
                          {"slots_per_process", t.slots},
                          {"sessions", t.workers * t.slots},
                          {"runs", t.runs},
                          {"steps", t.steps},
                          {"seconds", t.seconds},
                          {"wall_seconds", t.wall_seconds},
                          {"steps_per_second", steps},
                          {"workflows_per_second", static_cast<double>(t.runs) / t.seconds},
                          {"pgbench_steps_per_second", ceiling},
                          {"ratio_to_pgbench", steps / ceiling},
                          {"per_step_draining", CostJson(t.draining)},
                          {"per_step_with_start", CostJson(t.with_start)}});
  }
  result["throughput"] = throughput;
  Json starts = Json::array();
  for (const auto& s : starts_) {
    const double rate = static_cast<double>(s.starts) / s.seconds;
    const double ceiling = pgbench_runs_.at(s.sessions).tps;
    starts.push_back({{"mode", s.mode},
                      {"sessions", s.sessions},
                      {"starts", s.starts},
                      {"seconds", s.seconds},
                      {"starts_per_second", rate},
                      {"pgbench_steps_per_second", ceiling},
                      {"ratio_to_pgbench", rate / ceiling},
                      {"per_start", CostJson(s.cost)}});
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
                       {"p99_ms", r.p99_ms}});
  }
  result["signal_to_resume"] = resumes;
  result["daemon"] = {{"slots", daemon_.slots},
                      {"idle_rss_bytes", daemon_.rss_bytes},
                      {"idle_step_process_rss_bytes", daemon_.step_process_rss_bytes},
                      {"step_processes", daemon_.step_processes},
                      {"start_to_ready_ms", daemon_.ready_ms}};
  return result;
}

int Bench::Run(bool json) {
  const std::string& schema = config_.database.schema;
  Workflow(kThroughputWorkflow);
  Workflow(kWaitWorkflow);
  admin_ = std::make_unique<Admin>(ConnectionFor(config_, "cairn bench"));
  const bool exists =
      admin_->Read([&](store::Tx& tx) { return store::bench::SchemaExists(tx, schema); });
  if (exists) {
    throw InvalidArgumentError(
        "schema " + schema +
        " exists: cairn bench works only in a schema it creates, and drops it afterwards "
        "(unless --keep); name one that does not exist, or leave --schema out for "
        "cairn_bench_<pid>");
  }
  server_ = admin_->Read([](store::Tx& tx) { return store::bench::ReadServerInfo(tx); });
  const bench::Machine machine = bench::DescribeMachine();
  const double load_before = bench::LoadAverage();

  // From here on the schema is ours: dropped however the benchmark ends.
  struct Drop {
    const DaemonConfig& config;
    bool keep;
    ~Drop() {
      try {
        if (keep) {
          std::cerr << "cairn bench: kept schema " << config.database.schema << "\n";
          return;
        }
        store::Connection connection(ConnectionFor(config, "cairn bench"));
        connection.Transact([](store::Tx& tx) { store::DropSchema(tx); });
      } catch (const std::exception& e) {
        std::cerr << "cairn bench: dropping schema " << config.database.schema
                  << " failed: " << e.what() << "\n";
      }
    }
  } drop{config_, keep_};
  store::Migrate(admin_->connection());
  Prepare();

  for (int workers : settings_.workers) {
    for (int slots : settings_.concurrency) {
      // cairn, then pgbench at the same sessions, so that both meet the
      // same moment of a shared machine.
      throughput_.push_back(MeasureThroughput(workers, slots));
      PgbenchAt(workers * slots);
    }
  }
  for (int sessions : settings_.start_sessions) {
    starts_.push_back(MeasureSingleStarts(sessions));
    PgbenchAt(sessions);
  }
  starts_.push_back(MeasureBulkStarts());
  resumes_.push_back(MeasureResume(true));
  resumes_.push_back(MeasureResume(false));
  daemon_ = MeasureDaemon();

  progress_.Begin("claim latency");
  const int64_t big = settings_.claim_rows;
  const std::string size = bench::FormatRate(static_cast<double>(big));
  fills_.push_back(FillClaimRuns(kClaimReady, false));
  claims_.push_back(MeasureClaims("1 000 ready", kClaimReady, 0));
  fills_.push_back(FillClaimRuns(static_cast<int>(big), true));
  claims_.push_back(MeasureClaims("1 000 ready + " + size + " finished", kClaimReady, big));
  fills_.push_back(FillClaimRuns(static_cast<int>(big - kClaimReady), false));
  claims_.push_back(MeasureClaims(size + " ready + " + size + " finished", big, big));
  progress_.End("p50 " + bench::FormatMillis(claims_.front().p50_ms) + " ms with 1 000 ready, " +
                bench::FormatMillis(claims_.back().p50_ms) + " ms with " + size + " ready");

  const double load_after = bench::LoadAverage();
  if (json) {
    std::cout << ReportJson(machine, load_before, load_after).dump() << "\n";
  } else {
    std::cout << Report(machine, load_before, load_after);
  }
  return kExitOk;
}

}  // namespace

po::options_description BenchOptions() {
  po::options_description options("options");
  options.add_options()("quick",
                        "a smoke run of seconds: concurrency 1,8, 200 runs per row, 20 000 rows "
                        "for the claim, 50 signals")(
      "concurrency", po::value<std::string>()->value_name("LIST"),
      "slots per daemon, comma-separated (default 1,8,32)")(
      "workers", po::value<std::string>()->value_name("LIST"),
      "daemon processes, comma-separated (default 1,2)")(
      "runs", po::value<int>()->value_name("N"),
      "noop3 runs started before each throughput row (default 2000)")(
      "claim-rows", po::value<int>()->value_name("N"),
      "ready runs, and finished runs, of the claim's large backlog (default 1000000)")(
      "signals", po::value<int>()->value_name("N"),
      "signals timed with wake hints on and off (default 300)")(
      "keep",
      "keep the scratch schema afterwards (default: drop it; without --schema it is "
      "cairn_bench_<pid>)")("json", "print one JSON object instead of the table");
  // The connection options, but --schema names the scratch schema: the
  // configured one (or $CAIRN_SCHEMA) is never touched.
  po::options_description connection("connection");
  connection.add_options()("config,c", po::value<std::string>()->value_name("FILE"),
                           "the daemon's YAML configuration file (plugins, workflows, worker)")(
      "database-url", po::value<std::string>()->value_name("URL"),
      "PostgreSQL connection URI or libpq string (default: $CAIRN_DATABASE_URL)")(
      "schema", po::value<std::string>()->value_name("NAME"),
      "the scratch schema to create, use and drop; must not exist (default: "
      "cairn_bench_<pid>; the configured schema is never touched)");
  options.add(connection);
  return options;
}

int RunBench(const std::vector<std::string>& args) {
  auto vm = Parse("bench", args);
  // --concurrency is a list here, not the daemon's one figure: the daemons'
  // slots come from it row by row.
  po::variables_map config_vm = vm;
  config_vm.erase("concurrency");
  DaemonConfig config = LoadDaemonConfig(config_vm);
  if (!vm.count("config")) {
    throw InvalidArgumentError(
        "cairn bench needs --config: the daemon configuration whose plugins and workflows it "
        "runs (config/local.yaml in a checkout)");
  }
  // The configured schema is a real one: the benchmark works in its own.
  config.database.schema = vm.count("schema") ? vm["schema"].as<std::string>()
                                              : "cairn_bench_" + std::to_string(getpid());
  ValidateConfig(config);
  Settings settings = ReadSettings(vm);
  spdlog::set_level(spdlog::level::warn);

  struct sigaction action {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);

  Bench bench(std::move(config), std::move(settings), vm.count("keep") > 0);
  return bench.Run(vm.count("json") > 0);
}

}  // namespace cairn::cli
