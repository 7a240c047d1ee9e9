// See step_plan.hpp.
#include "step_plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace cairn {

namespace {

RunEvent Lifecycle(const Run& run, const std::string& step, int attempt, std::string kind,
                   std::optional<Json> value = std::nullopt) {
  RunEvent event;
  event.run_id = run.id;
  event.step = step;
  event.attempt = attempt;
  event.kind = std::move(kind);
  event.value = std::move(value);
  return event;
}

std::chrono::milliseconds Jittered(std::chrono::milliseconds base, double jitter, double sample) {
  // Spread uniformly over [base * (1 - jitter), base * (1 + jitter)).
  double factor = 1.0 + jitter * (2.0 * sample - 1.0);
  return std::chrono::milliseconds(
      static_cast<int64_t>(std::llround(static_cast<double>(base.count()) * factor)));
}

}  // namespace

Json MergeContext(const Json& context, const Json& updates, const Run& run, const std::string& step,
                  int attempt, std::vector<RunEvent>& events) {
  Json merged = context.is_object() ? context : Json::object();
  if (!updates.is_object()) return merged;
  for (const auto& [field, value] : updates.items()) {
    auto existing = merged.find(field);
    bool present = existing != merged.end();
    if (value.is_null()) {
      if (!present) continue;
      merged.erase(field);
    } else {
      if (present && *existing == value) continue;
      merged[field] = value;
    }
    RunEvent event = Lifecycle(run, step, attempt, "context", value);
    event.field = field;
    events.push_back(std::move(event));
  }
  return merged;
}

namespace {

// The checkpoint a step of `run` starts from: nothing changes unless the
// plan says so.
Checkpoint BaseCheckpoint(const Run& run, const std::string& cursor,
                          std::chrono::milliseconds lease) {
  Checkpoint cp;
  cp.run_id = run.id;
  cp.expected_version = run.version;
  cp.lease_ms = lease.count();
  cp.context = run.context;
  cp.cursor = cursor;
  cp.attempt = 0;  // attempts used by the step at the cursor; a new step starts afresh
  cp.compensations = run.compensations;
  cp.final_status = run.final_status;
  return cp;
}

Json FailureDetail(const StepOutcome& failure) {
  return {{"error", failure.error_message}, {"code", failure.error_code}};
}

// The failure is retried when the policy allows: the run is due again after
// the jittered backoff, in `due_status`. Returns false when it is not.
bool PlanRetry(StepPlan& plan, const Run& run, const std::string& step, const RetryPolicy& retry,
               const StepOutcome& failure, int attempt, double jitter_sample, Json detail,
               RunStatus due_status) {
  if (!failure.retryable || !retry.IsRetryable(failure.error_code) ||
      attempt >= retry.max_attempts) {
    return false;
  }
  auto delay = Jittered(retry.BackoffBefore(attempt + 1), retry.jitter, jitter_sample);
  plan.checkpoint.status = due_status;
  plan.checkpoint.attempt = attempt;
  plan.checkpoint.delay_ms = delay.count();
  plan.checkpoint.error = failure.error_message;
  detail["retry_in_ms"] = delay.count();
  plan.events.push_back(Lifecycle(run, step, attempt, "retried", std::move(detail)));
  return true;
}

}  // namespace

Resumption TakeUpResume(Run& run, const Resume& resume, const std::string& step) {
  Resumption resumption;
  resumption.wait = {resume.correlation_key, resume.claimant};
  const int attempt = run.attempt + 1;
  resumption.events.push_back(
      Lifecycle(run, step, attempt, "resumed",
                Json{{"event", resume.event}, {"key", resume.correlation_key}}));
  run.context = MergeContext(run.context, Json{{resume.event, resume.payload}}, run, step, attempt,
                             resumption.events);
  return resumption;
}

void AttachResume(StepPlan& plan, const Resumption& resumption) {
  plan.resumed = resumption.wait;
  plan.events.insert(plan.events.begin(), resumption.events.begin(), resumption.events.end());
}

std::string ChildWaitKey(const Run& run) {
  return "children:" + run.id + ":" + std::to_string(run.version);
}

