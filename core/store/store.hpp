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

// Told about the sessions and database errors of the connections made with
// the options that carry it (the daemon counts them in its metrics). Called
// on the thread using the connection: thread-safe, and must not throw.
class SessionObserver {
 public:
  virtual ~SessionObserver() = default;
  virtual void Opened() {}
  virtual void Closed() {}
  // A database error, once, as it leaves the connection (kTransient,
  // kInDoubt, kPermanent or kInvalidArgument).
  virtual void Failed(ErrorKind kind) { (void)kind; }
};

struct ConnectionOptions {
  std::string url;  // libpq connection string or URI; empty: libpq's PG* defaults
  std::string schema = "cairn";
  std::string application_name = "cairn";
  // A transaction left idle this long (a hung step) is ended by the server.
  std::chrono::milliseconds idle_in_transaction_timeout{kIdleInTransactionLimit};
  // Bounds on every statement of the session and on every lock wait, for
  // sessions that must not stall (lease renewal, maintenance); zero keeps
  // the session's own setting (role, database or the URL's options).
  std::chrono::milliseconds statement_timeout{0};
  std::chrono::milliseconds lock_timeout{0};
  // Plan each prepared statement once, for a session that runs cairn's own
  // statements many times (the poller, the slots); see session_setup.sql.
  bool generic_plans = false;
  std::shared_ptr<SessionObserver> observer;  // null: nobody is told
};

class Tx;

// Refuses, with InvalidArgumentError saying what to do, a database URL whose
// connections do not keep their session from one transaction to the next
// (a pooler in transaction or statement mode): stack locks, LISTEN and
// prepared statements all live in the session. Opens two connections.
void CheckSessionPooling(const ConnectionOptions& options);

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

  // Runs fn in a transaction and commits; rolls back if fn throws or called
  // Tx::RollBackOnReturn. Database
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

  // Runs fn outside an explicit transaction: every statement commits on its
  // own. One statement is atomic by itself and costs one round trip instead
  // of three (BEGIN, statement, COMMIT).
  template <class F>
  auto Autocommit(F&& fn) {
    using R = std::invoke_result_t<F, Tx&>;
    if constexpr (std::is_void_v<R>) {
      ExecuteOutsideTransaction([&](Tx& tx) { fn(tx); });
    } else {
      std::optional<R> out;
      ExecuteOutsideTransaction([&](Tx& tx) { out.emplace(fn(tx)); });
      return std::move(*out);
    }
  }

  // The stack lock: a session-level advisory lock on the run, held by this
  // connection. Re-entrant: each successful TryLockStack needs one UnlockStack.
  bool TryLockStack(const std::string& run_id);
  void UnlockStack(const std::string& run_id);
  // UnlockStack of each, in one round trip for those whose last hold it is.
  void UnlockStacks(const std::vector<std::string>& run_ids);
  bool HoldsStack(const std::string& run_id) const;
  // Lets go of the stack locks the session holds without counting them: a
  // statement that took one and then failed (a claim's, whose session lock
  // outlives the rollback) leaves it behind. Nothing when the session is
  // gone, with its locks.
  void ReleaseUncountedStackLocks();

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  void TransactImpl(const std::function<void(Tx&)>& fn);
  void ExecuteOutsideTransaction(const std::function<void(Tx&)>& fn);
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

  // In Connection::Transact: roll the transaction back instead of committing
  // it when the function returns (say, a step that did not succeed, whose
  // writes must not land). Control flow stays with return values.
  void RollBackOnReturn();

 private:
  Impl& impl_;
};

// Runs.
CreateRunResult CreateRun(Tx& tx, const NewRun& run);
std::optional<Run> GetRun(Tx& tx, const std::string& run_id);
// The code of the failure that gave a failed or compensation_failed run its
// status (its newest 'failed' or 'compensation_failed' event); nullopt for
// other runs.
std::optional<std::string> RunErrorCode(Tx& tx, const std::string& run_id);
// Writes the checkpoint and its audit events in one statement. Throws
// OccConflictError (run id, expected, current) when expected_version is
// stale (nothing is written) and NotFoundError for an unknown run.
// release_stack: a checkpoint that lands also releases the session's stack
// lock of the run, in the same statement, when this is its last hold; only
// for a checkpoint committed alone (Connection::Autocommit), as a rolled-back
// transaction would not take the release back.
CheckpointResult SaveCheckpoint(Tx& tx, const Checkpoint& checkpoint,
                                const std::vector<RunEvent>& events = {},
                                bool release_stack = false);
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
// Creates the wait; when a signal for its key waited in the inbox, the record
// comes back RESUMING with that payload (the run should continue, not park).
WaitRecord SaveWait(Tx& tx, const NewWait& wait);
std::optional<WaitRecord> GetWait(Tx& tx, const std::string& correlation_key);
std::vector<WaitRecord> WaitsOfRun(Tx& tx, const std::string& run_id);
// WAITING -> RESUMING by compare-and-swap. Throws NotFoundError,
// WaitExpiredError (unless allow_expired) or WaitAlreadyClaimedError.
WaitRecord ClaimWait(Tx& tx, const std::string& correlation_key, const std::string& claimant,
                     const std::optional<Json>& payload = std::nullopt, bool allow_expired = false);
