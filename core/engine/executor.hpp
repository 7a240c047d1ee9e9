// The executor of one slot: takes a claimed run, holds its stack lock, runs
// its steps one transaction each (checkpoint, cursor, status and audit events
// together, fenced by the version) until the run parks, finishes, is handed
// back or is lost. Everything a step's commit writes is in its StepPlan; the
// only state carried from one step to the next is the run itself and a
// signal found waiting in the inbox. One Executor per slot thread; it owns
// that slot's connection and is not shared between threads.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "definition.hpp"
#include "health.hpp"
#include "idempotency_session.hpp"
#include "lease_book.hpp"
#include "model.hpp"
#include "step.hpp"
#include "step_invocation.hpp"
#include "step_plan.hpp"
#include "store.hpp"

namespace cairn {

class Metrics;

struct ExecutorOptions {
  std::string worker_id;
  std::chrono::milliseconds lease{30000};
  // When another session holds the stack lock, the run is handed back and
  // becomes due again after this.
  std::chrono::milliseconds stack_busy_delay{1000};
  Metrics* metrics = nullptr;  // null: record nothing
  // The slot's heart: beaten before each step with the step's timeout.
  Health::Pulse* pulse = nullptr;
  // The worker's idempotency session, offered to steps; null: none.
  std::shared_ptr<IdempotencySession> idempotency;
};

enum class ExecutionEnd {
  kParked,      // ready in the future, waiting, or finished: nothing more to do now
  kHandedBack,  // released without consuming an attempt (shutdown, stack held elsewhere,
                // no token of its queue's rate limit for its next step)
  kLost,        // the lease or the version fence was lost: someone else owns the run
};

class Executor {
 public:
  Executor(store::ConnectionOptions connection_options, const DefinitionSet& definitions,
           const StepCatalog& steps, ExecutorOptions options, LeaseBook& leases);
  ~Executor();

  // Executes a run claimed by this worker. `stopping` asks it to hand the run
  // back after the step in flight commits. Never throws for a step's failure;
  // database errors end the run's turn here (kLost) and are logged.
  // A claim with step_tokens (a rate-limited queue) takes a token before each
  // step after the first; without one the run is handed back, due when the
  // bucket next holds a token, so that it waits without holding the slot.
  ExecutionEnd Execute(const store::ClaimedRun& claim, const std::atomic<bool>& stopping);

  // False after a connection error: the slot should build a new Executor.
  bool Healthy() const;

 private:
  struct StepResult;
  struct CommittedPlan;
  // Turns a step's outcome into what its commit writes.
  using Planner = std::function<StepPlan(const StepOutcome&)>;
  // past_deadline: the run was claimed after its deadline passed.
  ExecutionEnd ExecuteLocked(Run& run, std::optional<Resume> resume, bool past_deadline,
                             bool step_tokens, const std::atomic<bool>& stopping);
  // The step at the cursor, resuming from `resume` when a signal claimed the
  // run's wait; step_name receives what ran. A run past its deadline fails
  // there instead, without running the step.
  StepResult RunForwardStep(Run& run, const WorkflowDefinition& workflow,
                            const std::optional<Resume>& resume, bool past_deadline,
                            std::string& step_name);
  // The compensation at the top of an unwinding run's stack.
  StepResult RunCompensation(Run& run, const WorkflowDefinition& workflow, std::string& step_name);
  // Runs `step` and commits what plan_for makes of its outcome. For a
  // compensation, `compensates` names the workflow step it undoes.
  StepResult RunStep(Run& run, const WorkflowDefinition& workflow, const StepDefinition& step,
                     const Planner& plan_for, const std::string& compensates = {});
  // Writes a plan in the caller's transaction: the wait, the completion of
  // the wait the run resumed from, the children, the checkpoint with its
  // events, the signals. Depends on nothing but the plan.
  static CommittedPlan Commit(store::Tx& tx, StepPlan& plan);
  // Commits a plan in a transaction of its own (one statement when it can).
  StepResult CommitAlone(Run& run, StepPlan plan);
  // Applies a committed plan to the slot's copy of the run.
  StepResult Adopt(Run& run, const StepPlan& plan, CommittedPlan committed);
  bool Release(const Run& run, std::chrono::milliseconds delay);
  // The run's stack lock on the slot's session and the run as committed now,
  // in one round trip; reconnects once when the session turns out to have
  // died while the slot was idle.
  store::StackLockedRun LockStackAndLoad(const std::string& run_id);

  store::ConnectionOptions connection_options_;
  std::unique_ptr<store::Connection> connection_;
  const DefinitionSet& definitions_;
  const StepCatalog& steps_;
  ExecutorOptions options_;
  LeaseBook& leases_;
  StepRunner step_runner_;  // the slot's step thread
};

}  // namespace cairn
