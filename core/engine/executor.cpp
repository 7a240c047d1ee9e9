// See executor.hpp. A step's code runs through the slot's StepRunner
// (step_invocation.hpp); what its commit writes comes from step_plan.
#include "executor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>
#include <variant>

#include "executor_internal.hpp"
#include "logging.hpp"
#include "metrics.hpp"
#include "step_invocation.hpp"

namespace cairn {

namespace {

double JitterSample() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
}

StepOutcome TimeoutOutcome(const StepDefinition& step) {
  return FailureOutcome(
      "timeout", "step " + step.name + " exceeded its timeout of " + FormatDuration(step.timeout),
      true);
}

// Words as the database's deadline_error() writes them.
StepOutcome DeadlineOutcome(const Run& run) {
  return FailureOutcome("deadline_exceeded",
                        "the run passed its deadline of " + run.deadline_at.value_or("?"), false);
}

// True when a committed plan failed its run at the deadline: the plan itself
// (a run claimed after its deadline), or the checkpoint, which ended the run
// because it landed after the deadline.
bool FailsAtDeadline(const StepPlan& plan, const std::optional<std::string>& ended_with) {
  if (ended_with == "deadline_exceeded") return true;
  return std::any_of(plan.events.begin(), plan.events.end(), [](const RunEvent& e) {
    return e.kind == "failed" && e.value && e.value->is_object() &&
           e.value->value("code", "") == "deadline_exceeded";
  });
}

}  // namespace

namespace executor_detail {

bool OneStatement(const StepPlan& plan) {
  return !plan.wait && !plan.resumed && plan.signals.empty() && plan.children.empty();
}

bool LostOrInDoubt(const Error& e) {
  return dynamic_cast<const OccConflictError*>(&e) || e.kind() == ErrorKind::kTransient ||
         e.kind() == ErrorKind::kInDoubt;
}

std::optional<StepOutcome> RefusalOf(const Error& e, Metrics* metrics, const std::string& run) {
  if (!LostOrInDoubt(e)) return FailureOutcome("checkpoint", e.what(), false);
  if (dynamic_cast<const OccConflictError*>(&e)) {
    if (metrics) metrics->OccConflict();
    spdlog::warn("{}: lost the run: {}", run, e.what());
  } else {
    // Never repeat it blindly.
    spdlog::warn("{}: checkpoint not confirmed: {}", run, e.what());
  }
  return std::nullopt;
}

}  // namespace executor_detail

using executor_detail::LostOrInDoubt;
using executor_detail::OneStatement;
using executor_detail::RefusalOf;

Executor::CommittedPlan Executor::Commit(store::Tx& tx, StepPlan& plan, bool release_stack,
                                         const store::ClaimRequest* next) {
  CommittedPlan committed;
  if (plan.wait) {
    // A wait whose signal already arrived (the inbox) turns the plan into
    // "continue at once", resuming on this slot.
    WaitRecord wait = store::SaveWait(tx, *plan.wait);
    if (wait.status == WaitStatus::kResuming) {
      plan.checkpoint.status = RunStatus::kRunning;
      committed.inbox_resume =
          Resume{wait.correlation_key, wait.event, wait.payload.value_or(Json::object()),
                 wait.claimant.value_or("")};
    }
  }
  if (plan.resumed) {
    store::CompleteWait(tx, plan.resumed->correlation_key, plan.resumed->claimant);
  }
  const std::optional<std::string> report_to =
      plan.wait && plan.wait->children ? std::optional(plan.wait->correlation_key) : std::nullopt;
  auto started = plan.events.begin();
  for (const ChildStart& child : plan.children) {
    started = std::find_if(started, plan.events.end(),
                           [](const RunEvent& event) { return event.kind == "child_started"; });
    (*started->value)["id"] = store::StartChildRun(tx, plan.checkpoint.run_id, report_to, child);
    ++started;
  }
  if (next) {
    store::CheckpointAndNextRun saved =
        store::SaveCheckpointAndClaim(tx, plan.checkpoint, plan.events, *next);
    committed.checkpoint = saved.checkpoint;
    committed.claim = CheckpointClaim{std::move(saved.next)};
  } else {
    committed.checkpoint = store::SaveCheckpoint(tx, plan.checkpoint, plan.events, release_stack);
  }
  for (const auto& [key, payload] : plan.signals) {
    committed.signals.push_back(store::Signal(tx, key, payload));
  }
  return committed;
}

