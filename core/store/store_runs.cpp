// Store operations on runs and their history: create, read, checkpoint,
// cancel, list, history and retention.
#include <spdlog/spdlog.h>

#include "sql_catalog.hpp"
#include "store_internal.hpp"

namespace cairn::store {

namespace {

constexpr char kCursorSeparator = '|';

// The JSON array append_events() takes.
std::string EventsJson(const std::vector<RunEvent>& events) {
  Json batch = Json::array();
  for (const auto& e : events) {
    Json row = {{"run_id", e.run_id}, {"attempt", e.attempt}, {"kind", e.kind}};
    if (e.step) row["step"] = *e.step;
    if (e.field) row["field"] = *e.field;
    if (e.value) row["value"] = *e.value;
    batch.push_back(std::move(row));
  }
  return batch.dump();
}

std::optional<std::string> StatusName(const std::optional<RunStatus>& status) {
  if (!status) return std::nullopt;
  return std::string(ToString(*status));
}

}  // namespace

CreateRunResult CreateRun(Tx& tx, const NewRun& run) {
  pqxx::row row = Internal(tx).Exec(
      "create_run", run.namespace_name, run.workflow, run.definition_version, run.definition_hash,
      run.key, run.queue, run.priority, run.input.dump(), run.context.dump(), run.cursor,
      run.run_at, run.parent_run_id, run.deadline_at, std::string(ToString(run.key_scope)))[0];
  return {DecodeRun(row), row["created"].as<bool>()};
}

std::optional<Run> GetRun(Tx& tx, const std::string& run_id) {
  pqxx::result rows = Internal(tx).Exec("get_run", run_id);
  if (rows.empty()) return std::nullopt;
  return DecodeRun(rows[0]);
}

std::optional<std::string> RunErrorCode(Tx& tx, const std::string& run_id) {
  pqxx::result rows = Internal(tx).Exec("run_error_code", run_id);
  if (rows.empty()) return std::nullopt;
  return OptionalText(rows[0][0]);
}

namespace {

// save_checkpoint, or save_checkpoint_and_claim when `next` is set.
CheckpointAndNextRun SaveCheckpointWith(Tx& tx, const Checkpoint& c,
                                        const std::vector<RunEvent>& events, bool release_stack,
                                        const ClaimRequest* next) {
  auto& t = Internal(tx);
  std::optional<std::string> output;
  if (c.output) output = c.output->dump();
  // Only the last hold goes with the statement; a re-entrant holder keeps it.
  auto hold = t.session.stack_holds.find(c.run_id);
  const bool releases = release_stack && hold != t.session.stack_holds.end() && hold->second == 1;
  const std::string context = c.context.dump();
  const std::string status(ToString(c.status));
  const std::string events_json = EventsJson(events);
  const std::string compensations = c.compensations.dump();
  const std::optional<std::string> final_status =
      c.final_status ? std::optional<std::string>(ToString(*c.final_status)) : std::nullopt;
  const std::optional<std::string> stack_schema =
      releases ? std::optional<std::string>(t.session.options.schema) : std::nullopt;
  pqxx::result rows =
      next ? t.Exec("save_checkpoint_and_claim", c.run_id, c.expected_version, context, c.cursor,
                    status, c.attempt, c.run_at, c.delay_ms, c.lease_owner, c.lease_ms, output,
                    c.error, events_json, compensations, final_status, stack_schema,
                    ArrayLiteral(next->queues), ArrayLiteral(next->definition_hashes),
                    next->worker_id, static_cast<int64_t>(next->lease.count()))
           : t.Exec("save_checkpoint", c.run_id, c.expected_version, context, c.cursor, status,
                    c.attempt, c.run_at, c.delay_ms, c.lease_owner, c.lease_ms, output, c.error,
                    events_json, compensations, final_status, stack_schema);
  if (rows.empty()) {
    pqxx::result current = t.Exec("run_version", c.run_id);
    if (current.empty()) throw NotFoundError("run " + c.run_id + " does not exist");
    throw OccConflictError(c.run_id, c.expected_version, current[0][0].as<int64_t>());
  }
  if (releases) t.session.stack_holds.erase(hold);
  const pqxx::row row = rows[0];
  CheckpointAndNextRun out;
  out.checkpoint = {row["checkpoint_version"].as<int64_t>(),
                    ParseRunStatus(row["checkpoint_status"].c_str()),
                    OptionalText(row["ended_with"])};
  if (next && !row["id"].is_null()) out.next = TakeClaimedNextRun(t, row);
  return out;
}

}  // namespace

CheckpointResult SaveCheckpoint(Tx& tx, const Checkpoint& c, const std::vector<RunEvent>& events,
                                bool release_stack) {
  return SaveCheckpointWith(tx, c, events, release_stack, nullptr).checkpoint;
}

CheckpointAndNextRun SaveCheckpointAndClaim(Tx& tx, const Checkpoint& checkpoint,
                                            const std::vector<RunEvent>& events,
                                            const ClaimRequest& next) {
  return SaveCheckpointWith(tx, checkpoint, events, true, &next);
}

CancelResult CancelRun(Tx& tx, const std::string& run_id, const std::string& reason) {
  const pqxx::row row = RunApiCall(tx, "cancel_run", run_id, reason);
  const std::string_view outcome = row["outcome"].c_str();
  CancelResult result;
  result.outcome = outcome == "cancelled"      ? CancelOutcome::kCancelled
                   : outcome == "compensating" ? CancelOutcome::kCompensating
                                               : CancelOutcome::kAlreadyFinished;
  result.status = ParseRunStatus(row["run_status"].c_str());
  result.version = row["run_version"].as<int64_t>();
  result.waits_cancelled = row["waits_cancelled"].as<int>();
  return result;
}

RunPage ListRunsWith(Tx& tx, const std::string& query, const RunFilter& filter, int limit,
                     const std::optional<std::string>& cursor) {
  if (limit < 1 || limit > kMaxRunPage) {
    throw InvalidArgumentError("page size " + std::to_string(limit) + " is outside 1.." +
                               std::to_string(kMaxRunPage));
  }
  std::optional<std::string> after_created;
  std::optional<std::string> after_id;
  if (cursor) {
    auto separator = cursor->find(kCursorSeparator);
    if (separator == std::string::npos) {
      throw InvalidArgumentError("malformed page cursor \"" + *cursor + "\"");
    }
    after_created = cursor->substr(0, separator);
    after_id = cursor->substr(separator + 1);
  }
  pqxx::result rows =
      Internal(tx).Exec(query, filter.namespace_name, filter.workflow, StatusName(filter.status),
                        filter.created_after, filter.created_before, filter.key_prefix,
                        after_created, after_id, limit + 1, filter.queue);
  RunPage page;
  for (const auto& row : rows) {
    if (static_cast<int>(page.runs.size()) == limit) {
      const Run& last = page.runs.back();
      page.next_cursor = last.created_at + kCursorSeparator + last.id;
      break;
    }
    page.runs.push_back(DecodeRun(row));
  }
  return page;
}

RunPage ListRuns(Tx& tx, const RunFilter& filter, int limit,
                 const std::optional<std::string>& cursor) {
  return ListRunsWith(tx, "list_runs", filter, limit, cursor);
}

void AppendEvents(Tx& tx, const std::vector<RunEvent>& events) {
  if (events.empty()) return;
  Internal(tx).Exec("append_events", EventsJson(events));
}

HistoryPage History(Tx& tx, const std::string& run_id, int64_t after, int limit) {
  if (limit < 1 || limit > kMaxHistoryPage) {
    throw InvalidArgumentError("history page size " + std::to_string(limit) + " is outside 1.." +
                               std::to_string(kMaxHistoryPage));
  }
  pqxx::result rows = Internal(tx).Exec("history", run_id, after, limit + 1);
  HistoryPage page;
  for (const auto& row : rows) {
    if (static_cast<int>(page.events.size()) == limit) {
      page.next_position = page.events.back().position;
      break;
    }
    page.events.push_back(DecodeEvent(row));
  }
  return page;
}

RetentionResult DeleteFinished(Connection& connection, std::chrono::hours older_than, int batch,
                               int max_batches) {
  if (batch < 1) throw InvalidArgumentError("retention batch must be at least 1");
  RetentionResult total;
  int batches = 0;
  auto budget_left = [&] { return max_batches <= 0 || batches < max_batches; };
  // Each batch is its own short transaction so retention never holds locks
  // or a snapshot for long; a full batch means there may be more.
  auto drain = [&](const auto& one_batch) {
    while (budget_left()) {
      ++batches;
      if (connection.Transact(one_batch) < batch) return;
    }
    total.more = true;
  };
  drain([&](Tx& tx) {
    pqxx::row row = Internal(tx).Exec("retention_runs", older_than.count(), batch)[0];
    total.runs += row["runs"].as<int64_t>();
    total.events += row["events"].as<int64_t>();
    total.waits += row["waits"].as<int64_t>();
    return row["runs"].as<int64_t>();
  });
  drain([&](Tx& tx) {
    const auto waits = static_cast<int64_t>(
        Internal(tx).Exec("retention_waits", older_than.count(), batch).size());
    total.waits += waits;
    return waits;
  });
  drain([&](Tx& tx) {
    const int64_t keys = CleanupIdempotencyKeys(tx, batch);
    total.idempotency_keys += keys;
    return keys;
  });
  return total;
}

bool TryLockFleetTask(Tx& tx, std::string_view task) {
  return Internal(tx)
      .Exec("fleet_task_try_lock", Internal(tx).session.options.schema, std::string(task))[0][0]
      .as<bool>();
}

void UnlockFleetTask(Tx& tx, std::string_view task) {
  Internal(tx).Exec("fleet_task_unlock", Internal(tx).session.options.schema, std::string(task));
}

}  // namespace cairn::store
