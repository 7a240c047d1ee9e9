// See executor.hpp. A step's code runs through the slot's StepRunner
// (step_invocation.hpp); what its commit writes comes from step_plan.
#include "executor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>
#include <variant>

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

// What a commit wrote: the checkpoint, and the signal that was already in the
// inbox for the wait it created (the run then continues at once with it).
struct Executor::CommittedPlan {
  CheckpointResult checkpoint;
  std::optional<Resume> inbox_resume;
  std::vector<store::SignalOutcome> signals;  // of the signals the step sent
};

struct Executor::StepResult {
  enum class End { kContinue, kParked, kLost } end = End::kParked;
  std::string_view outcome = kStepLost;  // the cairn_steps_total outcome label
  std::optional<Resume> resume;          // for kContinue: the next step resumes with it
};

Executor::CommittedPlan Executor::Commit(store::Tx& tx, StepPlan& plan) {
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
  committed.checkpoint = store::SaveCheckpoint(tx, plan.checkpoint, plan.events);
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

store::StackLockedRun Executor::LockStackAndLoad(const std::string& run_id) {
  try {
    return store::LockStackAndLoadRun(*connection_, run_id);
  } catch (const Error& e) {
    if (!e.transient()) throw;
    // The slot's session died while it was idle (a terminated backend, a
    // server restart) and nobody noticed until now: nothing of this run has
    // happened yet, so a fresh session takes it on at once instead of
    // leaving it to its lease.
    spdlog::info("run {}: the slot's connection was lost while idle ({}); reconnecting", run_id,
                 e.what());
    connection_ = std::make_unique<store::Connection>(connection_options_);
    return store::LockStackAndLoadRun(*connection_, run_id);
  }
}

ExecutionEnd Executor::Execute(const store::ClaimedRun& claim, const std::atomic<bool>& stopping) {
  const Run& claimed = claim.run;
  try {
    store::StackLockedRun fresh = LockStackAndLoad(claimed.id);
    if (!fresh.locked) {
      // A zombie still executes this run on another session; let it finish
      // or die, then try again.
      spdlog::info("run {}: stack lock held by another session, handing the run back", claimed.id);
      if (options_.metrics) options_.metrics->StackLockContended();
      Release(claimed, options_.stack_busy_delay);
      return ExecutionEnd::kHandedBack;
    }
    struct Unlock {
      store::Connection& connection;
      const std::string& run_id;
      ~Unlock() {
        try {
          connection.UnlockStack(run_id);
        } catch (const std::exception& e) {
          spdlog::warn("run {}: releasing the stack lock failed: {}", run_id, e.what());
        }
      }
    } unlock{*connection_, claimed.id};

    // The claim's snapshot may be stale: the run may have moved on between
    // the claim and the lock.
    if (!fresh.run || fresh.run->run.status != RunStatus::kRunning ||
        fresh.run->run.lease_owner != options_.worker_id ||
        fresh.run->run.version != claimed.version) {
      spdlog::info("run {}: changed after the claim, leaving it", claimed.id);
      return ExecutionEnd::kLost;
    }
    leases_.Hold(fresh.run->run.id, fresh.run->run.version);
    struct Drop {
      LeaseBook& leases;
      const std::string& run_id;
      ~Drop() { leases.Drop(run_id); }
    } drop{leases_, claimed.id};
    return ExecuteLocked(fresh.run->run, std::move(fresh.run->resume), fresh.run->past_deadline,
                         claim.step_tokens, stopping);
  } catch (const std::exception& e) {
    spdlog::error("run {}: {}", claimed.id, e.what());
    return ExecutionEnd::kLost;
  }
}

ExecutionEnd Executor::ExecuteLocked(Run& run, std::optional<Resume> resume, bool past_deadline,
                                     bool step_tokens, const std::atomic<bool>& stopping) {
  const WorkflowDefinition* workflow = definitions_.FindByHash(run.definition_hash);
  if (!workflow) {
    // Claims filter on served definitions, so this is a bug, not a state.
    spdlog::error("run {}: definition {} is not loaded here", run.id, run.definition_hash);
    Release(run, options_.stack_busy_delay);
    return ExecutionEnd::kHandedBack;
  }
  bool first_step = true;  // its token, if any, was spent by the claim
  while (true) {
    if (stopping.load()) {
      return Release(run, std::chrono::milliseconds(0)) ? ExecutionEnd::kHandedBack
                                                        : ExecutionEnd::kLost;
    }
    if (leases_.Lost(run.id)) return ExecutionEnd::kLost;
    if (step_tokens && !first_step) {
      const std::chrono::milliseconds no_token_for = connection_->Autocommit(
          [&](store::Tx& tx) { return store::TakeStepToken(tx, run.queue); });
      if (no_token_for.count() > 0) {
        if (options_.metrics) options_.metrics->RateLimited(run.queue);
        return Release(run, no_token_for) ? ExecutionEnd::kHandedBack : ExecutionEnd::kLost;
      }
    }
    first_step = false;
    const auto step_started = std::chrono::steady_clock::now();
    std::string step_name;
    // An unwinding run's waits were cancelled or expired: it resumes from none.
    // Past the claim, the deadline is the checkpoint's to enforce: one that
    // commits after it ends the run (save_checkpoint).
    StepResult result = run.final_status
                            ? RunCompensation(run, *workflow, step_name)
                            : RunForwardStep(run, *workflow, resume, past_deadline, step_name);
    past_deadline = false;
    resume = std::move(result.resume);
    if (options_.metrics) {
      options_.metrics->StepEnded(workflow->name, step_name, result.outcome,
                                  std::chrono::steady_clock::now() - step_started, run.status);
    }
    if (result.end == StepResult::End::kLost) return ExecutionEnd::kLost;
    if (result.end == StepResult::End::kParked) return ExecutionEnd::kParked;
  }
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
  return RunStep(run, workflow, *step, [&](const StepOutcome& outcome) {
    return with_resume(PlanStep(run, workflow, *step, outcome, JitterSample(), options_.lease));
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
      [&](const StepOutcome& outcome) {
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
  // A plan that is one statement commits without an explicit transaction.
  const bool one_statement =
      !plan.wait && !plan.resumed && plan.signals.empty() && plan.children.empty();
  auto commit = [&](store::Tx& tx) { return Commit(tx, plan); };
  CommittedPlan committed =
      one_statement ? connection_->Autocommit(commit) : connection_->Transact(commit);
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
        return CommitAlone(run, plan_for(*outcome));
      }
    } else {
      // The step's own writes and its checkpoint commit together; a step that
      // did not succeed rolls its writes back and records the failure apart.
      StepPlan plan;
      auto ended =
          connection_->Transact([&](store::Tx& tx) -> std::variant<CommittedPlan, StepOutcome> {
            store::SetStatementTimeout(tx, step.timeout);
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
  } catch (const OccConflictError& e) {
    if (options_.metrics) options_.metrics->OccConflict();
    log(spdlog::level::warn, std::string("lost the run: ") + e.what());
    return {StepResult::End::kLost};
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kTransient || e.kind() == ErrorKind::kInDoubt) {
      // Whether the commit landed is unknown. Never repeat it blindly; the
      // lease expires and the run is recovered from whatever the database
      // holds.
      log(spdlog::level::warn, std::string("checkpoint not confirmed: ") + e.what());
      return {StepResult::End::kLost};
    }
    // The commit was refused (an unknown child workflow, invalid input, a
    // constraint): nothing of it landed, and trying again cannot help.
    failure = FailureOutcome("checkpoint", e.what(), false);
  }

  log(failure->retryable ? spdlog::level::warn : spdlog::level::err,
      failure->error_code + ": " + failure->error_message);
  try {
    return CommitAlone(run, plan_for(*failure));
  } catch (const std::exception& e) {
    log(spdlog::level::warn, std::string("recording the failure failed: ") + e.what());
    return {StepResult::End::kLost};
  }
}

}  // namespace cairn