Executor::Executor(store::ConnectionOptions connection_options, const DefinitionSet& definitions,
                   const StepCatalog& steps, ExecutorOptions options, LeaseBook& leases)
    : connection_options_(std::move(connection_options)),
      connection_(std::make_unique<store::Connection>(connection_options_)),
      definitions_(definitions),
      steps_(steps),
      options_(std::move(options)),
      leases_(leases) {}

Executor::~Executor() = default;

bool Executor::Healthy() const { return connection_->IsOpen(); }

bool Executor::Release(const Run& run, std::chrono::milliseconds delay) {
  return connection_->Transact([&](store::Tx& tx) {
    return store::ReleaseRun(tx, run.id, run.version, options_.worker_id, delay);
  });
}

void Executor::ReleaseUncountedStackLocks() {
  try {
    connection_->ReleaseUncountedStackLocks();
  } catch (const std::exception& e) {
    // The session is likely gone, and its locks with it; if not, the slot
    // replaces it once it is found unhealthy.
    spdlog::warn("releasing uncounted stack locks failed: {}", e.what());
  }
}

std::vector<store::StackLockedRun> Executor::LockStackAndLoad(
    const std::vector<std::string>& run_ids) {
  try {
    return store::LockStacksAndLoadRuns(*connection_, run_ids);
  } catch (const Error& e) {
    if (!e.transient()) throw;
    // The slot's session died while it was idle (a terminated backend, a
    // server restart) and nobody noticed until now: nothing of these runs
    // has happened yet, so a fresh session takes them on at once instead of
    // leaving them to their leases.
    spdlog::info("the slot's connection was lost while idle ({}); reconnecting", e.what());
    connection_ = std::make_unique<store::Connection>(connection_options_);
    return store::LockStacksAndLoadRuns(*connection_, run_ids);
  }
}

std::variant<Executor::Turn, ExecutionEnd> Executor::Open(const store::ClaimedRun& claim,
                                                          store::StackLockedRun fresh) {
  const Run& claimed = claim.run;
  if (!fresh.locked) {
    // A zombie still executes this run on another session; let it finish
    // or die, then try again.
    spdlog::info("run {}: stack lock held by another session, handing the run back", claimed.id);
    if (options_.metrics) options_.metrics->StackLockContended();
    Release(claimed, options_.stack_busy_delay);
    return ExecutionEnd::kHandedBack;
  }
  // The claim's snapshot may be stale: the run may have moved on between
  // the claim and the lock.
  if (!fresh.run || fresh.run->run.status != RunStatus::kRunning ||
      fresh.run->run.lease_owner != options_.worker_id ||
      fresh.run->run.version != claimed.version) {
    spdlog::info("run {}: changed after the claim, leaving it", claimed.id);
    return ExecutionEnd::kLost;
  }
  Turn turn;
  turn.workflow = definitions_.FindByHash(fresh.run->run.definition_hash);
  if (!turn.workflow) {
    // Claims filter on served definitions, so this is a bug, not a state.
    spdlog::error("run {}: definition {} is not loaded here", claimed.id,
                  fresh.run->run.definition_hash);
    Release(fresh.run->run, options_.stack_busy_delay);
    return ExecutionEnd::kHandedBack;
  }
  turn.run = std::move(fresh.run->run);
  turn.resume = std::move(fresh.run->resume);
  turn.past_deadline = fresh.run->past_deadline;
  turn.step_tokens = claim.step_tokens;
  leases_.Hold(turn.run.id, turn.run.version);
  return turn;
}

