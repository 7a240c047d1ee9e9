// The executor of one slot: takes a claimed run, holds its stack lock, runs
// its steps one transaction each (checkpoint, cursor, status and audit events
// together, fenced by the version) until the run parks, finishes, is handed
// back or is lost. Everything a step's commit writes is in its StepPlan; the
// only state carried from one step to the next is the run itself and a
// signal found waiting in the inbox. In batch mode it holds many runs and
// commits a round of their steps in one transaction (ExecuteBatch). One
// Executor per slot thread; it owns that slot's connection and is not shared
// between threads.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

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
  // Asked when a run's turn ends in a checkpoint that parks it and commits
  // alone in one statement, outside batch mode: what that checkpoint should
  // claim for the slot besides (nothing: nullopt). The run it claims is the
  // slot's next (TakeCheckpointClaim). Null: never.
  std::function<std::optional<store::ClaimRequest>()> next_claim;
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

  // Executes a run claimed for the slot on this executor's session, where
  // its stack lock was tried: by the last turn's checkpoint
  // (TakeCheckpointClaim) or by store::ClaimRunForSlot. As Execute
  // otherwise: a run whose lock another session holds is handed back.
  ExecutionEnd ExecuteNext(store::ClaimedNextRun next, const std::atomic<bool>& stopping);

  // A claim that the last turn's final checkpoint made and committed.
  struct CheckpointClaim {
    std::optional<store::ClaimedNextRun> run;  // none was due
  };
  // The last turn's checkpoint claim, once; nullopt when that turn's last
  // commit claimed nothing (it was not asked to, or failed and committed
  // again without the claim).
  std::optional<CheckpointClaim> TakeCheckpointClaim();

  // Batch mode: executes many claimed runs together, one end per claim in
  // their order. One statement takes their stack locks and reads them. Then,
  // round by round, it runs the due step of each run still held, in turn,
  // and commits the rounds' checkpoints that are one statement each (no
  // wait, signal, child or transactional SQL) in one transaction; the others
  // commit alone as Execute commits them. A conflict or a refusal in the
  // round's transaction rolls it back, and each of its checkpoints then
  // commits alone, so only the run that conflicted is lost. Guarantees are
  // those of Execute: every checkpoint is fenced by its run's version, and a
  // transactional step's writes commit with its own checkpoint only.
  std::vector<ExecutionEnd> ExecuteBatch(const std::vector<store::ClaimedRun>& claims,
                                         const std::atomic<bool>& stopping);

  // False after a connection error: the slot should build a new Executor.
  bool Healthy() const;
  // The slot's session, between runs: the slot claims its next run on it.
  store::Connection& session() { return *connection_; }
  // After a failed claim on this executor's session: see
  // store::Connection::ReleaseUncountedStackLocks. A failure is logged.
  void ReleaseUncountedStackLocks();

 private:
  struct StepResult;
  struct CommittedPlan;
  struct Turn;
  struct Deferred;
  // Turns a step's outcome into what its commit writes.
  using Planner = std::function<StepPlan(const StepOutcome&)>;
  // The held run that `claim` became once its stack lock was taken and the
  // run read (`fresh`), or how its turn ended at once: handed back when
  // another session holds the stack or its definition is not loaded, lost
  // when it changed after the claim. Holds its lease in the lease book.
  std::variant<Turn, ExecutionEnd> Open(const store::ClaimedRun& claim,
                                        store::StackLockedRun fresh);
  // Execute and ExecuteNext, once the run's stack lock was tried and the
  // run read (`fresh`): its steps until its turn ends, and the lock let go.
  ExecutionEnd ExecuteOpened(const store::ClaimedRun& claim, store::StackLockedRun fresh,
                             const std::atomic<bool>& stopping);
  // One step of the run, committed or, in a batch round, deferred to the
  // round's transaction; sets turn.end when the run's turn is over.
  void Advance(Turn& turn, const std::atomic<bool>& stopping);
  // Records a step's committed (or lost) result on its turn.
  void Finish(Turn& turn, StepResult result);
  // Commits a batch round's deferred checkpoints in one transaction, or one
  // by one after a conflict or refusal; one result each, in their order.
  std::vector<StepResult> CommitRound(std::vector<Deferred>& round);
  // A plan committed alone, with what a failed commit means for the run: lost
  // when it conflicted or may have landed, else refused, and the failure
  // plan_for makes of the refusal is committed instead (lost without one).
  StepResult CommitOrRecordRefusal(Run& run, StepPlan plan, const Planner& plan_for);
  // Commits the plan alone, or when a batch round is being gathered and the
  // plan is one statement, defers it to the round (End::kDeferred).
  StepResult Settle(Run& run, StepPlan plan, const Planner& plan_for);
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
  // events, the signals. Depends on nothing but the plan. release_stack: see
  // store::SaveCheckpoint.
  // next: the run's checkpoint claims the slot's next run too (release_stack
  // must be set; see store::SaveCheckpointAndClaim).
  static CommittedPlan Commit(store::Tx& tx, StepPlan& plan, bool release_stack = false,
                              const store::ClaimRequest* next = nullptr);
  // Commits a plan in a transaction of its own (one statement when it can).
  StepResult CommitAlone(Run& run, StepPlan plan);
  // Applies a committed plan to the slot's copy of the run.
  StepResult Adopt(Run& run, const StepPlan& plan, CommittedPlan committed);
  bool Release(const Run& run, std::chrono::milliseconds delay);
  // The runs' stack locks on the slot's session and the runs as committed
  // now, in one round trip; reconnects once when the session turns out to
  // have died while the slot was idle.
  std::vector<store::StackLockedRun> LockStackAndLoad(const std::vector<std::string>& run_ids);
  // Lets go of the stack lock of a claimed run nobody took
  // (TakeCheckpointClaim); none is expected.
  void DropCheckpointClaim();

  store::ConnectionOptions connection_options_;
  std::unique_ptr<store::Connection> connection_;
  const DefinitionSet& definitions_;
  const StepCatalog& steps_;
  ExecutorOptions options_;
  LeaseBook& leases_;
  StepRunner step_runner_;  // the slot's step thread
  // While ExecuteBatch gathers a round: where one-statement plans wait for
  // the round's transaction.
  std::vector<Deferred>* round_ = nullptr;
  // While Execute or ExecuteNext runs one run: its parking checkpoint may
  // claim the slot's next run (options_.next_claim), kept here for the slot.
  bool claims_next_ = false;
  std::optional<CheckpointClaim> checkpoint_claim_;
};

}  // namespace cairn
