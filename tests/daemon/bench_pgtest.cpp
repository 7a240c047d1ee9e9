// `cairn bench` against the harness's PostgreSQL: the smoke run of CI
// (`--quick`, seconds) reports every figure with sane values, works in a
// scratch schema of its own that it drops, and refuses a schema it did not
// create, leaving that schema's data as it was. Not a timed test: nothing
// here asserts a speed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "daemon_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

class BenchCommand : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (HasFatalFailure()) return;
    // Data of the user's schema, which bench must leave alone.
    Sql("INSERT INTO {s}.runs (workflow, definition_version, definition_hash, cursor) "
        "VALUES ('orders', 1, 'hash-1', 'reserve')");
    config_ = dir_.Write("bench.yaml", "plugins:\n  directories: [\"" + BuiltPluginDir() +
                                           "\"]\nworkflows:\n  paths: [\"" + SourceDir() +
                                           "/config/workflows/bench.yaml\"]\n");
  }

  CommandResult Bench(std::vector<std::string> args) const {
    args.insert(args.begin(), "bench");
    args.insert(args.end(), {"--config", config_, "--database-url", url()});
    return RunCommand(CairnBinary(), args, 280s);
  }

  int64_t UserRuns() const { return SqlInt("SELECT count(*) FROM {s}.runs"); }

  bool SchemaExists(const std::string& name) const {
    return SqlBool("SELECT to_regnamespace('" + name + "') IS NOT NULL");
  }

  TempDir dir_{"cairn-bench-test"};
  std::string config_;
};

// The per-unit costs of one phase: a step always writes, so it commits at
// least one durable transaction and some WAL.
void ExpectCost(const Json& cost, const std::string& where) {
  SCOPED_TRACE(where);
  for (const char* key : {"transactions", "durable_commits", "read_only_transactions", "wal_bytes",
                          "wal_full_page_images", "wal_fsyncs"}) {
    ASSERT_TRUE(cost.contains(key)) << key;
  }
  EXPECT_GT(cost["transactions"].get<double>(), 0);
  EXPECT_GT(cost["durable_commits"].get<double>(), 0);
  EXPECT_GE(cost["transactions"].get<double>(), cost["durable_commits"].get<double>() - 1e-9);
  EXPECT_GT(cost["wal_bytes"].get<double>(), 0);
}

void ExpectPercentiles(const Json& row, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_GT(row["p50_ms"].get<double>(), 0);
  EXPECT_GE(row["p99_ms"].get<double>(), row["p50_ms"].get<double>());
}

