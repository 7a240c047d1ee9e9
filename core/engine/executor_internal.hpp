// Private to the executor's .cpp files (executor.cpp, executor_batch.cpp):
// what a step's commit and a held run carry between them, and the helpers
// both the one-run and the batch path use.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "errors.hpp"
#include "executor.hpp"
#include "metrics.hpp"

namespace cairn {

// What a commit wrote: the checkpoint, and the signal that was already in the
// inbox for the wait it created (the run then continues at once with it).
struct Executor::CommittedPlan {
  CheckpointResult checkpoint;
  // The checkpoint's claim of the slot's next run, when it made one.
  std::optional<CheckpointClaim> claim;
  std::optional<Resume> inbox_resume;
  std::vector<store::SignalOutcome> signals;  // of the signals the step sent
};

struct Executor::StepResult {
  // kDeferred: its checkpoint waits for the batch round's transaction.
  enum class End { kContinue, kParked, kLost, kDeferred } end = End::kParked;
  std::string_view outcome = kStepLost;  // the cairn_steps_total outcome label
  std::optional<Resume> resume;          // for kContinue: the next step resumes with it
};

// A run this slot holds, between its steps.
struct Executor::Turn {
  Run run;
  const WorkflowDefinition* workflow = nullptr;
  std::optional<Resume> resume;  // the next step resumes with it
  bool past_deadline = false;    // claimed after its deadline: fail, run nothing
  bool step_tokens = false;      // see store::ClaimedRun
  bool first_step = true;        // its token, if any, was spent by the claim
  std::string step_name;         // of the step in flight, for its metrics
  std::chrono::steady_clock::time_point step_started;
  std::optional<ExecutionEnd> end;  // set when the turn is over
};

// A step of a batch round whose checkpoint waits for the round's transaction.
struct Executor::Deferred {
  Run* run = nullptr;
  StepPlan plan;
  Planner plan_for;  // what records a refusal of the plan; null: nothing can
};

namespace executor_detail {

// A plan whose commit is its checkpoint statement alone.
bool OneStatement(const StepPlan& plan);

// A commit that failed this way may not be repeated: its version moved (a
// conflict), or whether it landed is unknown (transient, in doubt).
bool LostOrInDoubt(const Error& e);

// What a commit that threw leaves the run: lost (nullopt) when its version
// moved or whether it landed is unknown, which the lease's expiry resolves
// from whatever the database holds; otherwise it was refused (an unknown
// child workflow, invalid input, a limit), nothing of it landed, trying again
// cannot help, and the failure returned is what to record instead.
std::optional<StepOutcome> RefusalOf(const Error& e, Metrics* metrics, const std::string& run);

}  // namespace executor_detail

}  // namespace cairn
