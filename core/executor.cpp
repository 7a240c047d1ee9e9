// See executor.hpp. A step runs on its own thread so that its timeout can be
// enforced: a step that overruns is abandoned (its thread finishes on its own
// and its results are discarded) and the attempt fails with code "timeout".
#include "executor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "metrics.hpp"
#include "step_plan.hpp"

namespace cairn {

namespace {

// The step's SQL gateway into the checkpoint transaction. Closed when the
// slot stops waiting for the step, so an abandoned step can no longer touch
// a transaction that is being rolled back.
class TransactionStepSql : public StepSql {
 public:
  explicit TransactionStepSql(store::Tx& tx) : tx_(&tx) {}

  Json Execute(const std::string& sql, const Json& params) override {
    std::lock_guard lock(mutex_);
    if (closed_) {
      throw InvalidArgumentError("the step's transaction is over (the step timed out)");
    }
    try {
      return store::ExecuteStepSql(*tx_, sql, params);
    } catch (const Error& e) {
      // A refused statement never reached the server; anything else aborted
      // the transaction, so the step cannot commit.
      if (e.kind() != ErrorKind::kInvalidArgument) failure_ = e.what();
      throw;
    }
  }

  // Returns the SQL failure, if any, once no statement can run any more.
  std::optional<std::string> Close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    return failure_;
  }

 private:
  std::mutex mutex_;
  store::Tx* tx_;
  bool closed_ = false;
  std::optional<std::string> failure_;
};

// Shared by the slot and the step thread, which may outlive the slot's
// interest when the step overruns its timeout.
struct Invocation {
  std::shared_ptr<Step> step;
  Json input;
  Json context;
  StepCall call;
  std::shared_ptr<TransactionStepSql> sql;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  StepOutcome outcome;
};

std::optional<StepOutcome> InvokeWithTimeout(const std::shared_ptr<Invocation>& invocation,
                                             std::chrono::milliseconds timeout) {
  invocation->call.input = &invocation->input;
  invocation->call.context = &invocation->context;
  invocation->call.sql = invocation->sql.get();
  std::thread([invocation] {
    StepOutcome outcome;
    try {
      outcome = invocation->step->Invoke(invocation->call);
    } catch (const std::exception& e) {
      outcome = FailureOutcome("exception", e.what(), true);
    } catch (...) {
      outcome = FailureOutcome("exception", "the step threw a non-standard exception", true);
    }
    std::lock_guard lock(invocation->mutex);
    invocation->outcome = std::move(outcome);
    invocation->done = true;
    invocation->finished.notify_all();
  }).detach();
  std::unique_lock lock(invocation->mutex);
  if (!invocation->finished.wait_for(lock, timeout, [&] { return invocation->done; })) {
    return std::nullopt;
  }
  return invocation->outcome;
}

double JitterSample() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
}

StepOutcome TimeoutOutcome(const StepDefinition& step) {
  return FailureOutcome("timeout",
                        "step " + step.name + " exceeded its timeout of " +
                            FormatDuration(step.timeout),
                        true);
}

// Thrown inside the checkpoint transaction to roll back a transactional
// step's writes when the step did not succeed.
struct RollBackStep {
  StepOutcome failure;
};

}  // namespace

struct Executor::StepResult {
  enum class End { kContinue, kParked, kLost } end = End::kParked;
  std::string_view outcome = kStepLost;  // the cairn_steps_total outcome label
};

Executor::Executor(store::ConnectionOptions connection_options, const DefinitionSet& definitions,
                   const PluginRegistry& plugins, ExecutorOptions options, LeaseBook& leases)
    : connection_(std::make_unique<store::Connection>(std::move(connection_options))),
      definitions_(definitions),
      plugins_(plugins),
      options_(std::move(options)),
      leases_(leases) {}

Executor::~Executor() = default;

bool Executor::Healthy() const { return connection_->IsOpen(); }

bool Executor::Release(const Run& run, std::chrono::milliseconds delay) {
  return connection_->Transact([&](store::Tx& tx) {
    return store::ReleaseRun(tx, run.id, run.version, options_.worker_id, delay);
  });
}

