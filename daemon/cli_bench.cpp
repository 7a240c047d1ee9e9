// `cairn bench`: measures what the fleet users run (real `cairn run`
// processes, on the configuration they use) against the ceiling of the same
// database, measured in the same run by pgbench executing one cairn step as
// one statement (sql/bench/pgbench_step.sql) at the same number of sessions,
// all in a scratch schema it creates and drops (docs/benchmark.md). Here: its
// options and entry, the tools of a run (interruption, scratch folder,
// progress line, own session) and the order of the phases.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <thread>

#include "bench.hpp"
#include "config_keys.hpp"
#include "migrate.hpp"

namespace cairn::cli {

namespace benchmark {

namespace {

std::atomic<bool> interrupted{false};

extern "C" void OnInterrupt(int signal_number) {
  if (interrupted.exchange(true)) {
    // A second one: stop at once, leaving the scratch schema behind.
    ::signal(signal_number, SIG_DFL);
    ::raise(signal_number);
  }
}

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

Settings ReadSettings(const po::variables_map& vm) {
  Settings s;
  if (vm.count("quick")) {
    s.quick = true;
    s.concurrency = {1, 8};
    s.batch_sizes = {8};
    s.batch_concurrency = {2};
    s.runs = 200;
    s.rounds = 1;
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
  if (vm.count("batch-sizes")) {
    s.batch_sizes =
        ParseList("batch-sizes", vm["batch-sizes"].as<std::string>(), config::kMaxBatchSize);
  }
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
  positive("rounds", s.rounds, 1, 20);
  positive("claim-rows", s.claim_rows, 2 * kClaimReady, 100000000);
  positive("signals", s.signals, 1, 100000);
  return s;
}

bench::Counters Convert(const store::bench::ServerCounters& c) {
  return {c.commits, c.next_xid, c.wal_bytes, c.wal_fpi, c.wal_syncs};
}

}  // namespace

bool Interrupted() { return interrupted.load(); }

void CheckInterrupted() {
  if (Interrupted()) throw Error(ErrorKind::kPermanent, "interrupted");
}

void Sleep(milliseconds duration) {
  const auto until = Clock::now() + duration;
  while (Clock::now() < until) {
    CheckInterrupted();
    std::this_thread::sleep_for(std::min<Clock::duration>(milliseconds(20), until - Clock::now()));
  }
}

Progress::Progress() : tty_(::isatty(2) != 0) {}

void Progress::Begin(const std::string& phase) {
  phase_ = phase;
  if (tty_) {
    std::cerr << "\r\033[K" << phase_ << std::flush;
  } else {
    std::cerr << "cairn bench: " << phase_ << "\n";
  }
}

void Progress::Update(const std::string& state) {
  if (tty_) std::cerr << "\r\033[K" << phase_ << ": " << state << std::flush;
}

void Progress::End(const std::string& summary) {
  if (tty_) {
    std::cerr << "\r\033[K" << phase_ << ": " << summary << "\n";
  } else {
    std::cerr << "cairn bench: " << phase_ << ": " << summary << "\n";
  }
}

Admin::Reading Admin::Snapshot() {
  auto counters = store::bench::ReadServerCounters(connection_);
  reads_ += 2;
  return {Convert(counters), reads_};
}

bench::UnitCost Cost(const Admin::Reading& before, const Admin::Reading& after, int64_t units) {
  return bench::CostPerUnit(before.counters, after.counters, after.own_reads - before.own_reads,
                            units);
}

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
  temp_ = std::make_unique<process::TempDir>("cairn-bench");
  pgbench_script_ = temp_->WritePrivate("pgbench_step.sql",
                                        store::bench::PgbenchStepScript(config_.database.schema));
  // Every definition of workflows.paths, as a daemon registers them, so that
  // runs can be started before the first daemon is up.
  admin_->connection().Transact([&](store::Tx& tx) {
    for (const auto* d : definitions_.All()) {
      store::RegisterDefinition(tx, {d->hash, d->name, d->version, d->FirstStep(), ToJson(*d)});
    }
  });
}

void Bench::SettleServer() {
  progress_.Update("vacuum and checkpoint");
  admin_->connection().Autocommit([](store::Tx& tx) { store::bench::VacuumPhaseTables(tx); });
  if (!may_checkpoint_) return;
  admin_->connection().Autocommit([](store::Tx& tx) { store::bench::Checkpoint(tx); });
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
  may_checkpoint_ = admin_->Read([](store::Tx& tx) { return store::bench::MayCheckpoint(tx); });

  // Each cairn row, then pgbench at the same sessions. A round measures
  // every row once, so that a spell of noise on a shared machine falls on
  // one round of each row, not on every round of one row.
  const auto throughput_row = [&](int round, int workers, int slots, int batch_size) {
    throughput_.push_back(MeasureThroughput(round, workers, slots, batch_size));
    const size_t ceiling = MeasurePgbench(workers * slots, RowName(throughput_.back()));
    throughput_.back().ceiling = ceiling;
  };
  for (int round = 1; round <= settings_.rounds; ++round) {
    for (int workers : settings_.workers) {
      for (int slots : settings_.concurrency) throughput_row(round, workers, slots, 1);
    }
    for (int batch_size : settings_.batch_sizes) {
      for (int slots : settings_.batch_concurrency) throughput_row(round, 1, slots, batch_size);
    }
  }
  // Rows of starts share the pgbench run measured right after them.
  const auto starts_rows = [&](std::vector<Starts> rows, int sessions, const std::string& what) {
    const size_t ceiling = MeasurePgbench(sessions, what);
    for (auto& row : rows) {
      row.ceiling = ceiling;
      starts_.push_back(std::move(row));
    }
  };
  // With wake hints and without: notifying commits are serialised.
  for (int sessions : settings_.start_sessions) {
    starts_rows({MeasureSingleStarts(sessions, true), MeasureSingleStarts(sessions, false)},
                sessions, "starts, one per transaction");
  }
  {
    // The bulk starts' own ceiling is a plain INSERT of the same rows.
    std::vector<Starts> bulk = {MeasureBulkStarts(store::bench::BulkStartApi::kStartRun),
                                MeasureBulkStarts(store::bench::BulkStartApi::kStartRuns),
                                MeasureBulkStarts(store::bench::BulkStartApi::kBareInsert)};
    const double insert_rate = static_cast<double>(bulk.back().starts) / bulk.back().seconds;
    bulk[0].insert_rate = insert_rate;
    bulk[1].insert_rate = insert_rate;
    starts_rows(std::move(bulk), 1, "starts in bulk");
  }
  step_latency_ = MeasureStepLatency();
  resumes_.push_back(MeasureResume(true));
  resumes_.push_back(MeasureResume(false));
  daemon_ = MeasureDaemon();

  progress_.Begin("claim latency");
  const int64_t big = settings_.claim_rows;
  const std::string size = bench::FormatRate(static_cast<double>(big));
  // Each backlog settles like every phase before its claims are timed: a
  // fill of a million rows leaves the server a checkpoint's worth of dirty
  // pages and an autovacuum of the table due, which would otherwise land in
  // the samples of one backlog and not of another.
  const auto claims_after_fill = [&](Fill fill, const std::string& backlog, int64_t ready,
                                     int64_t finished) {
    fills_.push_back(std::move(fill));
    SettleServer();
    claims_.push_back(MeasureClaims(backlog, ready, finished));
  };
  claims_after_fill(FillClaimRuns(kClaimReady, false), "1 000 ready", kClaimReady, 0);
  claims_after_fill(FillClaimRuns(static_cast<int>(big), true),
                    "1 000 ready + " + size + " finished", kClaimReady, big);
  claims_after_fill(FillClaimRuns(static_cast<int>(big - kClaimReady), false),
                    size + " ready + " + size + " finished", big, big);
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

}  // namespace benchmark

po::options_description BenchOptions() {
  po::options_description options("options");
  options.add_options()("quick",
                        "a smoke run of seconds: concurrency 1,8, 200 runs per row, 20 000 rows "
                        "for the claim, 50 signals")(
      "concurrency", po::value<std::string>()->value_name("LIST"),
      "slots per daemon, comma-separated (default 1,8,32)")(
      "workers", po::value<std::string>()->value_name("LIST"),
      "daemon processes, comma-separated (default 1,2)")(
      "batch-sizes", po::value<std::string>()->value_name("LIST"),
      "worker.batch_size of the batch mode rows, one process at 1, 2 and 8 slots, "
      "comma-separated (default 32)")(
      "runs", po::value<int>()->value_name("N"),
      "noop3 runs started before each throughput row (default 2000)")(
      "rounds", po::value<int>()->value_name("N"),
      "times each throughput row and its pgbench run are measured, alternating; the table "
      "adds each row's medians (default 3, 1 with --quick)")(
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
  benchmark::Settings settings = benchmark::ReadSettings(vm);
  spdlog::set_level(spdlog::level::warn);

  struct sigaction action {};
  action.sa_handler = benchmark::OnInterrupt;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);

  benchmark::Bench bench(std::move(config), std::move(settings), vm.count("keep") > 0);
  return bench.Run(vm.count("json") > 0);
}

}  // namespace cairn::cli