StepPlan PlanRunFailure(const Run& run, const std::string& step, int attempt,
                        const StepOutcome& failure, std::chrono::milliseconds lease) {
  StepPlan plan;
  Checkpoint& cp = plan.checkpoint;
  cp = BaseCheckpoint(run, step, lease);
  cp.error = failure.error_message;
  cp.attempt = attempt;  // a failed run shows the attempts it used
  plan.events.push_back(Lifecycle(run, step, attempt, "failed", FailureDetail(failure)));
  if (!run.compensations.empty()) {
    // Unwind on this slot at once; attempts now count the compensation's.
    cp.status = RunStatus::kRunning;
    cp.final_status = RunStatus::kFailed;
    cp.attempt = 0;
    plan.events.push_back(Lifecycle(run, step, attempt, "compensating",
                                    Json{{"compensations", run.compensations.size()}}));
  } else {
    cp.status = RunStatus::kFailed;
  }
  return plan;
}

StepPlan PlanStep(const Run& run, const WorkflowDefinition& workflow, const StepDefinition& step,
                  const StepOutcome& given, double jitter_sample, std::chrono::milliseconds lease) {
  const int attempt = run.attempt + 1;  // this attempt's number, 1-based
  StepOutcome outcome = given;
  std::optional<std::string> next_step = workflow.NextStep(step.name);

  // Outcomes that cannot be honoured become failures the history explains.
  if (outcome.kind == OutcomeKind::kJump && !workflow.FindStep(outcome.jump_to)) {
    outcome = FailureOutcome("unknown_step",
                             "step " + step.name + " jumped to \"" + outcome.jump_to +
                                 "\", which workflow " + workflow.name + " v" +
                                 std::to_string(workflow.version) + " does not have",
                             false);
  }
  if (outcome.kind == OutcomeKind::kWait) {
    std::optional<std::string> problem;
    if (outcome.wait_children && outcome.children.empty()) {
      problem = "step " + step.name + " waited for child runs but started none";
    } else if (!outcome.wait_children && outcome.wait_key.empty()) {
      problem = "step " + step.name + " waited without a correlation key";
    } else if (!next_step) {
      problem = "step " + step.name + " waited but is the last step: there is no step to " +
                "continue at";
    }
    if (problem) outcome = FailureOutcome("invalid_wait", *problem, false);
  }

  if (outcome.kind == OutcomeKind::kFail) {
    // A failed step's context changes are discarded with its attempt.
    StepPlan plan;
    plan.checkpoint = BaseCheckpoint(run, step.name, lease);
    if (!PlanRetry(plan, run, step.name, step.retry, outcome, attempt, jitter_sample,
                   FailureDetail(outcome), RunStatus::kReady)) {
      plan = PlanRunFailure(run, step.name, attempt, outcome, lease);
    }
    if (given.kind != OutcomeKind::kFail) plan.refused = outcome;
    return plan;
  }

  StepPlan plan;
  Checkpoint& cp = plan.checkpoint;
  cp = BaseCheckpoint(run, step.name, lease);
  cp.context =
      MergeContext(run.context, outcome.context_updates, run, step.name, attempt, plan.events);
  if (step.compensate) cp.compensations.push_back(step.name);
  const auto commit_event = static_cast<std::ptrdiff_t>(plan.events.size());
  plan.events.push_back(Lifecycle(run, step.name, attempt, "step_committed"));
  plan.signals = outcome.signals;
  for (const auto& [key, payload] : outcome.signals) {
    plan.events.push_back(Lifecycle(run, step.name, attempt, "signal_sent", Json{{"key", key}}));
  }
  plan.children = outcome.children;
  for (const ChildStart& child : outcome.children) {
    // The commit adds the id the child gets. What the child asked for is
    // named only when it asked for something, as a list of its options.
    Json detail = {{"workflow", child.workflow}};
    Json cancel_when = CancelWhen(child.options);
    if (!cancel_when.empty()) detail["cancel_when"] = std::move(cancel_when);
    plan.events.push_back(Lifecycle(run, step.name, attempt, "child_started", std::move(detail)));
  }

  // A commit that ends the run is recorded by its `completed` event alone,
  // after what the step sent and started: one history row a run less, on
  // the hot path (docs/cost-model.md).
  auto complete = [&](Json output) {
    cp.status = RunStatus::kCompleted;
    cp.output = output;
    plan.events.erase(plan.events.begin() + commit_event);
    plan.events.push_back(Lifecycle(run, step.name, attempt, "completed", output));
  };

  switch (outcome.kind) {
    case OutcomeKind::kNext:
      if (next_step) {
        cp.status = RunStatus::kRunning;
        cp.cursor = *next_step;
      } else {
        complete(cp.context);
      }
      break;
    case OutcomeKind::kJump:
      cp.status = RunStatus::kRunning;
      cp.cursor = outcome.jump_to;
      plan.events.push_back(
          Lifecycle(run, step.name, attempt, "jumped", Json{{"to", outcome.jump_to}}));
      break;
    case OutcomeKind::kSleep:
      if (!next_step) {
        complete(cp.context);
        break;
      }
      cp.status = RunStatus::kReady;
      cp.cursor = *next_step;
      if (outcome.sleep_until) {
        cp.run_at = outcome.sleep_until;
      } else {
        cp.delay_ms = std::max<int64_t>(0, outcome.sleep_ms.value_or(0));
      }
      plan.events.push_back(Lifecycle(
          run, step.name, attempt, "sleeping",
          outcome.sleep_until ? Json{{"until", *outcome.sleep_until}} : Json{{"ms", cp.delay_ms}}));
      break;
    case OutcomeKind::kWait: {
      cp.status = RunStatus::kWaiting;
      cp.cursor = *next_step;
      NewWait wait;
      wait.correlation_key = outcome.wait_children ? ChildWaitKey(run) : outcome.wait_key;
      wait.run_id = run.id;
      wait.event = !outcome.wait_event.empty() ? outcome.wait_event
                   : outcome.wait_children     ? "children"
                                               : outcome.wait_key;
      wait.continuation_step = *next_step;
      wait.timeout_step = step.on_wait_timeout;
      wait.timeout_ms = outcome.wait_timeout_ms;
      wait.children = outcome.wait_children;
      plan.wait = wait;
      Json detail = {{"event", wait.event}, {"key", wait.correlation_key}};
      if (wait.children) detail["children"] = ToString(*wait.children);
      plan.events.push_back(Lifecycle(run, step.name, attempt, "waiting", std::move(detail)));
      break;
    }
    case OutcomeKind::kComplete:
      complete(outcome.output);
      break;
    case OutcomeKind::kFail:
      break;  // handled above
  }
  return plan;
}

