// See step_plan.hpp.
#include "step_plan.hpp"

#include <algorithm>
#include <cmath>

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

std::chrono::milliseconds Jittered(std::chrono::milliseconds base, double jitter,
                                   double sample) {
  // Spread uniformly over [base * (1 - jitter), base * (1 + jitter)).
  double factor = 1.0 + jitter * (2.0 * sample - 1.0);
  return std::chrono::milliseconds(
      static_cast<int64_t>(std::llround(static_cast<double>(base.count()) * factor)));
}

}  // namespace

StepOutcome FailureOutcome(std::string code, std::string message, bool retryable) {
  StepOutcome outcome;
  outcome.kind = OutcomeKind::kFail;
  outcome.retryable = retryable;
  outcome.error_code = std::move(code);
  outcome.error_message = std::move(message);
  return outcome;
}

Json MergeContext(const Json& context, const Json& updates, const Run& run,
                  const std::string& step, int attempt, std::vector<RunEvent>& events) {
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

StepPlan PlanStep(const Run& run, const WorkflowDefinition& workflow, const StepDefinition& step,
                  const StepOutcome& given, double jitter_sample,
                  std::chrono::milliseconds lease) {
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
  if (outcome.kind == OutcomeKind::kWait && (outcome.wait_key.empty() || !next_step)) {
    outcome = FailureOutcome("invalid_wait",
                             outcome.wait_key.empty()
                                 ? "step " + step.name + " waited without a correlation key"
                                 : "step " + step.name +
                                       " waited but is the last step: there is no step to "
                                       "continue at",
                             false);
  }

  StepPlan plan;
  Checkpoint& cp = plan.checkpoint;
  cp.run_id = run.id;
  cp.expected_version = run.version;
  cp.lease_ms = lease.count();
  cp.context = run.context;
  cp.cursor = step.name;
  cp.attempt = 0;  // attempts used by the step at the cursor; a new step starts afresh

  if (outcome.kind == OutcomeKind::kFail) {
    // A failed step's context changes are discarded with its attempt.
    bool retry = outcome.retryable && step.retry.IsRetryable(outcome.error_code) &&
                 attempt < step.retry.max_attempts;
    Json detail = {{"error", outcome.error_message}, {"code", outcome.error_code}};
    cp.error = outcome.error_message;
    if (retry) {
      auto delay = Jittered(step.retry.BackoffBefore(attempt + 1), step.retry.jitter,
                            jitter_sample);
      cp.status = RunStatus::kReady;
      cp.attempt = attempt;
      cp.delay_ms = delay.count();
      detail["retry_in_ms"] = delay.count();
      plan.events.push_back(Lifecycle(run, step.name, attempt, "retried", detail));
    } else {
      cp.status = RunStatus::kFailed;
      cp.attempt = attempt;
      plan.events.push_back(Lifecycle(run, step.name, attempt, "failed", detail));
    }
    return plan;
  }

  cp.context = MergeContext(run.context, outcome.context_updates, run, step.name, attempt,
                            plan.events);
  plan.events.push_back(Lifecycle(run, step.name, attempt, "step_committed"));
  plan.signals = outcome.signals;
  for (const auto& [key, payload] : outcome.signals) {
    plan.events.push_back(Lifecycle(run, step.name, attempt, "signal_sent", Json{{"key", key}}));
  }

  auto complete = [&](Json output) {
    cp.status = RunStatus::kCompleted;
    cp.output = output;
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
      plan.events.push_back(Lifecycle(run, step.name, attempt, "jumped", Json{{"to", outcome.jump_to}}));
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
      wait.correlation_key = outcome.wait_key;
      wait.run_id = run.id;
      wait.event = outcome.wait_event.empty() ? outcome.wait_key : outcome.wait_event;
      wait.continuation_step = *next_step;
      wait.timeout_step = step.on_wait_timeout;
      wait.timeout_ms = outcome.wait_timeout_ms;
      plan.wait = wait;
      plan.events.push_back(Lifecycle(run, step.name, attempt, "waiting",
                                      Json{{"event", wait.event}, {"key", wait.correlation_key}}));
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

}  // namespace cairn
