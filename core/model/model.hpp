// Plain structs that travel between the engine and the store: runs, their
// checkpoints and history, wait records, idempotency records. No SQL and no
// libpqxx types here. Timestamps are PostgreSQL's own text in UTC
// ("2026-11-30 10:21:14.123456+00"): the engine never compares times itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cairn {

using Json = nlohmann::json;

// How long a session of cairn may sit idle inside a transaction before the
// server ends it (idle_in_transaction_session_timeout): a hung step cannot
// hold locks and stall vacuum for ever. A transactional step runs its plugin
// code inside its checkpoint's transaction, so this bounds such a step too.
inline constexpr std::chrono::minutes kIdleInTransactionLimit{10};
// A transactional step's timeout ends it at least this long before that
// limit, so that it fails as a timeout (its writes rolled back, its retry
// policy applied) rather than losing its session to the server.
inline constexpr std::chrono::seconds kTransactionalTimeoutMargin{30};

enum class RunStatus {
  kReady,    // due at run_at, claimable
  kRunning,  // leased by a worker
  kWaiting,  // parked on a wait record
  kCompleted,
  kFailed,
  kCancelled,
  kCompensating,        // failed or cancelled; its compensations are due (claimable)
  kCompensationFailed,  // a compensation failed for good; `cairn retry` resumes it
};

std::string_view ToString(RunStatus status);
// Throws InvalidArgumentError for an unknown name.
RunStatus ParseRunStatus(std::string_view name);
bool IsFinished(RunStatus status);

// How long a run's start key holds: kForever, a key names one run ever;
// kUnfinished, one unfinished run at a time (once it has finished, the key
// starts a new run).
enum class KeyScope { kForever, kUnfinished };
std::string_view ToString(KeyScope scope);                     // "forever" | "unfinished"
std::optional<KeyScope> ParseKeyScope(std::string_view name);  // nullopt: unknown

// What a child run asked for when its parent started it: to be cancelled
// along with the parent when the parent fails (however it does), and when
// another child satisfies the parent's wait for the first of its children.
// Cancelling the parent cancels every unfinished child whatever it asked.
struct ChildOptions {
  bool cancel_when_parent_fails = false;
  bool cancel_when_first_done = false;
  bool operator==(const ChildOptions& other) const {
    return cancel_when_parent_fails == other.cancel_when_parent_fails &&
           cancel_when_first_done == other.cancel_when_first_done;
  }
};

// What a child asked for, as `cairn show` and the parent's child_started
// event name it: ["parent_fails", "first_done"], empty for neither.
Json CancelWhen(const ChildOptions& options);

// A child run a step starts in its commit.
struct ChildStart {
  std::string workflow;
  Json input = Json::object();
  ChildOptions options;
};

struct Run {
  std::string id;
  std::string namespace_name;
  std::string workflow;
  int definition_version = 0;
  std::string definition_hash;
  std::optional<std::string> key;
  KeyScope key_scope = KeyScope::kForever;
  std::string queue;
  int priority = 0;
  Json input = Json::object();
  Json context = Json::object();
  std::optional<std::string> cursor;
  int attempt = 0;
  RunStatus status = RunStatus::kReady;
  std::string run_at;
  std::optional<std::string> lease_owner;
  std::optional<std::string> lease_expires_at;
  int64_t version = 0;
  std::optional<Json> output;
  std::optional<std::string> error;
  std::optional<std::string> parent_run_id;
  std::optional<std::string> cancel_reason;
  // Steps with a compensation that committed, in commit order (JSON array of
  // step names); unwinding pops from the end.
  Json compensations = Json::array();
  // Set once the run unwinds: the status it ends in (failed or cancelled)
  // when its compensations are done. While set, the run executes
  // compensations, not steps.
  std::optional<RunStatus> final_status;
  // A child run: the parent's wait it reports to when it finishes.
  std::optional<std::string> parent_wait_key;
  // A child run: when it is cancelled along with its parent, as it asked.
  ChildOptions child_options;
  // When the whole run must have finished (database time), fixed when it
  // started; past it the run fails with code "deadline_exceeded".
  std::optional<std::string> deadline_at;
  std::string created_at;
  std::string updated_at;
  std::optional<std::string> finished_at;
};

struct NewRun {
  std::string namespace_name = "default";
  std::string workflow;
  int definition_version = 1;
  std::string definition_hash;
  std::optional<std::string> key;  // start key, unique per namespace and workflow in its scope
  KeyScope key_scope = KeyScope::kForever;
  std::string queue = "default";
  int priority = 0;
  Json input = Json::object();
  Json context = Json::object();
  std::optional<std::string> cursor;  // the first step
  std::optional<std::string> run_at;  // timestamptz text; absent: now
  std::optional<std::string> parent_run_id;
  std::optional<std::string> deadline_at;  // timestamptz text; absent: none
};

struct CreateRunResult {
  Run run;
  bool created = false;  // false: the run that holds this key is returned
};

