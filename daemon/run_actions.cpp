// See run_actions.hpp. The transient failures of these actions (a deadlock
// with a checkpoint) are retried: each action is idempotent.
#include "run_actions.hpp"

#include "cli.hpp"

namespace cairn::cli {

ActionOutcome SignalWait(store::Connection& connection, const std::string& key, const Json& payload,
                         std::chrono::milliseconds inbox_retention,
                         const std::string& retention_text) {
  const auto outcome = store::RetryTransient([&] {
    return connection.Transact(
        [&](store::Tx& tx) { return store::Signal(tx, key, payload, inbox_retention); });
  });
  switch (outcome) {
    case store::SignalOutcome::kDelivered:
      return {kExitOk, "delivered", "delivered: the run waiting on " + key + " resumes"};
    case store::SignalOutcome::kAlreadyDelivered:
      return {kExitAlreadyDone, "already_delivered",
              "already delivered: " + key + " was signalled before; nothing changed"};
    case store::SignalOutcome::kExpired:
      return {kExitExpired, "expired", "the wait on " + key + " expired; nothing changed"};
    case store::SignalOutcome::kCancelled:
      return {kExitConflict, "cancelled",
              "the wait on " + key + " was cancelled when its run ended; nothing changed"};
    case store::SignalOutcome::kStored:
      return {kExitNotFound, "stored",
              "no wait with key " + key + " yet; the signal is kept for " + retention_text +
                  " and resumes the run that waits on it"};
  }
  return {kExitFailure, "unknown", "unknown signal outcome"};
}

ActionOutcome CancelRunNow(store::Connection& connection, const std::string& run_id,
                           const std::string& reason) {
  const CancelResult result = store::RetryTransient([&] {
    return connection.Transact([&](store::Tx& tx) { return store::CancelRun(tx, run_id, reason); });
  });
  switch (result.outcome) {
    case CancelOutcome::kAlreadyFinished:
      return {kExitAlreadyDone, "already_finished",
              "run " + run_id + " had already finished (" + std::string(ToString(result.status)) +
                  "); nothing changed"};
    case CancelOutcome::kCompensating:
      return {kExitAlreadyDone, "already_compensating",
              "run " + run_id + " is already running its compensations; nothing changed"};
    case CancelOutcome::kCancelled:
      break;
  }
  return {kExitOk, "cancelled",
          "run " + run_id + " cancelled (" + std::to_string(result.waits_cancelled) +
              " waits cancelled)" +
              (result.status == RunStatus::kCompensating
                   ? "; its compensations run now, then it ends cancelled"
                   : "")};
}

ActionOutcome RetryRunNow(store::Connection& connection, const std::string& run_id) {
  const store::RetryResult result = store::RetryTransient([&] {
    return connection.Transact([&](store::Tx& tx) { return store::RetryRun(tx, run_id); });
  });
  switch (result.outcome) {
    case store::RetryOutcome::kNotFailed:
      return {kExitConflict, "not_failed",
              "run " + run_id + " is " + std::string(ToString(result.status)) +
                  ", not failed; nothing changed"};
    case store::RetryOutcome::kCompensated:
      return {kExitConflict, "compensated",
              "run " + run_id +
                  " failed and its compensations undid its steps; start a new run instead. "
                  "Nothing changed"};
    case store::RetryOutcome::kRetried:
      break;
  }
  return {kExitOk, "retried",
          "run " + run_id +
              (result.status == RunStatus::kCompensating
                   ? " resumes its compensations at the one that failed"
                   : " is ready again at its failed step")};
}

}  // namespace cairn::cli