ExecutionEnd Executor::Execute(const store::ClaimedRun& claim, const std::atomic<bool>& stopping) {
  try {
    store::StackLockedRun fresh = std::move(LockStackAndLoad({claim.run.id}).front());
    return ExecuteOpened(claim, std::move(fresh), stopping);
  } catch (const std::exception& e) {
    spdlog::error("run {}: {}", claim.run.id, e.what());
    return ExecutionEnd::kLost;
  }
}

ExecutionEnd Executor::ExecuteNext(store::ClaimedNextRun next, const std::atomic<bool>& stopping) {
  if (!next.opened.run) {
    // Its row could not be read (the store said so): left to its lease.
    try {
      connection_->UnlockStack(next.run_id);  // nothing when it was not taken
    } catch (const std::exception& e) {
      spdlog::warn("run {}: releasing the stack lock failed: {}", next.run_id, e.what());
    }
    return ExecutionEnd::kLost;
  }
  const store::ClaimedRun claim{next.opened.run->run, next.step_tokens};
  return ExecuteOpened(claim, std::move(next.opened), stopping);
}

std::optional<Executor::CheckpointClaim> Executor::TakeCheckpointClaim() {
  std::optional<CheckpointClaim> claim = std::move(checkpoint_claim_);
  checkpoint_claim_.reset();
  return claim;
}

void Executor::DropCheckpointClaim() {
  if (!checkpoint_claim_) return;
  if (checkpoint_claim_->run) {
    const std::string& run_id = checkpoint_claim_->run->run_id;
    spdlog::error("run {}: claimed for this slot but not taken; left to its lease", run_id);
    try {
      connection_->UnlockStack(run_id);
    } catch (const std::exception& e) {
      spdlog::warn("run {}: releasing the stack lock failed: {}", run_id, e.what());
    }
  }
  checkpoint_claim_.reset();
}

ExecutionEnd Executor::ExecuteOpened(const store::ClaimedRun& claim, store::StackLockedRun fresh,
                                     const std::atomic<bool>& stopping) {
  const std::string& run_id = claim.run.id;
  DropCheckpointClaim();
  try {
    struct Unlock {
      store::Connection& connection;
      const std::string& run_id;
      ~Unlock() {
        try {
          connection.UnlockStack(run_id);  // nothing when its last checkpoint released it
        } catch (const std::exception& e) {
          spdlog::warn("run {}: releasing the stack lock failed: {}", run_id, e.what());
        }
      }
    } unlock{*connection_, run_id};
    std::variant<Turn, ExecutionEnd> opened = Open(claim, std::move(fresh));
    auto* turn = std::get_if<Turn>(&opened);
    if (!turn) return std::get<ExecutionEnd>(opened);
    struct Drop {
      LeaseBook& leases;
      const std::string& run_id;
      ~Drop() { leases.Drop(run_id); }
    } drop{leases_, run_id};
    struct ClaimsNext {
      bool& claims_next;
      ~ClaimsNext() { claims_next = false; }
    } claims_next{claims_next_};
    claims_next_ = true;
    while (!turn->end) Advance(*turn, stopping);
    return *turn->end;
  } catch (const std::exception& e) {
    spdlog::error("run {}: {}", run_id, e.what());
    return ExecutionEnd::kLost;
  }
}

Executor::StepResult Executor::Settle(Run& run, StepPlan plan, const Planner& plan_for) {
  if (round_ && OneStatement(plan)) {
    round_->push_back({&run, std::move(plan), plan_for});
    return {StepResult::End::kDeferred};
  }
  return CommitAlone(run, std::move(plan));
}

