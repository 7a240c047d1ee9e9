// Store operations of `cairn bench` alone (sql/bench): server counters read
// around a measured phase, backlogs filled with generate_series, a phase's
// window and latencies read back, and the pgbench script of the ceiling. The
// daemon never calls these. Same rules as store.hpp: free functions on the
// caller's Tx, plain structs in and out.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model.hpp"
#include "store.hpp"

namespace cairn::store::bench {

// Cumulative counters of the server; a phase costs the difference of two
// readings. commits and rollbacks are the database's (read-only transactions
// included); next_xid moves once per transaction that wrote (and per writing
// subtransaction); wal_* are the whole server's.
struct ServerCounters {
  int64_t commits = 0;
  int64_t rollbacks = 0;
  int64_t next_xid = 0;
  int64_t wal_bytes = 0;
  int64_t wal_records = 0;
  int64_t wal_fpi = 0;    // full-page images
  int64_t wal_syncs = 0;  // WAL fsyncs (0 with fsync off)
};
// Reads the counters in two transactions: the first hands this session's
// own statistics over, so that the second sees everything up to it. Call it
// outside a transaction (Connection::Autocommit) or between two.
ServerCounters ReadServerCounters(Connection& connection);

struct ServerInfo {
  std::string version;  // version()
  int version_num = 0;
  std::string host;  // or "unix socket"
  int port = 0;
  std::string fsync;
  std::string synchronous_commit;
  std::string full_page_writes;
  std::string wal_level;
  std::string shared_buffers;
  std::string max_wal_size;
  std::string checkpoint_timeout;
  int max_connections = 0;
  std::string shared_preload_libraries;  // "" when this role may not see it
};
ServerInfo ReadServerInfo(Tx& tx);

// Whether a schema of this name exists, whatever it holds.
bool SchemaExists(Tx& tx, const std::string& schema);

// Client sessions of the database other than the caller's.
int64_t ClientSessions(Tx& tx);

// The SQL API a bulk start goes through: start_run once per run
// (bench_start_runs), or start_runs once for them all (bench_start_runs_set);
// or none, the ceiling both are measured against: one plain INSERT of the
// same rows (bench_insert_runs).
enum class BulkStartApi { kStartRun, kStartRuns, kBareInsert };

// `count` runs of `workflow` through `api` in one statement of this
// transaction, with `input` (which tags them to their phase) in `queue`.
// Returns how many.
int64_t StartRunsInBulk(Tx& tx, BulkStartApi api, const std::string& workflow, const Json& input,
                        const std::string& queue, int count);

// Turns the session's wake hints off (cairn.wake_hints): its starts notify
// nobody.
void TurnOffWakeHints(Tx& tx);

// Rows inserted straight into runs with generate_series (see
// sql/bench/bench_fill_runs.sql), ready and due, or completed.
struct RunFill {
  int count = 0;
  std::string workflow;
  int definition_version = 0;
  std::string definition_hash;
  std::string queue;
  std::string cursor;
  bool finished = false;
};
int64_t FillRuns(Tx& tx, const RunFill& fill);
// ANALYZE of runs, so that the next statements are planned on its contents.
void AnalyzeRuns(Tx& tx);

// VACUUM of the tables the phases write (sql/bench/bench_vacuum.sql). Call
// it outside a transaction (Connection::Autocommit).
void VacuumPhaseTables(Tx& tx);
// Whether this session's role may run CHECKPOINT (sql/bench/bench_checkpoint.sql).
bool MayCheckpoint(Tx& tx);
// A CHECKPOINT, before a measured phase. Call it outside a transaction
// (Connection::Autocommit).
void Checkpoint(Tx& tx);

// Runs tagged with `tag` (a JSON object their input contains), per status.
std::unordered_map<RunStatus, int64_t> PhaseStatus(Tx& tx, const Json& tag);
// The tagged runs not yet finished (ready, running, waiting, compensating),
// per status, read through those statuses' indexes alone: what a phase polls
// while it runs.
std::unordered_map<RunStatus, int64_t> UnfinishedRunsOfPhase(Tx& tx, const Json& tag);

struct PhaseWindow {
  int64_t steps = 0;     // step commits of the tagged runs
  double seconds = 0.0;  // from their first step commit to their last finish
};
PhaseWindow ReadPhaseWindow(Tx& tx, const Json& tag);

// Milliseconds from signal to resume of each resumed wait of the tagged runs.
std::vector<double> ResumeLatencies(Tx& tx, const Json& tag);

// The pgbench script of one step (sql/bench/pgbench_step.sql) with the
// schema filled in, and the queue its backlog must be filled in.
std::string PgbenchStepScript(const std::string& schema);
inline constexpr const char* kPgbenchQueue = "cairn_bench_pgbench";

}  // namespace cairn::store::bench