TEST_F(BenchCommand, QuickRunReportsEveryFigureAndDropsItsSchema) {
  const int64_t checkpoints_before = SqlInt("SELECT checkpoints_req FROM pg_stat_bgwriter");
  const CommandResult result = Bench({"--quick", "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err << result.out;
  // The progress line goes to standard error; standard output is the JSON.
  EXPECT_THAT(result.err, HasSubstr("pgbench"));
  const Json report = Json::parse(result.out);

  // The harness connects as a superuser: every phase that reports a cost
  // per unit (each throughput row, each pgbench run, each start row and
  // pgbench's step latency), and each backlog's claims after its fill,
  // starts right after a checkpoint of its own.
  EXPECT_TRUE(report["settings"]["checkpoint_before_phases"].get<bool>());
  const size_t costed_phases = report["throughput"].size() + report["pgbench"].size() +
                               report["starts"].size() + 1 + report["claim_latency"].size();
  EXPECT_GE(SqlInt("SELECT checkpoints_req FROM pg_stat_bgwriter") - checkpoints_before,
            static_cast<int64_t>(costed_phases));

  const std::string scratch = report["settings"]["schema"];
  EXPECT_THAT(scratch, ::testing::StartsWith("cairn_bench_"));
  EXPECT_FALSE(SchemaExists(scratch)) << "the scratch schema was left behind";
  EXPECT_EQ(SqlInt("SELECT count(*) FROM pg_roles WHERE starts_with(rolname, '" + scratch + "_')"),
            0)
      << "the scratch schema's roles were left behind";
  EXPECT_EQ(UserRuns(), 1) << "the user's schema was touched";
  EXPECT_TRUE(report["settings"]["quick"].get<bool>());
  // One round with --quick: each row's medians are its own figures.
  EXPECT_EQ(report["settings"]["rounds"].get<int>(), 1);
  ASSERT_EQ(report["throughput_medians"].size(), report["throughput"].size());
  for (size_t i = 0; i < report["throughput"].size(); ++i) {
    EXPECT_EQ(report["throughput_medians"][i]["rounds"].get<int>(), 1);
    EXPECT_DOUBLE_EQ(report["throughput_medians"][i]["ratio_to_pgbench"].get<double>(),
                     report["throughput"][i]["ratio_to_pgbench"].get<double>());
  }
  EXPECT_TRUE(report["server"]["fsync"].is_string());
  EXPECT_GT(report["machine"]["cores"].get<int>(), 0);

  // pgbench at every session count cairn ran at: 1 and 2 processes x 1 and 8 slots.
  std::set<int> pgbench_sessions;
  for (const auto& p : report["pgbench"]) {
    pgbench_sessions.insert(p["sessions"].get<int>());
    EXPECT_GT(p["steps_per_second"].get<double>(), 0);
    EXPECT_GT(p["steps"].get<int64_t>(), 0);
    ExpectCost(p["per_step"], "pgbench " + p["sessions"].dump());
  }
  EXPECT_EQ(pgbench_sessions, (std::set<int>{1, 2, 8, 16}));
  // pgbench runs right after each row it is the ceiling of, not once per
  // session count: every throughput row, each pair of one-per-transaction
  // start rows (wake hints on and off) and the bulk start rows.
  int64_t single_start_rows = 0;
  for (const auto& s : report["starts"]) single_start_rows += s["mode"] == "single" ? 1 : 0;
  EXPECT_EQ(report["pgbench"].size(), report["throughput"].size() + single_start_rows / 2 + 1);
  for (const auto& p : report["pgbench"]) EXPECT_FALSE(p["after"].get<std::string>().empty());

  std::set<std::tuple<int, int, int>> rows;
  for (const auto& t : report["throughput"]) {
    const std::string where = "throughput " + t["processes"].dump() + "x" +
                              t["slots_per_process"].dump() + "x" + t["batch_size"].dump();
    SCOPED_TRACE(where);
    rows.insert(
        {t["processes"].get<int>(), t["slots_per_process"].get<int>(), t["batch_size"].get<int>()});
    if (t["batch_size"].get<int>() > 1) {
      // A round of a batch's steps is one commit: one run at a time costs
      // at least one a step.
      EXPECT_LT(t["per_step_draining"]["durable_commits"].get<double>(), 0.6);
    }
    EXPECT_EQ(t["round"].get<int>(), 1);
    EXPECT_EQ(t["runs"].get<int64_t>(), 200);
    EXPECT_EQ(t["steps"].get<int64_t>(), 600);
    EXPECT_GT(t["steps_per_second"].get<double>(), 0);
    EXPECT_GT(t["workflows_per_second"].get<double>(), 0);
    EXPECT_GT(t["ratio_to_pgbench"].get<double>(), 0);
    EXPECT_EQ(t["daemons"], "cairn run processes");
    ExpectCost(t["per_step_draining"], where + " draining");
    ExpectCost(t["per_step_with_start"], where + " with start");
    // The start's own transactions come on top of the draining ones.
    EXPECT_GT(t["per_step_with_start"]["durable_commits"].get<double>(),
              t["per_step_draining"]["durable_commits"].get<double>());
  }
  // The batch mode row: one process of 2 slots, batches of 8.
  EXPECT_EQ(rows, (std::set<std::tuple<int, int, int>>{
                      {1, 1, 1}, {1, 8, 1}, {2, 1, 1}, {2, 8, 1}, {1, 2, 8}}));

  std::set<std::string> start_modes;
  // Starts one per transaction, from each number of sessions, with wake
  // hints and without.
  std::set<std::pair<int, bool>> single_starts;
  for (const auto& s : report["starts"]) {
    start_modes.insert(s["mode"].get<std::string>());
    if (s["mode"] == "single")
      single_starts.insert({s["sessions"].get<int>(), s["wake_hints"].get<bool>()});
    EXPECT_GT(s["starts_per_second"].get<double>(), 0);
    EXPECT_GT(s["ratio_to_pgbench"].get<double>(), 0);
    ExpectCost(s["per_start"], "starts " + s["mode"].get<std::string>());
    // Bulk starts through the SQL API, against a plain INSERT of as many
    // runs measured right after them.
    const bool through_the_api = s["mode"] == "bulk" || s["mode"] == "bulk_set";
    EXPECT_EQ(s.contains("ratio_to_insert"), through_the_api) << s.dump();
    if (through_the_api) {
      EXPECT_GT(s["insert_runs_per_second"].get<double>(), 0);
      EXPECT_GT(s["ratio_to_insert"].get<double>(), 0);
    }
  }
  EXPECT_EQ(start_modes, (std::set<std::string>{"single", "bulk", "bulk_set", "bulk_insert"}));
  EXPECT_EQ(single_starts,
            (std::set<std::pair<int, bool>>{{1, true}, {1, false}, {8, true}, {8, false}}));

  std::set<bool> hints;
  for (const auto& r : report["signal_to_resume"]) {
    hints.insert(r["wake_hints"].get<bool>());
    EXPECT_EQ(r["signals"].get<int>(), 50);
    ExpectPercentiles(r, "signal to resume");
    EXPECT_GT(r["p99_ratio_to_pgbench"].get<double>(), 0);
  }
  EXPECT_EQ(hints, (std::set<bool>{true, false}));
  // The floor under a resume: pgbench's step, one session, at the signals' pace.
  EXPECT_EQ(report["pgbench_step_latency"]["steps"].get<int>(), 50);
  ExpectPercentiles(report["pgbench_step_latency"], "pgbench step latency");

  ASSERT_EQ(report["claim_latency"].size(), 3u);
  for (const auto& c : report["claim_latency"]) ExpectPercentiles(c, c["backlog"]);
  EXPECT_GT(report["claim_latency"][1]["finished_runs"].get<int64_t>(), 0);

  EXPECT_GT(report["daemon"]["idle_rss_bytes"].get<int64_t>(), 0);
  // Shared pages counted once: never more than the resident sets.
  EXPECT_GT(report["daemon"]["idle_pss_bytes"].get<int64_t>(), 0);
  EXPECT_LE(report["daemon"]["idle_pss_bytes"].get<int64_t>(),
            report["daemon"]["idle_rss_bytes"].get<int64_t>());
  EXPECT_LE(report["daemon"]["idle_step_process_pss_bytes"].get<int64_t>(),
            report["daemon"]["idle_step_process_rss_bytes"].get<int64_t>());
  EXPECT_GT(report["daemon"]["start_to_ready_ms"].get<double>(), 0);
}

// Each round measures every throughput row again on runs of its own, with
// pgbench right after it, and the report adds each row's medians: the
// ratio's is the median of the rounds' own ratios.
TEST_F(BenchCommand, RoundsMeasureEveryRowAgainAndReportItsMedians) {
  const CommandResult result =
      Bench({"--quick", "--json", "--rounds", "3", "--workers", "1", "--concurrency", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.err << result.out;
  const Json report = Json::parse(result.out);
  EXPECT_EQ(report["settings"]["rounds"].get<int>(), 3);
  // One slot, and the batch mode row of --quick.
  std::map<std::tuple<int, int, int>, std::vector<double>> ratios;
  std::map<std::tuple<int, int, int>, std::set<int>> rounds;
  for (const auto& t : report["throughput"]) {
    const auto row = std::make_tuple(t["processes"].get<int>(), t["slots_per_process"].get<int>(),
                                     t["batch_size"].get<int>());
    SCOPED_TRACE(t.dump());
    // Only this round's runs: the runs of the rounds before it are not in
    // its window.
    EXPECT_EQ(t["steps"].get<int64_t>(), 600);
    rounds[row].insert(t["round"].get<int>());
    ratios[row].push_back(t["ratio_to_pgbench"].get<double>());
  }
  const std::set<int> all_rounds{1, 2, 3};
  ASSERT_EQ(rounds.size(), 2u);
  for (const auto& [row, seen] : rounds) EXPECT_EQ(seen, all_rounds);
  for (const char* round : {"round 1 of 3", "round 2 of 3", "round 3 of 3"}) {
    EXPECT_EQ(std::count_if(report["pgbench"].begin(), report["pgbench"].end(),
                            [&](const Json& p) {
                              return p["after"].get<std::string>().find(round) != std::string::npos;
                            }),
              2)
        << round;
  }
  ASSERT_EQ(report["throughput_medians"].size(), 2u);
  for (const auto& m : report["throughput_medians"]) {
    SCOPED_TRACE(m.dump());
    const auto row = std::make_tuple(m["processes"].get<int>(), m["slots_per_process"].get<int>(),
                                     m["batch_size"].get<int>());
    std::vector<double> sorted = ratios.at(row);
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(m["rounds"].get<int>(), 3);
    EXPECT_DOUBLE_EQ(m["ratio_to_pgbench"].get<double>(), sorted[1]);
    EXPECT_DOUBLE_EQ(m["min_ratio_to_pgbench"].get<double>(), sorted[0]);
    EXPECT_DOUBLE_EQ(m["max_ratio_to_pgbench"].get<double>(), sorted[2]);
    EXPECT_GT(m["steps_per_second"].get<double>(), 0);
    EXPECT_GT(m["pgbench_steps_per_second"].get<double>(), 0);
  }
}

TEST_F(BenchCommand, RefusesASchemaItDidNotCreate) {
  const CommandResult result = Bench({"--quick", "--schema", schema()});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_THAT(result.err, HasSubstr(schema()));
  EXPECT_THAT(result.err, HasSubstr("exists"));
  EXPECT_TRUE(SchemaExists(schema()));
  EXPECT_EQ(UserRuns(), 1);
}

TEST_F(BenchCommand, BadOptionsChangeNothing) {
  const std::string scratch = schema() + "_bench";
  const CommandResult refused = Bench({"--quick", "--schema", scratch, "--runs", "0"});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("--runs"));
  EXPECT_FALSE(SchemaExists(scratch)) << "bad input changed something";
  for (const char* rounds : {"0", "21"}) {
    const CommandResult out_of_range = Bench({"--quick", "--schema", scratch, "--rounds", rounds});
    EXPECT_EQ(out_of_range.exit_code, 2) << out_of_range.err;
    EXPECT_THAT(out_of_range.err, HasSubstr("--rounds must be between 1 and 20"));
    EXPECT_FALSE(SchemaExists(scratch)) << "bad input changed something";
  }
}

}  // namespace
}  // namespace cairn::test