// RESUMING -> RESUMED for the claimant that holds it; WaitAlreadyClaimedError otherwise.
// For a wait for the first child, it also cancels the wait's other unfinished
// children that asked to be (ChildOptions::cancel_when_first_done).
WaitRecord CompleteWait(Tx& tx, const std::string& correlation_key, const std::string& claimant);
// WAITING or RESUMING -> CANCELLED. False when the wait had already finished.
bool CancelWait(Tx& tx, const std::string& correlation_key);

// Signals. Delivery is a compare-and-swap on the wait record, serialised
// with wait creation per key, so a signal resumes its run exactly once.
enum class SignalOutcome {
  kDelivered,         // the run resumes at the continuation step
  kAlreadyDelivered,  // a duplicate: nothing changed
  kExpired,           // the wait timed out: nothing changed
  kCancelled,         // the wait was cancelled with its run: nothing changed
  kStored,            // no wait with this key yet: kept in the inbox
};
std::string_view ToString(SignalOutcome outcome);
SignalOutcome Signal(Tx& tx, const std::string& correlation_key, const Json& payload,
                     std::chrono::milliseconds inbox_retention = std::chrono::hours(24));
// Expires waits whose timeout passed: their runs continue at the step's
// timeout step, or fail. Returns how many.
int64_t ExpireWaits(Tx& tx, int limit = 1000);
// A run the sweeper failed because its deadline passed while it was ready or
// waiting (code "deadline_exceeded").
struct DeadlineRun {
  std::string run_id;
  std::string workflow;
  std::optional<std::string> step;
  int attempt = 0;
  RunStatus status = RunStatus::kFailed;  // failed, or compensating when it unwinds
  std::string deadline_at;
};
// Fails runs whose deadline passed while no worker held them, cancelling
// their waits; those with committed compensations unwind first.
std::vector<DeadlineRun> ExpireDeadlines(Tx& tx, int limit = 1000);
// Drops inbox signals nobody waited for within their retention.
int64_t CleanupInbox(Tx& tx, int limit = 1000);

enum class RetryOutcome {
  kRetried,
  kNotFailed,    // nothing changed; status says what the run is
  kCompensated,  // failed and its steps were undone: nothing changed, start a new run
};
struct RetryResult {
  RetryOutcome outcome = RetryOutcome::kRetried;
  RunStatus status = RunStatus::kReady;  // for kNotFailed: the status the run has
};
// Restarts a failed run at its failed step with a fresh attempt budget, or a
// run whose compensation failed at that compensation.
// NotFoundError for an unknown run.
RetryResult RetryRun(Tx& tx, const std::string& run_id);

// What a slot needs to execute a run: the run and, when a signal claimed its
// wait, the wait it resumes from.
struct RunForExecution {
  Run run;
  std::optional<Resume> resume;
  bool past_deadline = false;  // its deadline has passed, by database time
};
// What a slot finds when it takes a run's stack lock and reads the run in
// one round trip (lock_stack_and_load_run): whether it got the lock
// (re-entrant, as Connection::TryLockStack; each success needs one
// UnlockStack) and, if it did, the run as committed now (nullopt: no such run).
struct StackLockedRun {
  bool locked = false;
  std::optional<RunForExecution> run;
};
StackLockedRun LockStackAndLoadRun(Connection& connection, const std::string& run_id);
// The same for many runs in one round trip (a batch slot's): one result per
// run id, in their order.
std::vector<StackLockedRun> LockStacksAndLoadRuns(Connection& connection,
                                                  const std::vector<std::string>& run_ids);

// Idempotency store: keys scoped by namespace, one owner at a time, times
// from the database (the SQL functions of migration 9, which applications
// call too). Invalid keys, namespaces or owners (empty, over 512 bytes) and
// a result over max_idempotency_result_bytes throw InvalidArgumentError.
IdempotencyClaim ClaimIdempotencyKey(Tx& tx, const std::string& namespace_name,
                                     const std::string& key, const std::string& owner,
                                     std::chrono::milliseconds lease);