void Executor::Advance(Turn& turn, const std::atomic<bool>& stopping) {
  Run& run = turn.run;
  if (stopping.load()) {
    turn.end = Release(run, std::chrono::milliseconds(0)) ? ExecutionEnd::kHandedBack
                                                          : ExecutionEnd::kLost;
    return;
  }
  if (leases_.Lost(run.id)) {
    turn.end = ExecutionEnd::kLost;
    return;
  }
  if (turn.step_tokens && !turn.first_step) {
    const std::chrono::milliseconds no_token_for =
        connection_->Autocommit([&](store::Tx& tx) { return store::TakeStepToken(tx, run.queue); });
    if (no_token_for.count() > 0) {
      if (options_.metrics) options_.metrics->RateLimited(run.queue);
      turn.end = Release(run, no_token_for) ? ExecutionEnd::kHandedBack : ExecutionEnd::kLost;
      return;
    }
  }
  turn.first_step = false;
  turn.step_started = std::chrono::steady_clock::now();
  // An unwinding run's waits were cancelled or expired: it resumes from none.
  // Past the claim, the deadline is the checkpoint's to enforce: one that
  // commits after it ends the run (save_checkpoint).
  StepResult result = run.final_status ? RunCompensation(run, *turn.workflow, turn.step_name)
                                       : RunForwardStep(run, *turn.workflow, turn.resume,
                                                        turn.past_deadline, turn.step_name);
  turn.past_deadline = false;
  if (result.end != StepResult::End::kDeferred) Finish(turn, std::move(result));
}

void Executor::Finish(Turn& turn, StepResult result) {
  turn.resume = std::move(result.resume);
  if (options_.metrics) {
    options_.metrics->StepEnded(turn.workflow->name, turn.step_name, result.outcome,
                                std::chrono::steady_clock::now() - turn.step_started,
                                turn.run.status);
  }
  if (result.end == StepResult::End::kLost) turn.end = ExecutionEnd::kLost;
  if (result.end == StepResult::End::kParked) turn.end = ExecutionEnd::kParked;
}

Executor::StepResult Executor::RunForwardStep(Run& run, const WorkflowDefinition& workflow,
                                              const std::optional<Resume>& resume,
                                              bool past_deadline, std::string& step_name) {
  const std::string cursor = run.cursor.value_or(workflow.FirstStep());
  step_name = cursor;
  // The signal's payload joins the context now; it commits with this step,
  // whatever its outcome.
  std::optional<Resumption> resumption;
  if (resume) resumption = TakeUpResume(run, *resume, cursor);
  auto with_resume = [&](StepPlan plan) {
    if (resumption) AttachResume(plan, *resumption);
    return plan;
  };
  if (past_deadline) {
    // The run was due after its deadline and claimed before the sweeper
    // failed it: it fails as the sweeper would have, with nothing run.
    spdlog::warn(
        "run {} workflow {} step {}: claimed after its deadline of {}; failing it "
        "without running the step (code deadline_exceeded)",
        run.id, workflow.name, cursor, run.deadline_at.value_or("?"));
    return CommitAlone(run, with_resume(PlanRunFailure(run, cursor, run.attempt,
                                                       DeadlineOutcome(run), options_.lease)));
  }
  const StepDefinition* step = workflow.FindStep(cursor);
  if (!step) {
    // Cannot happen for a run pinned to its definition; fail it visibly.
    return CommitAlone(
        run, with_resume(PlanRunFailure(
                 run, cursor, run.attempt + 1,
                 FailureOutcome("unknown_step",
                                "the run's cursor names step \"" + cursor + "\", which workflow " +
                                    workflow.name + " v" + std::to_string(workflow.version) +
                                    " does not have",
                                false),
                 options_.lease)));
  }
  // Copies, not references, of what the planner needs: a batch round may
  // call it after this returns.
  return RunStep(
      run, workflow, *step, [this, &run, &workflow, step, resumption](const StepOutcome& outcome) {
        StepPlan plan = PlanStep(run, workflow, *step, outcome, JitterSample(), options_.lease);
        if (resumption) AttachResume(plan, *resumption);
        return plan;
      });
}

