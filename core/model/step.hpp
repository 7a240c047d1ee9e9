// The step contract: what the engine needs from a step, whatever plugin it
// came from (a name and a function from input and context to one outcome),
// and the catalog it finds steps in. The plugin room adapts the C ABI to
// this; the engine knows nothing of dlopen or C buffers.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model.hpp"

namespace cairn {

enum class OutcomeKind { kNext, kJump, kWait, kSleep, kComplete, kFail };

struct StepOutcome {
  OutcomeKind kind = OutcomeKind::kNext;
  // Context fields the step set (kNext, kJump, and any other kind): merged
  // into the run's context, one audit event per changed field. A null value
  // removes the field.
  Json context_updates = Json::object();
  std::string jump_to;     // kJump: the step name
  std::string wait_event;  // kWait
  std::string wait_key;    // kWait: correlation key (none for wait_children)
  // kWait for the child runs this step starts: all of them or the first to
  // finish; their summaries join the context under wait_event.
  std::optional<ChildWait> wait_children;
  std::optional<int64_t> wait_timeout_ms;  // kWait
  std::optional<int64_t> sleep_ms;         // kSleep: duration
  std::optional<std::string> sleep_until;  // kSleep: timestamptz text
  Json output;                             // kComplete
  bool retryable = true;                   // kFail
  std::string error_code;                  // kFail: matched against non-retryable codes
  std::string error_message;               // kFail
  // Signals to other runs (correlation key, payload), sent in the step's
  // commit; dropped when the step fails.
  std::vector<std::pair<std::string, Json>> signals;
  // Child runs to start, in the step's commit; dropped when the step fails.
  std::vector<ChildStart> children;
};

// A failure outcome for problems found by cairn rather than reported by the
// step (timeout, crash, refused SQL, unknown jump target).
inline StepOutcome FailureOutcome(std::string code, std::string message, bool retryable = true) {
  StepOutcome outcome;
  outcome.kind = OutcomeKind::kFail;
  outcome.retryable = retryable;
  outcome.error_code = std::move(code);
  outcome.error_message = std::move(message);
  return outcome;
}

// Lets a transactional step run parameterized SQL inside the checkpoint's
// transaction. params is a JSON array; the result is a JSON array of row
// objects. Throws InvalidArgumentError for refused statements.
class StepSql {
 public:
  virtual ~StepSql() = default;
  virtual Json Execute(const std::string& sql, const Json& params) = 0;
};

// Lets a step guard an effect outside the database (a charge, an e-mail)
// with a key of the idempotency store. Each call commits at once, in a
// transaction of its own, never the step's: a step killed after its effect
// leaves the key as its last call committed it. Keys live in the run's
// namespace and are owned by the run, so the run's next attempt finds its
// own claim (see docs: "in doubt"). Database errors throw store errors;
// invalid keys, results or times throw InvalidArgumentError.
class StepIdempotency {
 public:
  virtual ~StepIdempotency() = default;
  virtual IdempotencyClaim Claim(const std::string& key, std::chrono::milliseconds lease) = 0;
  // False when the run no longer holds the key in progress.
  virtual bool Complete(const std::string& key, const Json& result,
                        std::chrono::milliseconds ttl) = 0;
  virtual bool Fail(const std::string& key, const std::string& error) = 0;
};

struct StepCall {
  std::string run_id;
  std::string workflow;
  std::string step;
  // For a compensation, the workflow step it undoes; empty for a forward step.
  std::string compensates;
  int attempt = 0;
  const Json* input = nullptr;
  const Json* context = nullptr;
  StepSql* sql = nullptr;  // non-null only for transactional steps
  // The idempotency store; null when the caller offers none (a step then
  // gets a refusal saying so).
  StepIdempotency* idempotency = nullptr;
  // The step's timeout, for a step that enforces it itself (see
  // Step::EnforcesTimeout); zero: none.
  std::chrono::milliseconds timeout{0};
};

// A step as the engine sees it. Invoke never throws for a step's own failure:
// that is an OutcomeKind::kFail.
class Step {
 public:
  virtual ~Step() = default;
  virtual const std::string& name() const = 0;
  virtual const std::string& plugin() const = 0;
  virtual StepOutcome Invoke(const StepCall& call) = 0;
  // True when Invoke itself ends the step at call.timeout (a step run in a
  // process of its own, which is killed): the engine then calls it on the
  // slot's thread, with no thread of its own to abandon.
  virtual bool EnforcesTimeout() const { return false; }
};

// Where the engine finds the step a definition's `run` names. The workflow
// is part of the question because how a step runs (in a step process or on
// a thread) may be configured per workflow. Find is safe from any thread
// once the catalog is built.
class StepCatalog {
 public:
  virtual ~StepCatalog() = default;
  // The step registered under `step_name`, as runs of `workflow` run it, or
  // nullptr when there is none.
  virtual std::shared_ptr<Step> Find(const std::string& step_name,
                                     const std::string& workflow) const = 0;
};

}  // namespace cairn