ExecutionEnd Executor::Execute(Run claimed, const std::atomic<bool>& stopping) {
  try {
    if (!connection_->TryLockStack(claimed.id)) {
      // A zombie still executes this run on another session; let it finish
      // or die, then try again.
      spdlog::info("run {}: stack lock held by another session, handing the run back",
                   claimed.id);
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
    auto fresh = connection_->Autocommit(
        [&](store::Tx& tx) { return store::LoadRunForExecution(tx, claimed.id); });
    if (!fresh || fresh->run.status != RunStatus::kRunning ||
        fresh->run.lease_owner != options_.worker_id || fresh->run.version != claimed.version) {
      spdlog::info("run {}: changed after the claim, leaving it", claimed.id);
      return ExecutionEnd::kLost;
    }
    leases_.Hold(fresh->run.id, fresh->run.version);
    struct Drop {
      LeaseBook& leases;
      const std::string& run_id;
      ~Drop() { leases.Drop(run_id); }
    } drop{leases_, claimed.id};
    resume_ = std::move(fresh->resume);
    resumed_ = std::nullopt;
    return ExecuteLocked(fresh->run, stopping);
  } catch (const std::exception& e) {
    spdlog::error("run {}: {}", claimed.id, e.what());
    return ExecutionEnd::kLost;
  }
}

ExecutionEnd Executor::ExecuteLocked(Run& run, const std::atomic<bool>& stopping) {
  const WorkflowDefinition* workflow = definitions_.FindByHash(run.definition_hash);
  if (!workflow) {
    // Claims filter on served definitions, so this is a bug, not a state.
    spdlog::error("run {}: definition {} is not loaded here", run.id, run.definition_hash);
    Release(run, options_.stack_busy_delay);
    return ExecutionEnd::kHandedBack;
  }
  while (true) {
    if (stopping.load()) {
      return Release(run, std::chrono::milliseconds(0)) ? ExecutionEnd::kHandedBack
                                                         : ExecutionEnd::kLost;
    }
    if (leases_.Lost(run.id)) return ExecutionEnd::kLost;
    StepResult result;
    const auto step_started = std::chrono::steady_clock::now();
    std::string step_name;
    if (run.final_status) {
      resume_.reset();  // an unwinding run's waits were cancelled or expired
      result = RunCompensation(run, *workflow, step_name);
    } else {
      result = RunForwardStep(run, *workflow, step_name);
    }
    if (options_.metrics) {
      options_.metrics->StepEnded(workflow->name, step_name, result.outcome,
                                  std::chrono::steady_clock::now() - step_started, run.status);
    }
    if (result.end == StepResult::End::kLost) return ExecutionEnd::kLost;
    if (result.end == StepResult::End::kParked) return ExecutionEnd::kParked;
  }
}

Executor::StepResult Executor::RunForwardStep(Run& run, const WorkflowDefinition& workflow,
                                              std::string& step_name) {
  const std::string cursor = run.cursor.value_or(workflow.FirstStep());
  step_name = cursor;
  if (resume_) {
    // The signal's payload joins the context under the event's name; it
    // commits with the first step that runs after the wait.
    Resumed resumed;
    resumed.correlation_key = resume_->correlation_key;
    resumed.claimant = resume_->claimant;
    run.context = MergeContext(run.context, Json{{resume_->event, resume_->payload}}, run,
                               cursor, run.attempt + 1, resumed.events);
    RunEvent event;
    event.run_id = run.id;
    event.step = cursor;
    event.attempt = run.attempt + 1;
    event.kind = "resumed";
    event.value = Json{{"event", resume_->event}, {"key", resume_->correlation_key}};
    resumed.events.insert(resumed.events.begin(), std::move(event));
    resumed_ = std::move(resumed);
    resume_.reset();
  }
  const StepDefinition* step = workflow.FindStep(cursor);
  if (!step) {
    // Cannot happen for a run pinned to its definition; fail it visibly.
    return CommitAlone(run, PlanRunFailure(
                                run, cursor, run.attempt + 1,
                                FailureOutcome("unknown_step",
                                               "the run's cursor names step \"" + cursor +
                                                   "\", which workflow " + workflow.name + " v" +
                                                   std::to_string(workflow.version) +
                                                   " does not have",
                                               false),
                                options_.lease));
  }
  return RunStep(run, workflow, *step, [&](const StepOutcome& outcome) {
    return PlanStep(run, workflow, *step, outcome, JitterSample(), options_.lease);
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
        run, PlanCompensation(run, unknown,
                              FailureOutcome("unknown_step",
                                             "the run's compensation stack names step \"" + top +
                                                 "\", which has no compensation in workflow " +
                                                 workflow.name + " v" +
                                                 std::to_string(workflow.version),
                                             false),
                              JitterSample(), options_.lease));
  }
  const StepDefinition compensation = compensated->Compensation();
  step_name = compensation.name;
  return RunStep(run, workflow, compensation, [&](const StepOutcome& outcome) {
    return PlanCompensation(run, *compensated, outcome, JitterSample(), options_.lease);
  });
}

CheckpointResult Executor::Commit(store::Tx& tx, StepPlan& plan) {
  early_.reset();
  if (plan.wait) {
    // A wait whose signal already arrived (the inbox) turns the plan into
    // "continue at once", resuming on this slot.
    WaitRecord wait = store::SaveWait(tx, *plan.wait);
    if (wait.status == WaitStatus::kResuming) {
      plan.checkpoint.status = RunStatus::kRunning;
      early_ = store::Resume{wait.correlation_key, wait.event,
                             wait.payload.value_or(Json::object()), wait.claimant.value_or("")};
    }
  }
  std::vector<RunEvent> events;
  if (resumed_) {
    events = resumed_->events;
    store::CompleteWait(tx, resumed_->correlation_key, resumed_->claimant);
  }
  const std::size_t first_plan_event = events.size();
  events.insert(events.end(), plan.events.begin(), plan.events.end());
  const std::optional<std::string> report_to =
      plan.wait && plan.wait->children ? std::optional(plan.wait->correlation_key) : std::nullopt;
  auto started = events.begin() + static_cast<std::ptrdiff_t>(first_plan_event);
  for (const auto& [workflow, input] : plan.children) {
    started = std::find_if(started, events.end(),
                           [](const RunEvent& event) { return event.kind == "child_started"; });
    (*started->value)["id"] =
        store::StartChildRun(tx, plan.checkpoint.run_id, report_to, workflow, input);
    ++started;
  }
  CheckpointResult committed = store::SaveCheckpoint(tx, plan.checkpoint, events);
  for (const auto& [key, payload] : plan.signals) store::Signal(tx, key, payload);
  return committed;
}

Executor::StepResult Executor::Adopt(Run& run, const StepPlan& plan,
                                     const CheckpointResult& committed) {
  resumed_.reset();  // its wait is RESUMED and its events are history now
  if (early_) resume_ = std::move(early_);
  early_.reset();
  run.version = committed.version;
  run.context = plan.checkpoint.context;
  run.cursor = plan.checkpoint.cursor;
  run.attempt = plan.checkpoint.attempt;
  run.status = committed.status;
  run.error = plan.checkpoint.error;
  run.compensations = plan.checkpoint.compensations;
  run.final_status = plan.checkpoint.final_status;
  leases_.Update(run.id, run.version);
  StepResult result;
  result.outcome = StepOutcomeLabel(plan.events);
  result.end = run.status == RunStatus::kRunning ? StepResult::End::kContinue
                                                 : StepResult::End::kParked;
  return result;
}

Executor::StepResult Executor::CommitAlone(Run& run, StepPlan plan) {
  // A plan that is one statement commits without an explicit transaction.
  const bool one_statement =
      !plan.wait && !resumed_ && plan.signals.empty() && plan.children.empty();
  auto commit = [&](store::Tx& tx) { return Commit(tx, plan); };
  CheckpointResult committed =
      one_statement ? connection_->Autocommit(commit) : connection_->Transact(commit);
  return Adopt(run, plan, committed);
}

Executor::StepResult Executor::RunStep(Run& run, const WorkflowDefinition& workflow,
                                       const StepDefinition& step, const Planner& plan_for) {
  auto log = [&](spdlog::level::level_enum level, const std::string& message) {
    spdlog::log(level, "run {} workflow {} step {} attempt {}: {}", run.id, workflow.name,
                step.name, run.attempt + 1, message);
  };
  auto plugin_step = plugins_.Find(step.run);
  auto invocation = std::make_shared<Invocation>();
  invocation->step = plugin_step;
  invocation->input = run.input;
  invocation->context = run.context;
  invocation->call.run_id = run.id;
  invocation->call.workflow = workflow.name;
  invocation->call.step = step.name;
  invocation->call.attempt = run.attempt + 1;

  std::optional<StepOutcome> failure;  // to commit in a transaction of its own
  try {
    if (!plugin_step) {
      failure = FailureOutcome("unknown_step",
                               "plugin step \"" + step.run + "\" is not loaded", false);
    } else if (!step.transactional) {
      auto outcome = InvokeWithTimeout(invocation, step.timeout);
      if (!outcome) outcome = TimeoutOutcome(step);
      if (outcome->kind == OutcomeKind::kFail) {
        failure = *outcome;
      } else {
        return CommitAlone(run, plan_for(*outcome));
      }
    } else {
      StepPlan plan;
      auto committed = connection_->Transact([&](store::Tx& tx) {
        store::SetStatementTimeout(tx, step.timeout);
        invocation->sql = std::make_shared<TransactionStepSql>(tx);
        auto outcome = InvokeWithTimeout(invocation, step.timeout);
        auto sql_failure = invocation->sql->Close();
        if (!outcome) throw RollBackStep{TimeoutOutcome(step)};
        if (sql_failure) throw RollBackStep{FailureOutcome("sql", *sql_failure, true)};
        if (outcome->kind == OutcomeKind::kFail) throw RollBackStep{*outcome};
        plan = plan_for(*outcome);
        if (plan.refused) throw RollBackStep{*plan.refused};
        return Commit(tx, plan);
      });
      return Adopt(run, plan, committed);
    }
  } catch (const RollBackStep& rollback) {
    failure = rollback.failure;
  } catch (const OccConflictError& e) {
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
