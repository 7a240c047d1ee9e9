// See store_bench.hpp: one function per file of sql/bench.
#include "store_bench.hpp"

#include "identifier.hpp"
#include "sql_catalog.hpp"
#include "store_internal.hpp"

namespace cairn::store::bench {

ServerCounters ReadServerCounters(Connection& connection) {
  connection.Autocommit([](Tx& tx) { Internal(tx).Exec("bench_flush_session_stats"); });
  return connection.Autocommit([](Tx& tx) {
    const pqxx::row row = Internal(tx).Exec("bench_server_counters")[0];
    ServerCounters counters;
    counters.commits = row["xact_commit"].as<int64_t>();
    counters.rollbacks = row["xact_rollback"].as<int64_t>();
    counters.next_xid = row["next_xid"].as<int64_t>();
    counters.wal_bytes = row["wal_bytes"].as<int64_t>();
    counters.wal_records = row["wal_records"].as<int64_t>();
    counters.wal_fpi = row["wal_fpi"].as<int64_t>();
    counters.wal_syncs = row["wal_sync"].as<int64_t>();
    return counters;
  });
}

ServerInfo ReadServerInfo(Tx& tx) {
  const pqxx::row row = Internal(tx).Exec("bench_server_info")[0];
  ServerInfo info;
  info.version = row["version"].c_str();
  info.version_num = row["version_num"].as<int>();
  info.host = row["host"].c_str();
  info.port = row["port"].as<int>();
  info.fsync = row["fsync"].c_str();
  info.synchronous_commit = row["synchronous_commit"].c_str();
  info.full_page_writes = row["full_page_writes"].c_str();
  info.wal_level = row["wal_level"].c_str();
  info.shared_buffers = row["shared_buffers"].c_str();
  info.max_wal_size = row["max_wal_size"].c_str();
  info.checkpoint_timeout = row["checkpoint_timeout"].c_str();
  info.max_connections = row["max_connections"].as<int>();
  info.shared_preload_libraries = OptionalText(row["shared_preload_libraries"]).value_or("");
  return info;
}

bool SchemaExists(Tx& tx, const std::string& schema) {
  return Internal(tx).Exec("bench_schema_exists", schema)[0][0].as<bool>();
}

int64_t ClientSessions(Tx& tx) {
  return Internal(tx).Exec("bench_client_sessions")[0][0].as<int64_t>();
}

void TurnOffWakeHints(Tx& tx) { Internal(tx).Exec("bench_wake_hints_off"); }

int64_t StartRunsInBulk(Tx& tx, BulkStartApi api, const std::string& workflow, const Json& input,
                        const std::string& queue, int count) {
  if (api == BulkStartApi::kBareInsert) {
    return Internal(tx)
        .Exec("bench_insert_runs", workflow, input.dump(), queue, count)
        .affected_rows();
  }
  const char* query = api == BulkStartApi::kStartRuns ? "bench_start_runs_set" : "bench_start_runs";
  return Internal(tx).Exec(query, workflow, input.dump(), queue, count)[0][0].as<int64_t>();
}

int64_t FillRuns(Tx& tx, const RunFill& fill) {
  const pqxx::result result = Internal(tx).Exec(
      "bench_fill_runs", fill.count, fill.workflow, fill.definition_version, fill.definition_hash,
      fill.queue, fill.cursor, std::string(fill.finished ? "completed" : "ready"));
  return result.affected_rows();
}

namespace {

// A utility statement: sent as text, like drop_schema.
void ExecUtility(Tx& tx, const char* name) {
  auto& t = Internal(tx);
  try {
    t.work.exec(sql::WithSchema(sql::Query(name), t.session.options.schema));
  } catch (...) {
    Tx::Impl::RethrowTranslated(name);
  }
}

// Rows of (status, count).
std::unordered_map<RunStatus, int64_t> CountsByStatus(const pqxx::result& rows) {
  std::unordered_map<RunStatus, int64_t> counts;
  for (const auto& row : rows) counts[ParseRunStatus(row[0].c_str())] = row[1].as<int64_t>();
  return counts;
}

}  // namespace

void AnalyzeRuns(Tx& tx) { ExecUtility(tx, "bench_analyze_runs"); }

void VacuumPhaseTables(Tx& tx) { ExecUtility(tx, "bench_vacuum"); }

bool MayCheckpoint(Tx& tx) { return Internal(tx).Exec("bench_may_checkpoint")[0][0].as<bool>(); }

void Checkpoint(Tx& tx) { ExecUtility(tx, "bench_checkpoint"); }

std::unordered_map<RunStatus, int64_t> PhaseStatus(Tx& tx, const Json& tag) {
  return CountsByStatus(Internal(tx).Exec("bench_phase_status", tag.dump()));
}

std::unordered_map<RunStatus, int64_t> UnfinishedRunsOfPhase(Tx& tx, const Json& tag) {
  return CountsByStatus(Internal(tx).Exec("bench_phase_unfinished", tag.dump()));
}

PhaseWindow ReadPhaseWindow(Tx& tx, const Json& tag) {
  const pqxx::row row = Internal(tx).Exec("bench_phase_window", tag.dump())[0];
  return {row["steps"].as<int64_t>(), row["seconds"].as<double>()};
}

std::vector<double> ResumeLatencies(Tx& tx, const Json& tag) {
  std::vector<double> latencies;
  for (const auto& row : Internal(tx).Exec("bench_resume_latencies", tag.dump())) {
    latencies.push_back(row[0].as<double>());
  }
  return latencies;
}

std::string PgbenchStepScript(const std::string& schema) {
  ValidateSchemaName(schema);
  return sql::WithSchema(sql::Query("pgbench_step"), schema);
}

}  // namespace cairn::store::bench