StepPlan PlanCompensation(const Run& run, const StepDefinition& compensated,
                          const StepOutcome& given, double jitter_sample,
                          std::chrono::milliseconds lease) {
  const int attempt = run.attempt + 1;
  const std::string name = compensated.compensate.value_or("");
  StepOutcome outcome = given;
  if (outcome.kind != OutcomeKind::kFail &&
      ((outcome.kind != OutcomeKind::kNext && outcome.kind != OutcomeKind::kComplete) ||
       !outcome.children.empty())) {
    outcome = FailureOutcome("invalid_compensation",
                             "compensation " + name + " of step " + compensated.name +
                                 " may only finish or fail: it cannot wait, sleep, jump or "
                                 "start child runs",
                             false);
  }

  StepPlan plan;
  Checkpoint& cp = plan.checkpoint;
  cp = BaseCheckpoint(run, run.cursor.value_or(compensated.name), lease);
  if (given.kind != OutcomeKind::kFail && outcome.kind == OutcomeKind::kFail) {
    plan.refused = outcome;
  }
  if (outcome.kind == OutcomeKind::kFail) {
    Json detail = FailureDetail(outcome);
    detail["for"] = compensated.name;
    if (PlanRetry(plan, run, name, compensated.retry, outcome, attempt, jitter_sample, detail,
                  RunStatus::kCompensating)) {
      cp.error = run.error;  // the run's error stays the reason it unwinds
      return plan;
    }
    cp.status = RunStatus::kCompensationFailed;
    cp.attempt = attempt;
    cp.error = outcome.error_message;
    plan.events.push_back(Lifecycle(run, name, attempt, "compensation_failed", detail));
    return plan;
  }

  cp.context = MergeContext(run.context, outcome.context_updates, run, name, attempt, plan.events);
  cp.compensations.erase(cp.compensations.size() - 1);
  plan.events.push_back(
      Lifecycle(run, name, attempt, "compensated", Json{{"for", compensated.name}}));
  plan.signals = outcome.signals;
  for (const auto& [key, payload] : outcome.signals) {
    plan.events.push_back(Lifecycle(run, name, attempt, "signal_sent", Json{{"key", key}}));
  }
  if (cp.compensations.empty()) {
    cp.status = run.final_status.value_or(RunStatus::kFailed);
    cp.error = run.error;
    plan.events.push_back(
        Lifecycle(run, name, attempt, "compensations_done", Json{{"status", ToString(cp.status)}}));
  } else {
    cp.status = RunStatus::kRunning;
    cp.error = run.error;
  }
  return plan;
}

}  // namespace cairn