// False when owner does not hold the key in progress.
bool CompleteIdempotencyKey(Tx& tx, const std::string& namespace_name, const std::string& key,
                            const std::string& owner, const Json& result,
                            std::chrono::milliseconds ttl);
// False when owner does not hold the key in progress.
bool FailIdempotencyKey(Tx& tx, const std::string& namespace_name, const std::string& key,
                        const std::string& owner, const std::string& error);
// The stored result of a completed key that has not expired.
std::optional<Json> IdempotencyResult(Tx& tx, const std::string& namespace_name,
                                      const std::string& key);
std::optional<IdempotencyRecord> GetIdempotencyRecord(Tx& tx, const std::string& namespace_name,
                                                      const std::string& key);
int64_t CleanupIdempotencyKeys(Tx& tx, int limit = 1000);

// Retention: deletes finished runs (with their history and waits) and
// finished waits older than `older_than`, and expired idempotency keys,
// `batch` rows per transaction. With max_batches > 0 it stops after that
// many transactions and says whether more was left (result.more).
RetentionResult DeleteFinished(Connection& connection, std::chrono::hours older_than,
                               int batch = 1000, int max_batches = 0);

// A session advisory lock on a fleet-wide task of this schema (say,
// "retention"), so that one worker of the fleet runs it at a time. Held by
// the connection until UnlockFleetTask or until the session ends. Call them
// outside a transaction (Connection::Autocommit).
bool TryLockFleetTask(Tx& tx, std::string_view task);
void UnlockFleetTask(Tx& tx, std::string_view task);

// Worker-side operations: claiming, leases, registration.
struct StartRequest {
  std::string workflow;
  Json input = Json::object();
  std::optional<std::string> key;
  std::optional<std::string> queue;  // absent: the definition's queue
  int priority = 0;
  std::optional<std::string> run_at;  // timestamptz text; absent: now
  std::string namespace_name = "default";
  std::optional<int> version;  // absent: the newest registered definition
  // How long the run may take from when it is due; absent: the definition's
  // deadline, if it has one.
  std::optional<std::chrono::milliseconds> deadline;
  // How long the key holds; absent: the definition's key_scope, else forever.
  std::optional<KeyScope> key_scope;
};
struct StartedRun {
  std::string id;
  bool created = true;  // false: the run that holds the key
};
// Starts a run through the schema's start_run_outcome SQL function (the path
// an application uses), or finds the run that holds its key. NotFoundError
// for an unknown workflow.
StartedRun StartRun(Tx& tx, const StartRequest& request);
// Starts a child run of the newest registered definition of child.workflow,
// keeping what it asked for (child.options); with parent_wait_key it reports
// to that wait of the parent when it finishes. Returns its id. NotFoundError
// for an unknown workflow.
std::string StartChildRun(Tx& tx, const std::string& parent_run_id,
                          const std::optional<std::string>& parent_wait_key,
                          const ChildStart& child);

// A run the claim handed this worker.
struct ClaimedRun {
  Run run;
  // Its queue has a rate limit: the claim spent a token on its first step,
  // and each further step of this claim takes one (TakeStepToken).
  bool step_tokens = false;
};
// A run a slot claimed for itself on its own session (SaveCheckpointAndClaim,
// ClaimRunForSlot): its stack lock taken or not, and the run as read then
// (no run: its row could not be decoded; it is left to its lease).
struct ClaimedNextRun {
  std::string run_id;
  bool step_tokens = false;
  StackLockedRun opened;
};
struct CheckpointAndNextRun {
  CheckpointResult checkpoint;
  std::optional<ClaimedNextRun> next;  // none was due
};
// What a claim asks for: due runs of these queues and definitions, for
// this worker, with this lease.
struct ClaimRequest {
  std::vector<std::string> queues;
  std::vector<std::string> definition_hashes;
  std::string worker_id;
  std::chrono::milliseconds lease{30000};
};
// The checkpoint of a run that parks, committed alone (Connection::
// Autocommit), which releases the run's stack lock as release_stack does
// and, once it has landed, claims the slot's next run in the same statement
// and transaction, from queues without limits (queue_limits): that run's
// stack lock is taken on this session and the run read (see
// lock_stack_and_load_run), so the slot goes on with it without a round trip
// of its own. Errors as SaveCheckpoint; a checkpoint that does not land
// claims nothing. After an error other than a conflict, the session may
// hold the next run's stack lock uncounted
// (Connection::ReleaseUncountedStackLocks).
CheckpointAndNextRun SaveCheckpointAndClaim(Tx& tx, const Checkpoint& checkpoint,
                                            const std::vector<RunEvent>& events,
                                            const ClaimRequest& next);