Executor::StepResult Executor::RunCompensation(Run& run, const WorkflowDefinition& workflow,
                                               std::string& step_name) {
  const std::string top =
      run.compensations.empty() ? std::string() : run.compensations.back().get<std::string>();
  const StepDefinition* compensated = workflow.FindStep(top);
  if (!compensated || !compensated->compensate) {
    // Cannot happen for a run pinned to its definition; stop unwinding visibly.
    StepDefinition unknown;
    unknown.name = top;
    unknown.compensate = top;
    step_name = top;
    return CommitAlone(
        run,
        PlanCompensation(run, unknown,
                         FailureOutcome("unknown_step",
                                        "the run's compensation stack names step \"" + top +
                                            "\", which has no compensation in workflow " +
                                            workflow.name + " v" + std::to_string(workflow.version),
                                        false),
                         JitterSample(), options_.lease));
  }
  const StepDefinition compensation = compensated->Compensation();
  step_name = compensation.name;
  return RunStep(
      run, workflow, compensation,
      // A copy of the pointer: a batch round may call this after we return.
      [this, &run, compensated](const StepOutcome& outcome) {
        return PlanCompensation(run, *compensated, outcome, JitterSample(), options_.lease);
      },
      compensated->name);
}

Executor::StepResult Executor::Adopt(Run& run, const StepPlan& plan, CommittedPlan committed) {
  run.version = committed.checkpoint.version;
  run.context = plan.checkpoint.context;
  run.cursor = plan.checkpoint.cursor;
  run.attempt = plan.checkpoint.attempt;
  run.status = committed.checkpoint.status;
  run.error = plan.checkpoint.error;
  run.compensations = plan.checkpoint.compensations;
  run.final_status = plan.checkpoint.final_status;
  leases_.Update(run.id, run.version);
  if (committed.checkpoint.ended_with) {
    spdlog::warn("run {}: the checkpoint landed but ended the run ({}), now {}", run.id,
                 *committed.checkpoint.ended_with, ToString(run.status));
  }
  if (options_.metrics && FailsAtDeadline(plan, committed.checkpoint.ended_with)) {
    options_.metrics->DeadlinesExceeded(1);
  }
  if (committed.claim) checkpoint_claim_ = std::move(committed.claim);
  StepResult result;
  result.outcome = StepOutcomeLabel(plan.events);
  result.end =
      run.status == RunStatus::kRunning ? StepResult::End::kContinue : StepResult::End::kParked;
  result.resume = std::move(committed.inbox_resume);
  if (options_.metrics) {
    for (auto outcome : committed.signals) options_.metrics->SignalSent(store::ToString(outcome));
  }
  return result;
}

Executor::StepResult Executor::CommitAlone(Run& run, StepPlan plan) {
  // A plan that is one statement commits without an explicit transaction,
  // and a run it parks lets its stack lock go in that statement, and may
  // claim the slot's next run in it too.
  const bool one_statement = OneStatement(plan);
  const bool parks = plan.checkpoint.status != RunStatus::kRunning;
  std::optional<store::ClaimRequest> next;
  if (one_statement && parks && claims_next_ && options_.next_claim) next = options_.next_claim();
  if (next) {
    try {
      CommittedPlan committed =
          connection_->Autocommit([&](store::Tx& tx) { return Commit(tx, plan, true, &*next); });
      return Adopt(run, plan, std::move(committed));
    } catch (const Error& e) {
      // The claim's stack lock outlives the statement's rollback; a fenced
      // checkpoint claimed nothing.
      if (!dynamic_cast<const OccConflictError*>(&e)) ReleaseUncountedStackLocks();
      // A statement that failed otherwise committed nothing, so the
      // checkpoint can go again alone: the claim must never cost the run its
      // step. A conflict, a commit in doubt or a refused checkpoint (a
      // limit) is the checkpoint's own, and says so as usual.
      if (LostOrInDoubt(e) || e.kind() == ErrorKind::kInvalidArgument) throw;
      spdlog::warn(
          "run {}: its checkpoint with the slot's next claim failed ({}); committing it "
          "again without the claim",
          run.id, e.what());
    }
  }
  CommittedPlan committed =
      one_statement
          ? connection_->Autocommit([&](store::Tx& tx) { return Commit(tx, plan, parks); })
          : connection_->Transact([&](store::Tx& tx) { return Commit(tx, plan); });
  return Adopt(run, plan, std::move(committed));
}

