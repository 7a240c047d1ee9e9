// The arithmetic of `cairn bench`'s report, without a database: percentiles,
// pgbench's summary as PostgreSQL 15 prints it, costs per unit from two
// counter readings, and the table's formatting.
#include "bench_report.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cairn::bench {
namespace {

TEST(BenchReport, PercentileInterpolatesBetweenClosestRanks) {
  EXPECT_EQ(Percentile({}, 50), 0);
  EXPECT_EQ(Percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 50), 2.5);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_DOUBLE_EQ(Percentile(hundred, 99), 99.01);
  EXPECT_DOUBLE_EQ(Percentile(hundred, 100), 100);
  EXPECT_DOUBLE_EQ(Percentile(hundred, 0), 1);
}

TEST(BenchReport, ReadsPgbenchSummary) {
  const std::string output =
      "transaction type: /tmp/cairn-bench-x/pgbench_step.sql\n"
      "scaling factor: 1\nquery mode: prepared\nnumber of clients: 8\n"
      "number of threads: 2\nmaximum number of tries: 1\n"
      "number of transactions per client: 750\n"
      "number of transactions actually processed: 6000/6000\n"
      "number of failed transactions: 0 (0.000%)\n"
      "latency average = 1.842 ms\n"
      "initial connection time = 12.087 ms\n"
      "tps = 4342.618233 (without initial connection time)\n";
  const auto summary = ParsePgbenchSummary(output);
  ASSERT_TRUE(summary.has_value());
  EXPECT_DOUBLE_EQ(summary->tps, 4342.618233);
  EXPECT_EQ(summary->transactions, 6000);
  EXPECT_EQ(summary->failed, 0);

  EXPECT_FALSE(ParsePgbenchSummary("pgbench: error: connection to server failed\n"));
  const auto failed = ParsePgbenchSummary(
      "number of transactions actually processed: 10/12\n"
      "number of failed transactions: 2 (16.667%)\n"
      "tps = 5.0 (without initial connection time)\n");
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->failed, 2);
}

// A line's latency is its time less its schedule lag; a line pgbench
// failed ("failed" in place of the time) or a stray one is skipped.
TEST(BenchReport, ReadsPgbenchLatenciesLessTheirScheduleLag) {
  const std::string log =
      "0 1 1250 0 1764672000 100 50\n"
      "0 2 4300 0 1764672000 10100 300\n"
      "0 3 failed 0 1764672000 20100 0\n"
      "0 4 900 0 1764672000 30100\n"
      "progress: 1.0 s\n";
  EXPECT_EQ(ParsePgbenchLatencies(log), (std::vector<double>{1.2, 4.0, 0.9}));
  EXPECT_TRUE(ParsePgbenchLatencies("").empty());
}

// pgbench reads its clock once per wake-up: when a transaction's result was
// already there as it woke to start it (pgbench itself waited for the CPU),
// it logs the schedule lag as the whole time. Such a line has no latency to
// give and is skipped, not read as 0 ms.
TEST(BenchReport, SkipsPgbenchLinesWhoseTimeIsAllScheduleLag) {
  const std::string log =
      "0 1 1250 0 1764672000 100 50\n"
      "0 2 140 0 1764672000 10100 140\n"
      "0 3 900 0 1764672000 20100 100\n";
  EXPECT_EQ(ParsePgbenchLatencies(log), (std::vector<double>{1.2, 0.8}));
}

TEST(BenchReport, CostPerUnitTakesTheOwnReadsOff) {
  Counters before{100, 1000, 1 << 20, 3, 40};
  Counters after{100 + 250 + 4, 1000 + 120, (1 << 20) + 100 * 1500, 3 + 10, 40 + 90};
  const UnitCost cost = CostPerUnit(before, after, 4, 100);
  EXPECT_DOUBLE_EQ(cost.transactions, 2.5);
  EXPECT_DOUBLE_EQ(cost.durable_commits, 1.2);
  EXPECT_DOUBLE_EQ(cost.wal_bytes, 1500);
  EXPECT_DOUBLE_EQ(cost.wal_fpi, 0.1);
  EXPECT_DOUBLE_EQ(cost.wal_syncs, 0.9);
  const UnitCost none = CostPerUnit(before, after, 0, 0);
  EXPECT_EQ(none.transactions, 0);
}

TEST(BenchReport, FormatsForTheTable) {
  EXPECT_EQ(FormatRate(4.25), "4.2");
  EXPECT_EQ(FormatRate(17672.4), "17 672");
  EXPECT_EQ(FormatRate(1234567), "1 234 567");
  EXPECT_EQ(FormatRatio(0.194), "0.19");
  EXPECT_EQ(FormatRatio(2.66), "2.7");
  EXPECT_EQ(FormatMillis(1.254), "1.25");
  EXPECT_EQ(FormatMillis(132.4), "132");
  EXPECT_EQ(FormatMiB(17 * 1024 * 1024), "17.0 MiB");
  EXPECT_EQ(FormatCost({2.35, 1.13, 1529, 0, 0}), "2.35 · 1.13 · 1 529 · 0.00");
  EXPECT_EQ(FormatCost({0.001, 0.001, 873, 0.0178, 0}), "0.001 · 0.001 · 873 · 0.018");
  EXPECT_EQ(FormatFleet(1, 8), "1 process × 8 slots");
  EXPECT_EQ(FormatFleet(2, 1), "2 processes × 1 slot");

  const std::string table = MarkdownTable({"figure", "cairn / pgbench"}, {{"×", "0.5"}});
  EXPECT_EQ(table,
            "| figure | cairn / pgbench |\n"
            "|--------|-----------------|\n"
            "| ×      | 0.5             |\n");
}

}  // namespace
}  // namespace cairn::bench
