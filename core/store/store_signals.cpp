// Store operations for signals, wait and deadline expiry, operator retries,
// and loading a run together with the wait it resumes from.
#include "identifier.hpp"
#include "store_internal.hpp"

namespace cairn::store {

namespace {

constexpr std::pair<SignalOutcome, std::string_view> kSignalOutcomes[] = {
    {SignalOutcome::kDelivered, "delivered"},
    {SignalOutcome::kAlreadyDelivered, "already_delivered"},
    {SignalOutcome::kExpired, "expired"},
    {SignalOutcome::kCancelled, "cancelled"},
    {SignalOutcome::kStored, "stored"},
};

}  // namespace

std::string_view ToString(SignalOutcome outcome) {
  for (const auto& [value, name] : kSignalOutcomes) {
    if (value == outcome) return name;
  }
  return "unknown";
}

SignalOutcome Signal(Tx& tx, const std::string& correlation_key, const Json& payload,
                     std::chrono::milliseconds inbox_retention) {
  ValidateKey("the signal's correlation key", correlation_key);
  const std::string outcome = Internal(tx)
                                  .Exec("signal", correlation_key, payload.dump(),
                                        static_cast<int64_t>(inbox_retention.count()))[0][0]
                                  .c_str();
  for (const auto& [value, name] : kSignalOutcomes) {
    if (name == outcome) return value;
  }
  throw DatabaseError(ErrorKind::kPermanent, "signal", "", "unexpected outcome " + outcome);
}

int64_t ExpireWaits(Tx& tx, int limit) {
  return static_cast<int64_t>(Internal(tx).Exec("expire_waits", limit).size());
}

std::vector<DeadlineRun> ExpireDeadlines(Tx& tx, int limit) {
  std::vector<DeadlineRun> failed;
  for (const auto& row : Internal(tx).Exec("expire_deadlines", limit)) {
    DeadlineRun run;
    run.run_id = row["id"].c_str();
    run.workflow = row["workflow"].c_str();
    run.step = OptionalText(row["cursor"]);
    run.attempt = row["attempt"].as<int>();
    run.status = ParseRunStatus(row["status"].c_str());
    run.deadline_at = row["deadline_at"].c_str();
    failed.push_back(std::move(run));
  }
  return failed;
}

int64_t CleanupInbox(Tx& tx, int limit) {
  return static_cast<int64_t>(Internal(tx).Exec("cleanup_inbox", limit).size());
}

RetryResult RetryRun(Tx& tx, const std::string& run_id) {
  const pqxx::row row = RunApiCall(tx, "retry_run", run_id);
  const std::string_view outcome = row["outcome"].c_str();
  RetryResult result;
  result.outcome = outcome == "retried"       ? RetryOutcome::kRetried
                   : outcome == "compensated" ? RetryOutcome::kCompensated
                                              : RetryOutcome::kNotFailed;
  result.status = ParseRunStatus(row["run_status"].c_str());
  return result;
}

}  // namespace cairn::store
