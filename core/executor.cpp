// See executor.hpp. A step runs on its own thread so that its timeout can be
// enforced: a step that overruns is abandoned (its thread finishes on its own
// and its results are discarded) and the attempt fails with code "timeout".
#include "executor.hpp"

#include <spdlog/spdlog.h>

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
    const std::string cursor = run.cursor.value_or(workflow->FirstStep());
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
    const StepDefinition* step = workflow->FindStep(cursor);
    if (!step) {
      // Cannot happen for a run pinned to its definition; fail it visibly.
      StepPlan plan;
      plan.checkpoint.run_id = run.id;
      plan.checkpoint.expected_version = run.version;
      plan.checkpoint.context = run.context;
      plan.checkpoint.cursor = cursor;
      plan.checkpoint.status = RunStatus::kFailed;
      plan.checkpoint.error = "the run's cursor names step \"" + cursor + "\", which workflow " +
                              workflow->name + " v" + std::to_string(workflow->version) +
                              " does not have";
      RunEvent failed;
      failed.run_id = run.id;
      failed.step = cursor;
      failed.kind = "failed";
      failed.value = Json{{"error", *plan.checkpoint.error}, {"code", "unknown_step"}};
      connection_->Autocommit(
          [&](store::Tx& tx) { store::SaveCheckpoint(tx, plan.checkpoint, {failed}); });
      return ExecutionEnd::kParked;
    }
    const auto step_started = std::chrono::steady_clock::now();
    StepResult result = RunStep(run, *workflow, *step);
    if (options_.metrics) {
      options_.metrics->StepEnded(workflow->name, step->name, result.outcome,
                                  std::chrono::steady_clock::now() - step_started, run.status);
    }
    if (result.end == StepResult::End::kLost) return ExecutionEnd::kLost;
    if (result.end == StepResult::End::kParked) return ExecutionEnd::kParked;
  }
}

Executor::StepResult Executor::RunStep(Run& run, const WorkflowDefinition& workflow,
                                       const StepDefinition& step) {
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

  std::optional<store::Resume> early;  // a signal found in the inbox, taken up by adopt
  // Applies a committed plan to the slot's copy of the run.
  auto adopt = [&](const StepPlan& plan, const CheckpointResult& committed) {
    resumed_.reset();  // its wait is RESUMED and its events are history now
    if (early) resume_ = std::move(early);
    run.version = committed.version;
    run.context = plan.checkpoint.context;
    run.cursor = plan.checkpoint.cursor;
    run.attempt = plan.checkpoint.attempt;
    run.status = committed.status;
    leases_.Update(run.id, run.version);
    StepResult result;
    result.outcome = StepOutcomeLabel(plan.events);
    result.end = run.status == RunStatus::kRunning ? StepResult::End::kContinue
                                                   : StepResult::End::kParked;
    return result;
  };
  // Writes the plan; a wait whose signal already arrived (the inbox) turns
  // the plan into "continue at once", resuming on this slot.
  auto commit = [&](store::Tx& tx, StepPlan& plan) {
    early.reset();
    if (plan.wait) {
      WaitRecord wait = store::SaveWait(tx, *plan.wait);
      if (wait.status == WaitStatus::kResuming) {
        plan.checkpoint.status = RunStatus::kRunning;
        early = store::Resume{wait.correlation_key, wait.event,
                              wait.payload.value_or(Json::object()), wait.claimant.value_or("")};
      }
    }
    std::vector<RunEvent> events;
    if (resumed_) {
      events = resumed_->events;
      store::CompleteWait(tx, resumed_->correlation_key, resumed_->claimant);
    }
    events.insert(events.end(), plan.events.begin(), plan.events.end());
    CheckpointResult committed = store::SaveCheckpoint(tx, plan.checkpoint, events);
    for (const auto& [key, payload] : plan.signals) store::Signal(tx, key, payload);
    return committed;
  };
  // A plan that is one statement commits without an explicit transaction.
  auto commit_alone = [&](StepPlan& plan) {
    if (plan.wait || resumed_ || !plan.signals.empty()) {
      return connection_->Transact([&](store::Tx& tx) { return commit(tx, plan); });
    }
    return connection_->Autocommit([&](store::Tx& tx) { return commit(tx, plan); });
  };
  auto plan_for = [&](const StepOutcome& outcome) {
    return PlanStep(run, workflow, step, outcome, JitterSample(), options_.lease);
  };

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
        StepPlan plan = plan_for(*outcome);
        return adopt(plan, commit_alone(plan));
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
        return commit(tx, plan);
      });
      return adopt(plan, committed);
    }
  } catch (const RollBackStep& rollback) {
    failure = rollback.failure;
  } catch (const OccConflictError& e) {
    log(spdlog::level::warn, std::string("lost the run: ") + e.what());
    return {StepResult::End::kLost};
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kPermanent || e.kind() == ErrorKind::kConflict) {
      failure = FailureOutcome("checkpoint", e.what(), false);
    } else {
      // Transient or in doubt: whether the commit landed is unknown. Never
      // repeat it blindly; the lease expires and the run is recovered from
      // whatever the database holds.
      log(spdlog::level::warn, std::string("checkpoint not confirmed: ") + e.what());
      return {StepResult::End::kLost};
    }
  }

  log(failure->retryable ? spdlog::level::warn : spdlog::level::err,
      failure->error_code + ": " + failure->error_message);
  try {
    StepPlan plan = plan_for(*failure);
    return adopt(plan, commit_alone(plan));
  } catch (const std::exception& e) {
    log(spdlog::level::warn, std::string("recording the failure failed: ") + e.what());
    return {StepResult::End::kLost};
  }
}

}  // namespace cairn
