// The store: the only code in cairn that speaks SQL. A Connection is one
// PostgreSQL session; a Tx is one transaction on it. Every operation is a free
// function taking the Tx it runs in, so callers can group several into one
// atomic unit (a checkpoint with its events and waits, a start inside an
// application's transaction). A Connection and its Tx are used by one thread
// at a time.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "errors.hpp"
#include "model.hpp"

namespace cairn::store {

struct ConnectionOptions {
  std::string url;  // libpq connection string or URI; empty: libpq's PG* defaults
  std::string schema = "cairn";
  std::string application_name = "cairn";
};

class Tx;

class Connection {
 public:
  // Connects and configures the session (UTC, timeouts). Throws
  // InvalidArgumentError for an invalid schema name before connecting.
  explicit Connection(ConnectionOptions options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  const std::string& schema() const;
  const std::string& quoted_schema() const;
  int BackendPid() const;
  bool IsOpen() const;

  // Runs fn in a transaction and commits; rolls back if fn throws. Database
  // errors come out translated (see errors.hpp); a lost COMMIT is kInDoubt.
  template <class F>
  auto Transact(F&& fn) {
    using R = std::invoke_result_t<F, Tx&>;
    if constexpr (std::is_void_v<R>) {
      TransactImpl([&](Tx& tx) { fn(tx); });
    } else {
      std::optional<R> out;
      TransactImpl([&](Tx& tx) { out.emplace(fn(tx)); });
      return std::move(*out);
    }
  }

  // The stack lock: a session-level advisory lock on the run, held by this
  // connection. Re-entrant: each successful TryLockStack needs one UnlockStack.
  bool TryLockStack(const std::string& run_id);
  void UnlockStack(const std::string& run_id);
  bool HoldsStack(const std::string& run_id) const;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  void TransactImpl(const std::function<void(Tx&)>& fn);
  std::unique_ptr<Impl> impl_;
};

// Holds a run's stack lock for its lifetime; throws LockUnavailableError when
// another session holds it.
class StackLock {
 public:
  StackLock(Connection& connection, std::string run_id);
  ~StackLock();
  StackLock(const StackLock&) = delete;
  StackLock& operator=(const StackLock&) = delete;

 private:
  Connection& connection_;
  std::string run_id_;
};

class Tx {
 public:
  struct Impl;
  explicit Tx(Impl& impl) : impl_(impl) {}
  Impl& impl() { return impl_; }

 private:
  Impl& impl_;
};

// Runs.
CreateRunResult CreateRun(Tx& tx, const NewRun& run);
std::optional<Run> GetRun(Tx& tx, const std::string& run_id);
// Throws OccConflictError (run id, expected, current) when expected_version is
// stale and NotFoundError for an unknown run.
CheckpointResult SaveCheckpoint(Tx& tx, const Checkpoint& checkpoint);
// Cancels the run and all its live waits in one statement. NotFoundError for
// an unknown run; a finished run is reported as such and left unchanged.
CancelResult CancelRun(Tx& tx, const std::string& run_id, const std::string& reason);
inline constexpr int kMaxRunPage = 200;
RunPage ListRuns(Tx& tx, const RunFilter& filter, int limit = kMaxRunPage,
                 const std::optional<std::string>& cursor = std::nullopt);

// History.
void AppendEvents(Tx& tx, const std::vector<RunEvent>& events);
inline constexpr int kMaxHistoryPage = 1000;
HistoryPage History(Tx& tx, const std::string& run_id, int64_t after = 0,
                    int limit = kMaxHistoryPage);

// Wait records.
WaitRecord SaveWait(Tx& tx, const NewWait& wait);
std::optional<WaitRecord> GetWait(Tx& tx, const std::string& correlation_key);
std::vector<WaitRecord> WaitsOfRun(Tx& tx, const std::string& run_id);
// WAITING -> RESUMING by compare-and-swap. Throws NotFoundError,
// WaitExpiredError (unless allow_expired) or WaitAlreadyClaimedError.
WaitRecord ClaimWait(Tx& tx, const std::string& correlation_key, const std::string& claimant,
                     const std::optional<Json>& payload = std::nullopt,
                     bool allow_expired = false);
// RESUMING -> RESUMED for the claimant that holds it; WaitAlreadyClaimedError otherwise.
WaitRecord CompleteWait(Tx& tx, const std::string& correlation_key, const std::string& claimant);
// WAITING or RESUMING -> CANCELLED. False when the wait had already finished.
bool CancelWait(Tx& tx, const std::string& correlation_key);

// Idempotency store.
IdempotencyClaim ClaimIdempotencyKey(Tx& tx, const std::string& key, const std::string& owner,
                                     std::chrono::milliseconds lease);
// False when owner no longer holds the in-progress claim.
bool CompleteIdempotencyKey(Tx& tx, const std::string& key, const std::string& owner,
                            const Json& result, std::chrono::milliseconds ttl);
bool FailIdempotencyKey(Tx& tx, const std::string& key, const std::string& owner);
std::optional<Json> IdempotencyResult(Tx& tx, const std::string& key);
std::optional<IdempotencyRecord> GetIdempotencyRecord(Tx& tx, const std::string& key);
int64_t CleanupIdempotencyKeys(Tx& tx, int limit = 1000);

// Retention: deletes finished runs (with their history and waits) and
// finished waits older than `older_than`, batch rows per transaction.
RetentionResult DeleteFinished(Connection& connection, std::chrono::hours older_than,
                               int batch = 1000);

// Retrying transient failures (serialization failures, deadlocks, lost
// connections, admin shutdown). Everything else, kInDoubt included, is thrown
// at once: an in-doubt commit must be read back, not repeated.
struct RetryPolicy {
  int max_attempts = 5;
  std::chrono::milliseconds initial_backoff{50};
  std::chrono::milliseconds max_backoff{2000};
  double multiplier = 2.0;
};

template <class F>
auto RetryTransient(F&& fn, const RetryPolicy& policy = {}) {
  std::chrono::milliseconds backoff = policy.initial_backoff;
  thread_local std::minstd_rand jitter{std::random_device{}()};
  for (int attempt = 1;; ++attempt) {
    try {
      return fn();
    } catch (const Error& e) {
      if (!e.transient() || attempt >= policy.max_attempts) throw;
    }
    std::uniform_int_distribution<int64_t> spread(backoff.count() / 2, backoff.count());
    std::this_thread::sleep_for(std::chrono::milliseconds(spread(jitter)));
    backoff = std::min(policy.max_backoff, std::chrono::duration_cast<std::chrono::milliseconds>(
                                               backoff * policy.multiplier));
  }
}

}  // namespace cairn::store