Executor::StepResult Executor::RunStep(Run& run, const WorkflowDefinition& workflow,
                                       const StepDefinition& step, const Planner& plan_for,
                                       const std::string& compensates) {
  const ScopedRunLog run_log({run.id, workflow.name, step.name, run.attempt + 1});
  if (options_.pulse) options_.pulse->Beat(step.timeout + options_.lease);
  auto log = [&](spdlog::level::level_enum level, const std::string& message) {
    spdlog::log(level, "run {} workflow {} step {} attempt {}: {}", run.id, workflow.name,
                step.name, run.attempt + 1, message);
  };
  log(spdlog::level::debug, "starting");
  std::shared_ptr<Step> plugin_step = steps_.Find(step.run, workflow.name);
  StepCall call;
  call.run_id = run.id;
  call.workflow = workflow.name;
  call.step = step.name;
  call.compensates = compensates;
  call.attempt = run.attempt + 1;
  call.input = &run.input;
  call.context = &run.context;
  std::shared_ptr<StepIdempotency> idempotency =
      options_.idempotency ? options_.idempotency->ForRun(run.namespace_name, run.id) : nullptr;

  std::optional<StepOutcome> failure;  // to commit in a transaction of its own
  try {
    if (!plugin_step) {
      failure =
          FailureOutcome("unknown_step", "plugin step \"" + step.run + "\" is not loaded", false);
    } else if (!step.transactional) {
      auto outcome = step_runner_.Invoke(plugin_step, call, nullptr, idempotency, step.timeout);
      if (!outcome) outcome = TimeoutOutcome(step);
      if (outcome->kind == OutcomeKind::kFail) {
        failure = *outcome;
      } else {
        return Settle(run, plan_for(*outcome), plan_for);
      }
    } else {
      // The step's own writes and its checkpoint commit together; a step that
      // did not succeed rolls its writes back and records the failure apart.
      StepPlan plan;
      auto ended =
          connection_->Transact([&](store::Tx& tx) -> std::variant<CommittedPlan, StepOutcome> {
            store::ApplyStepTransactionSettings(tx, step.timeout);
            auto sql = std::make_shared<TransactionStepSql>(tx);
            auto outcome = step_runner_.Invoke(plugin_step, call, sql, idempotency, step.timeout);
            auto sql_failure = sql->Close();
            std::optional<StepOutcome> rolled_back;
            if (!outcome) {
              rolled_back = TimeoutOutcome(step);
            } else if (sql_failure) {
              rolled_back = FailureOutcome("sql", *sql_failure, true);
            } else if (outcome->kind == OutcomeKind::kFail) {
              rolled_back = *outcome;
            } else {
              plan = plan_for(*outcome);
              rolled_back = plan.refused;
            }
            if (rolled_back) {
              tx.RollBackOnReturn();
              return *rolled_back;
            }
            return Commit(tx, plan);
          });
      if (auto* committed = std::get_if<CommittedPlan>(&ended)) {
        return Adopt(run, plan, std::move(*committed));
      }
      failure = std::get<StepOutcome>(std::move(ended));
    }
  } catch (const Error& e) {
    failure = RefusalOf(e, options_.metrics,
                        fmt::format("run {} workflow {} step {} attempt {}", run.id, workflow.name,
                                    step.name, run.attempt + 1));
    if (!failure) return {StepResult::End::kLost};
  }

  log(failure->retryable ? spdlog::level::warn : spdlog::level::err,
      failure->error_code + ": " + failure->error_message);
  try {
    // A failure record has nothing to fall back on when refused.
    return Settle(run, plan_for(*failure), nullptr);
  } catch (const std::exception& e) {
    log(spdlog::level::warn, std::string("recording the failure failed: ") + e.what());
    return {StepResult::End::kLost};
  }
}

}  // namespace cairn
