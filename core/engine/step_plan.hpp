// Turns a step's outcome into what its transaction commits: the checkpoint,
// the audit events and any wait record. Pure logic, no database: the retry
// policy, context merging and history rules live here and are unit-tested.
#pragma once

#include <optional>
#include <vector>

#include "definition.hpp"
#include "model.hpp"
#include "step.hpp"

namespace cairn {

// The wait a run resumed from: the commit of the first step after it marks
// it RESUMED, as the claimant the signal recorded.
struct ResumedWait {
  std::string correlation_key;
  std::string claimant;
};

struct StepPlan {
  Checkpoint checkpoint;
  std::vector<RunEvent> events;
  std::optional<ResumedWait> resumed;
  std::optional<NewWait> wait;
  std::vector<std::pair<std::string, Json>> signals;  // sent in the same commit
  // Child runs started in the same commit; they report to the plan's wait
  // when it is a wait for children. events holds one "child_started" event
  // per child, in this order, for the commit to add the child's id to.
  std::vector<ChildStart> children;
  // Set when the step's outcome could not be honoured (a jump to an unknown
  // step, an invalid wait, a compensation that waits...) and the plan is
  // this failure instead: a transactional step's own writes must roll back.
  std::optional<StepOutcome> refused;
};

// Takes up a signal's resume before the step at `step` runs: the payload
// joins run.context under the event's name (one "context" event per changed
// field, after a "resumed" event), to be committed with that step, whatever
// its outcome, by AttachResume.
struct Resumption {
  ResumedWait wait;
  std::vector<RunEvent> events;
};
Resumption TakeUpResume(Run& run, const Resume& resume, const std::string& step);

// Makes `plan` commit the resumption: the wait is marked RESUMED and its
// events come first.
void AttachResume(StepPlan& plan, const Resumption& resumption);

// run is the state before the step; jitter_sample is uniform in [0, 1) and
// spreads retry backoff by the policy's jitter fraction.
StepPlan PlanStep(const Run& run, const WorkflowDefinition& workflow, const StepDefinition& step,
                  const StepOutcome& outcome, double jitter_sample,
                  std::chrono::milliseconds lease);

// The plan of a run that fails for good at `step` (attempt `attempt`): it
// ends failed, or unwinds first when steps with a compensation committed.
StepPlan PlanRunFailure(const Run& run, const std::string& step, int attempt,
                        const StepOutcome& failure, std::chrono::milliseconds lease);

// The plan after the compensation of `compensated` (the step at the top of
// the run's compensation stack) ran with `outcome`: pop it and go on, end
// the run when the stack is empty, retry by the step's policy, or end in
// compensation_failed.
StepPlan PlanCompensation(const Run& run, const StepDefinition& compensated,
                          const StepOutcome& outcome, double jitter_sample,
                          std::chrono::milliseconds lease);

// The correlation key of the wait for the children a step starts: unique per
// run and checkpoint version.
std::string ChildWaitKey(const Run& run);

// `context` with `updates` merged in (a null value removes the field).
// Appends one "context" event per field whose value changed.
Json MergeContext(const Json& context, const Json& updates, const Run& run, const std::string& step,
                  int attempt, std::vector<RunEvent>& events);

}  // namespace cairn