// Claims up to `limit` due runs of the queues, within each limited queue's
// room (queue_limits: max_running and the token bucket), fleet-wide.
std::vector<ClaimedRun> ClaimRuns(Tx& tx, const std::vector<std::string>& queues,
                                  const std::vector<std::string>& definition_hashes, int limit,
                                  const std::string& worker_id, std::chrono::milliseconds lease);
// A slot's claim of its own next run, in a statement of its own (as
// ClaimRuns, not flushed), on the slot's session: the run's stack lock is
// taken there and the run read, as SaveCheckpointAndClaim does. nullopt:
// none was due. After an error, the session may hold the run's stack lock
// uncounted (Connection::ReleaseUncountedStackLocks).
std::optional<ClaimedNextRun> ClaimRunForSlot(Tx& tx, const ClaimRequest& claim);
// ClaimRunForSlot's statement for no run: it claims nothing, but the
// session plans the claim's query (5 to 8 ms on the development machine),
// so that a later claim on it does not wait for that.
void PlanClaimRunForSlot(Tx& tx, const ClaimRequest& claim);
// Takes a token of the queue's bucket for a held run's next step: zero when
// taken (or the queue has no rate any more), else how long until the bucket
// next holds one, by database time.
std::chrono::milliseconds TakeStepToken(Tx& tx, const std::string& queue);

// A queue's fleet-wide limits (a row of queue_limits).
struct QueueLimit {
  std::string queue;
  std::optional<int> max_running;         // runs in status 'running' at once
  std::optional<double> rate_per_second;  // steps a second; with burst
  std::optional<int> burst;               // the most tokens the bucket holds
  std::optional<double> tokens;           // read: what the bucket holds now
  int64_t running = 0;                    // read: the queue's running runs now
};
// What setting a queue's limits found: nothing to change, a new limit, or a
// limit that was different (`before`, as the database had it).
struct QueueLimitChange {
  enum Kind { kUnchanged, kInserted, kUpdated } kind = kUnchanged;
  QueueLimit before;
};
std::vector<QueueLimit> ListQueueLimits(Tx& tx);
QueueLimitChange SetQueueLimit(Tx& tx, const QueueLimit& limit);
// Lifts the limits of every queue not named; returns the queues lifted.
std::vector<std::string> DeleteQueueLimitsExcept(Tx& tx, const std::vector<std::string>& queues);
// Milliseconds until the next claimable run is due; nullopt when none is ready.
std::optional<int64_t> MillisUntilNextDue(Tx& tx, const std::vector<std::string>& queues,
                                          const std::vector<std::string>& definition_hashes);
struct HeldRun {
  std::string run_id;
  int64_t version = 0;
};
struct LeaseRenewal {
  std::vector<std::string> renewed;
  // Locked by another session: skipped without waiting, neither renewed nor
  // lost (the next renewal tries again).
  std::vector<std::string> busy;
  // Every held run in neither list was taken over: its holder must stop.
};
// Extends the leases still held, never waiting for a row lock.
LeaseRenewal RenewLeases(Tx& tx, const std::string& worker_id, const std::vector<HeldRun>& held,
                         std::chrono::milliseconds lease);
// A run whose lease expired, as the reaper left it.
struct ReapedRun {
  std::string run_id;
  std::string workflow;
  std::optional<std::string> step;
  int attempt = 0;
  RunStatus status = RunStatus::kReady;  // ready or compensating; failed... when crashed
  std::string previous_owner;
  int lease_expiries = 0;  // in a row, this one included
  bool crashed = false;    // reached crash_limit: failed with code "crashed"
};
// Makes runs with expired leases due again, or fails those whose lease
// expired crash_limit times in a row without a commit.
std::vector<ReapedRun> ReapExpiredLeases(Tx& tx, int crash_limit, int limit = 1000);
// Hands a held run back (ready after delay) without consuming an attempt;
// false when the run was no longer held at that version.
bool ReleaseRun(Tx& tx, const std::string& run_id, int64_t version, const std::string& worker_id,
                std::chrono::milliseconds delay);

struct DefinitionRecord {
  std::string hash;
  std::string workflow;
  int version = 0;
  std::string first_step;
  Json definition;
};
void RegisterDefinition(Tx& tx, const DefinitionRecord& definition);

struct ServerLimits {
  int max_connections = 0;
  int reserved = 0;  // superuser_reserved_connections
  int in_use = 0;    // client connections open now
  bool superuser = false;
  std::string role;
};
ServerLimits ReadServerLimits(Tx& tx);