// The state a step commits. The store bumps the version; a cancelled run
// stays cancelled whatever status the checkpoint asks for.
struct Checkpoint {
  std::string run_id;
  int64_t expected_version = 0;
  Json context = Json::object();
  std::optional<std::string> cursor;
  RunStatus status = RunStatus::kRunning;
  int attempt = 0;
  // For kReady and kCompensating: due after this many milliseconds (database time), or at run_at.
  int64_t delay_ms = 0;
  std::optional<std::string> run_at;
  // For kRunning: the lease is extended by this much from database now(),
  // held by lease_owner (absent: the current owner keeps it).
  int64_t lease_ms = 30000;
  std::optional<std::string> lease_owner;
  std::optional<Json> output;
  std::optional<std::string> error;
  Json compensations = Json::array();     // the run's compensation stack after this step
  std::optional<RunStatus> final_status;  // see Run::final_status
};

struct CheckpointResult {
  int64_t version = 0;
  RunStatus status = RunStatus::kRunning;  // kCancelled when a cancel won
  // Set when the checkpoint landed but ended the run instead of carrying it
  // forward: the failure's code ("deadline_exceeded", "history_limit").
  std::optional<std::string> ended_with;
};

struct RunEvent {
  int64_t position = 0;  // assigned by the store
  std::string run_id;
  std::optional<std::string> step;
  int attempt = 0;
  std::string kind;  // "context" for a field mutation, else a lifecycle name
  std::optional<std::string> field;
  std::optional<Json> value;
  std::string created_at;
};

enum class CancelOutcome {
  kCancelled,        // cancelled now (status cancelled, or compensating first)
  kAlreadyFinished,  // nothing changed
  kCompensating,     // already unwinding after a failure or cancel: nothing changed
};

struct CancelResult {
  CancelOutcome outcome = CancelOutcome::kCancelled;
  RunStatus status = RunStatus::kCancelled;  // the status the run has now
  int64_t version = 0;
  int waits_cancelled = 0;
};

struct RunFilter {
  std::optional<std::string> namespace_name;
  std::optional<std::string> workflow;
  std::optional<RunStatus> status;
  std::optional<std::string> created_after;   // inclusive
  std::optional<std::string> created_before;  // exclusive
  std::optional<std::string> key_prefix;
  std::optional<std::string> queue;
};

struct RunPage {
  std::vector<Run> runs;
  std::optional<std::string> next_cursor;  // opaque; absent on the last page
};

struct HistoryPage {
  std::vector<RunEvent> events;
  std::optional<int64_t> next_position;  // pass as `after` for the next page
};

enum class WaitStatus { kWaiting, kResuming, kResumed, kCancelled, kExpired };
std::string_view ToString(WaitStatus status);
WaitStatus ParseWaitStatus(std::string_view name);

enum class ChildWait { kAll, kFirst };
std::string_view ToString(ChildWait mode);
// Throws InvalidArgumentError for a name other than "all" or "first".
ChildWait ParseChildWait(std::string_view name);

struct NewWait {
  std::string correlation_key;
  std::string run_id;
  std::string event;
  std::string continuation_step;
  std::optional<std::string> timeout_step;
  std::optional<int64_t> timeout_ms;  // absent: never expires
  // A wait for the child runs the step started: resumes when all of them, or
  // the first of them, finished. Absent: a wait for a signal.
  std::optional<ChildWait> children;
};

// A wait a signal claimed (WAITING -> RESUMING): the run continues with the
// payload under the wait's event name, and its next commit marks the wait
// RESUMED as `claimant`.
struct Resume {
  std::string correlation_key;
  std::string event;
  Json payload;
  std::string claimant;
};

struct WaitRecord {
  std::string correlation_key;
  std::string run_id;
  std::string event;
  std::string continuation_step;
  std::optional<std::string> timeout_step;
  std::optional<ChildWait> children;  // a wait for child runs
  WaitStatus status = WaitStatus::kWaiting;
  std::optional<Json> payload;
  std::optional<std::string> claimant;
  std::optional<std::string> expires_at;
  bool expired = false;  // expires_at has passed, by database time
  std::string created_at;
  std::optional<std::string> claimed_at;
  std::optional<std::string> resumed_at;
};

// A key of the idempotency store, in its namespace (a plugin's keys live in
// its run's namespace).
struct IdempotencyRecord {
  std::string namespace_name = "default";
  std::string key;
  std::string status;  // "in_progress", "completed" or "failed"
  std::optional<std::string> owner;
  std::optional<Json> result;        // completed: the stored result
  std::optional<std::string> error;  // failed: why
  int claims = 0;                    // how many times the key was claimed
  std::string expires_at;
  bool expired = false;  // by database time: the key can be claimed afresh
  std::string created_at;
  std::string claimed_at;
  std::optional<std::string> completed_at;
};

// What a claim found. kClaimed: the caller holds the key now (in_doubt when
// it took over a claim that never completed or failed, whose owner may have
// made its effect; record.error is the failure of a failed claim it
// replaced). kInProgress: another owner holds it until record.expires_at.
// kCompleted: record.result is the stored result.
enum class IdempotencyClaimStatus { kClaimed, kCompleted, kInProgress };

struct IdempotencyClaim {
  IdempotencyClaimStatus status = IdempotencyClaimStatus::kClaimed;
  bool in_doubt = false;
  IdempotencyRecord record;
};

struct RetentionResult {
  int64_t runs = 0;
  int64_t events = 0;
  int64_t waits = 0;
  int64_t idempotency_keys = 0;
  bool more = false;  // stopped at its budget with more left to delete
};

}  // namespace cairn
