// Store operations on wait records and on the idempotency store.
#include "store_internal.hpp"

namespace cairn::store {

namespace {

std::optional<std::string> DumpOptional(const std::optional<Json>& value) {
  if (!value) return std::nullopt;
  return value->dump();
}

}  // namespace

WaitRecord SaveWait(Tx& tx, const NewWait& wait) {
  if (wait.correlation_key.empty()) throw InvalidArgumentError("wait correlation key is empty");
  try {
    Internal(tx).Exec(
        "create_wait", wait.correlation_key, wait.run_id, wait.event, wait.continuation_step,
        wait.timeout_step, wait.timeout_ms,
        wait.children ? std::optional<std::string>(ToString(*wait.children)) : std::nullopt);
    return *GetWait(tx, wait.correlation_key);
  } catch (const DatabaseError& e) {
    if (e.sqlstate() == "23505") {
      throw Error(ErrorKind::kConflict,
                  "wait correlation key " + wait.correlation_key + " is already in use");
    }
    if (e.sqlstate() == "23503") throw NotFoundError("run " + wait.run_id + " does not exist");
    throw;
  }
}

std::optional<WaitRecord> GetWait(Tx& tx, const std::string& correlation_key) {
  pqxx::result rows = Internal(tx).Exec("get_wait", correlation_key);
  if (rows.empty()) return std::nullopt;
  return DecodeWait(rows[0]);
}

std::vector<WaitRecord> WaitsOfRun(Tx& tx, const std::string& run_id) {
  std::vector<WaitRecord> waits;
  for (const auto& row : Internal(tx).Exec("waits_of_run", run_id)) {
    waits.push_back(DecodeWait(row));
  }
  return waits;
}

WaitRecord ClaimWait(Tx& tx, const std::string& correlation_key, const std::string& claimant,
                     const std::optional<Json>& payload, bool allow_expired) {
  pqxx::result rows = Internal(tx).Exec("claim_wait", correlation_key, claimant,
                                        DumpOptional(payload), allow_expired);
  if (!rows.empty()) return DecodeWait(rows[0]);
  // Lost the compare-and-swap: say why.
  auto current = GetWait(tx, correlation_key);
  if (!current) throw NotFoundError("no wait record with correlation key " + correlation_key);
  if (current->status == WaitStatus::kExpired ||
      (current->status == WaitStatus::kWaiting && current->expired)) {
    throw WaitExpiredError(correlation_key);
  }
  throw WaitAlreadyClaimedError(correlation_key, std::string(ToString(current->status)));
}

WaitRecord CompleteWait(Tx& tx, const std::string& correlation_key, const std::string& claimant) {
  pqxx::result rows = Internal(tx).Exec("complete_wait", correlation_key, claimant);
  if (!rows.empty()) {
    WaitRecord completed = DecodeWait(rows[0]);
    if (completed.children == ChildWait::kFirst) {
      Internal(tx).Exec("cancel_children_outrun", correlation_key);
    }
    return completed;
  }
  auto current = GetWait(tx, correlation_key);
  if (!current) throw NotFoundError("no wait record with correlation key " + correlation_key);
  throw WaitAlreadyClaimedError(
      correlation_key,
      std::string(ToString(current->status)) + ", claimant " + current->claimant.value_or("none"));
}

bool CancelWait(Tx& tx, const std::string& correlation_key) {
  return !Internal(tx).Exec("cancel_wait", correlation_key).empty();
}

namespace {

IdempotencyRecord DecodeIdempotencyRecord(const pqxx::row& row) {
  IdempotencyRecord record;
  record.namespace_name = row["namespace"].c_str();
  record.key = row["key"].c_str();
  record.status = row["status"].c_str();
  record.owner = OptionalText(row["owner"]);
  record.result = OptionalJson(row["result"]);
  record.error = OptionalText(row["error"]);
  record.claims = row["claims"].as<int>();
  record.expires_at = row["expires_at"].c_str();
  record.expired = row["expired"].as<bool>();
  record.created_at = row["created_at"].c_str();
  record.claimed_at = row["claimed_at"].c_str();
  record.completed_at = OptionalText(row["completed_at"]);
  return record;
}

}  // namespace

IdempotencyClaim ClaimIdempotencyKey(Tx& tx, const std::string& namespace_name,
                                     const std::string& key, const std::string& owner,
                                     std::chrono::milliseconds lease) {
  pqxx::result rows = Internal(tx).Exec("idempotency_claim", key, owner,
                                        static_cast<int64_t>(lease.count()), namespace_name);
  const pqxx::row& row = rows.at(0);
  IdempotencyClaim claim;
  claim.record = DecodeIdempotencyRecord(row);
  claim.in_doubt = row["in_doubt"].as<bool>();
  const std::string_view status = row["status"].c_str();
  if (status == "claimed") {
    claim.status = IdempotencyClaimStatus::kClaimed;
    // The record is in progress under the caller; error says what the
    // failed claim it replaced reported.
    claim.record.status = "in_progress";
  } else if (status == "completed") {
    claim.status = IdempotencyClaimStatus::kCompleted;
  } else {
    claim.status = IdempotencyClaimStatus::kInProgress;
  }
  return claim;
}

bool CompleteIdempotencyKey(Tx& tx, const std::string& namespace_name, const std::string& key,
                            const std::string& owner, const Json& result,
                            std::chrono::milliseconds ttl) {
  return Internal(tx)
      .Exec("idempotency_complete", key, owner, result.dump(), static_cast<int64_t>(ttl.count()),
            namespace_name)
      .at(0)
      .at(0)
      .as<bool>();
}

bool FailIdempotencyKey(Tx& tx, const std::string& namespace_name, const std::string& key,
                        const std::string& owner, const std::string& error) {
  return Internal(tx)
      .Exec("idempotency_fail", key, owner, error, namespace_name)
      .at(0)
      .at(0)
      .as<bool>();
}

std::optional<IdempotencyRecord> GetIdempotencyRecord(Tx& tx, const std::string& namespace_name,
                                                      const std::string& key) {
  pqxx::result rows = Internal(tx).Exec("idempotency_get", key, namespace_name);
  if (rows.empty()) return std::nullopt;
  return DecodeIdempotencyRecord(rows[0]);
}

std::optional<Json> IdempotencyResult(Tx& tx, const std::string& namespace_name,
                                      const std::string& key) {
  auto record = GetIdempotencyRecord(tx, namespace_name, key);
  if (!record || record->status != "completed" || record->expired) return std::nullopt;
  return record->result;
}

int64_t CleanupIdempotencyKeys(Tx& tx, int limit) {
  return static_cast<int64_t>(Internal(tx).Exec("idempotency_cleanup", limit).size());
}

}  // namespace cairn::store