struct WorkerRecord {
  std::string id;
  std::string hostname;
  int pid = 0;
  std::vector<std::string> queues;
  std::vector<std::string> served_definitions;
  std::string version;  // cairn's
  int concurrency = 0;
};

// A worker whose heartbeat is older than this is not live (dead, or gone).
inline constexpr std::chrono::milliseconds kWorkerLiveness = std::chrono::minutes(2);

struct WorkerState {
  WorkerRecord worker;
  std::string state;  // live | dead | stopped
  std::string started_at;
  std::string heartbeat_at;
  int64_t heartbeat_age_ms = 0;
  std::optional<std::string> stopped_at;
  Json running = Json::array();  // [{id, workflow, step}] of the runs it holds
};
std::vector<WorkerState> ListWorkers(Tx& tx, std::chrono::milliseconds liveness = kWorkerLiveness,
                                     int limit = kMaxRunPage);
void RegisterWorker(Tx& tx, const WorkerRecord& worker);
void HeartbeatWorker(Tx& tx, const std::string& worker_id);
void StopWorker(Tx& tx, const std::string& worker_id);
// Unfinished runs that no live worker (heartbeat within `liveness`) can serve.
std::vector<Run> StrandedRuns(Tx& tx, std::chrono::milliseconds liveness, int limit = kMaxRunPage);
// Per queue, how many runs StrandedRuns would list (at most `limit` in all).
std::vector<std::pair<std::string, int64_t>> CountStrandedRuns(Tx& tx,
                                                               std::chrono::milliseconds liveness,
                                                               int limit = 100000);
// Re-pins unfinished runs from one definition to another; returns their ids.
std::vector<std::string> RepinRuns(Tx& tx, const std::string& from_hash,
                                   const std::string& to_hash);

// Waits for NOTIFY wake-ups on its own connection. Hints only: a lost
// notification costs latency, never correctness.
//
// Producers notify only while some daemon holds a queue's wake gate open,
// one commit at a time (migration 27): the listener opens the gates of its
// worker's queues while the worker has an idle slot, and closes them at a
// hint that finds it busy.
class WakeListener {
 public:
  explicit WakeListener(ConnectionOptions options);
  ~WakeListener();
  // Blocks up to timeout, or until `interrupt` (a file descriptor; -1:
  // none) is readable; true when a wake-up arrived. Throws on a lost
  // connection (the caller reconnects with a new listener).
  bool Wait(std::chrono::milliseconds timeout, int interrupt = -1);
  // Opens the wake gates of `queues`. Returns once the commits that skipped
  // their hint have ended, so that a claim made after it sees their runs.
  // False, with every gate closed, when such a commit outlasted the
  // session's lock timeout.
  bool OpenGates(const std::vector<std::string>& queues);
  void CloseGates();
  // Waits for the commits that left their hint to the one just read, so
  // that a claim made after it sees their runs. False, with every gate
  // closed, when such a commit outlasted the session's lock timeout.
  bool AwaitWaiters(const std::vector<std::string>& queues);

 private:
  bool LockGateStripes(const char* query, const std::vector<std::string>& queues);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The fleet's backlog: unfinished runs and runs awaiting an operator, per
// queue and state (a status, or "delayed": ready but due later).
struct BacklogRow {
  std::string queue;
  std::string state;
  int64_t runs = 0;
  std::optional<double> oldest_due_age_seconds;  // null: none of them is due
};
std::vector<BacklogRow> ReadBacklog(Tx& tx);

// How many runs there are in each status.
std::unordered_map<RunStatus, int64_t> CountRuns(Tx& tx);
// Drops the connection's schema and everything in it (benchmarks' scratch
// schemas). There is no undo.
void DropSchema(Tx& tx);

// Database time plus an offset, as timestamptz text: due times are always
// computed by the database, never from a worker's clock.
std::string DatabaseNowPlus(Tx& tx, std::chrono::milliseconds offset);

// A transactional step's own statement, in the checkpoint's transaction.
// params is a JSON array bound as $1..$n (strings as text, null as NULL,
// other values as their JSON text); returns the rows as JSON objects.
// Transaction control (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, ...) is refused
// with InvalidArgumentError.
Json ExecuteStepSql(Tx& tx, const std::string& sql, const Json& params);
// Opens a transactional step's transaction: every statement of it (the
// step's SQL included) is bounded by timeout, and the step's SQL is planned
// as the session would plan it without generic_plans.
void ApplyStepTransactionSettings(Tx& tx, std::chrono::milliseconds timeout);

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
