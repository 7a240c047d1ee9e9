// The arithmetic and text of `cairn bench`'s report, apart from the
// measuring so that it can be tested without a database: percentiles,
// reading pgbench's summary, costs per unit from two counter readings, and
// the markdown table. Plain values and pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::bench {

// The p-th percentile (0..100) of values, interpolated linearly between the
// closest ranks; 0 for no values.
double Percentile(std::vector<double> values, double p);

// What pgbench's summary says about a run of a custom script.
struct PgbenchSummary {
  double tps = 0;            // "tps = ... (without initial connection time)"
  int64_t transactions = 0;  // "number of transactions actually processed: N"
  int64_t failed = 0;        // "number of failed transactions: N" (0 when absent)
};
// nullopt when the text has no tps line or no processed count.
std::optional<PgbenchSummary> ParsePgbenchSummary(std::string_view output);

// The latencies in milliseconds of pgbench's per-transaction log (--log):
// each line's elapsed time less its schedule lag (the wait for its turn
// under --rate, which pgbench counts in the time). Lines that are not
// transactions are skipped, and so are those whose time is all schedule
// lag: pgbench reads its clock once per wake-up, and logs no time for the
// statements of a transaction whose result was there when it woke to
// start it.
std::vector<double> ParsePgbenchLatencies(std::string_view log);

// The server's cumulative counters at one instant (see store_bench.hpp).
struct Counters {
  int64_t commits = 0;
  int64_t next_xid = 0;
  int64_t wal_bytes = 0;
  int64_t wal_fpi = 0;
  int64_t wal_syncs = 0;
};

// What a phase cost per unit (a step, a start): every committed transaction,
// read-only ones included; durable commits (the transactions that wrote, so
// that their commit is flushed to the WAL); WAL bytes, full-page images and
// fsyncs.
struct UnitCost {
  double transactions = 0;
  double durable_commits = 0;
  double wal_bytes = 0;
  double wal_fpi = 0;
  double wal_syncs = 0;
};
// The cost between two readings, per unit; own_reads (the benchmark's own
// read-only transactions in between) are not the phase's.
UnitCost CostPerUnit(const Counters& before, const Counters& after, int64_t own_reads,
                     int64_t units);

// Numbers as the table shows them: a rate with no decimals below 10 000 and
// thousands grouped above ("12 345"); a ratio with two significant decimals;
// milliseconds with two decimals below 10; bytes in MiB with one decimal.
std::string FormatRate(double per_second);
std::string FormatRatio(double ratio);
std::string FormatMillis(double ms);
std::string FormatMiB(int64_t bytes);
// "transactions · durable commits · WAL bytes · full-page images"
std::string FormatCost(const UnitCost& cost);
// The shape of a fleet: "1 process × 8 slots", "2 processes × 1 slot".
// "1 process × 8 slots", and ", batches of 32" in batch mode.
std::string FormatFleet(int processes, int slots, int batch_size = 1);

// A markdown table with aligned columns: readable in a terminal, and pasted
// as is into a document.
std::string MarkdownTable(const std::vector<std::string>& header,
                          const std::vector<std::vector<std::string>>& rows);

}  // namespace cairn::bench
