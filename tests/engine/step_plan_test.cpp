// Unit tests of PlanStep and MergeContext: how each step outcome becomes the
// checkpoint, audit events and wait record one step transaction commits, and
// how the retry policy (backoff, jitter, max attempts, non-retryable codes)
// decides a failure. Pure logic: no database, no plugins.
#include "step_plan.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace cairn {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr std::chrono::milliseconds kLease = 2500ms;

StepDefinition MakeStep(std::string name) {
  StepDefinition step;
  step.name = name;
  step.run = std::move(name);
  step.retry.max_attempts = 3;
  step.retry.initial_backoff = 1000ms;
  step.retry.max_backoff = 10000ms;
  step.retry.multiplier = 2.0;
  step.retry.jitter = 0.2;
  step.retry.non_retryable = {"card_declined"};
  return step;
}

WorkflowDefinition MakeWorkflow() {
  WorkflowDefinition workflow;
  workflow.name = "order";
  workflow.version = 4;
  workflow.steps = {MakeStep("reserve"), MakeStep("charge"), MakeStep("ship")};
  workflow.hash = "hash-order-4";
  return workflow;
}

Run MakeRun() {
  Run run;
  run.id = "11111111-2222-4333-8444-555555555555";
  run.workflow = "order";
  run.definition_version = 4;
  run.definition_hash = "hash-order-4";
  run.queue = "default";
  run.input = {{"sku", "A-1"}};
  run.context = {{"keep", 1}, {"change", "old"}, {"drop", true}};
  run.cursor = "reserve";
  run.attempt = 0;
  run.status = RunStatus::kRunning;
  run.version = 17;
  return run;
}

StepOutcome Outcome(OutcomeKind kind) {
  StepOutcome outcome;
  outcome.kind = kind;
  return outcome;
}

StepOutcome Failure(std::string code, bool retryable = true) {
  StepOutcome outcome = Outcome(OutcomeKind::kFail);
  outcome.error_code = std::move(code);
  outcome.error_message = "it went wrong";
  outcome.retryable = retryable;
  return outcome;
}

std::vector<std::string> Kinds(const StepPlan& plan) {
  std::vector<std::string> kinds;
  for (const auto& event : plan.events) kinds.push_back(event.kind);
  return kinds;
}

// Checks what every event of a plan shares: the run, the step and the attempt.
void ExpectEventsOf(const StepPlan& plan, const Run& run, const std::string& step, int attempt) {
  for (const auto& event : plan.events) {
    EXPECT_EQ(event.run_id, run.id) << event.kind;
    EXPECT_EQ(event.step, std::optional<std::string>(step)) << event.kind;
    EXPECT_EQ(event.attempt, attempt) << event.kind;
    EXPECT_EQ(event.field.has_value(), event.kind == "context") << event.kind;
  }
}

class PlanStepTest : public ::testing::Test {
 protected:
  StepPlan Plan(const StepOutcome& outcome, const std::string& step = "reserve",
                double jitter_sample = 0.5) {
    return PlanStep(run_, workflow_, *workflow_.FindStep(step), outcome, jitter_sample, kLease);
  }

  WorkflowDefinition workflow_ = MakeWorkflow();
  cairn::Run run_ = MakeRun();
};

// ---------------------------------------------------------------- next

TEST_F(PlanStepTest, NextMovesTheCursorAndKeepsRunning) {
  StepPlan plan = Plan(Outcome(OutcomeKind::kNext));

  const Checkpoint& cp = plan.checkpoint;
  EXPECT_EQ(cp.run_id, run_.id);
  EXPECT_EQ(cp.expected_version, 17);
  EXPECT_EQ(cp.status, RunStatus::kRunning);
  EXPECT_EQ(cp.cursor, std::optional<std::string>("charge"));
  EXPECT_EQ(cp.attempt, 0);
  EXPECT_EQ(cp.delay_ms, 0);
  EXPECT_FALSE(cp.run_at.has_value());
  EXPECT_EQ(cp.lease_ms, 2500);
  EXPECT_EQ(cp.context, run_.context);
  EXPECT_FALSE(cp.output.has_value());
  EXPECT_FALSE(cp.error.has_value());
  EXPECT_FALSE(plan.wait.has_value());
  EXPECT_EQ(Kinds(plan), std::vector<std::string>{"step_committed"});
  ExpectEventsOf(plan, run_, "reserve", 1);
}

TEST_F(PlanStepTest, NextRecordsOneContextEventPerChangedField) {
  StepOutcome outcome = Outcome(OutcomeKind::kNext);
  outcome.context_updates = {
      {"keep", 1}, {"change", "new"}, {"drop", nullptr}, {"absent", nullptr}, {"added", {1, 2}}};
  StepPlan plan = Plan(outcome);

  EXPECT_EQ(plan.checkpoint.context, (Json{{"keep", 1}, {"change", "new"}, {"added", {1, 2}}}));
  ASSERT_EQ(Kinds(plan),
            (std::vector<std::string>{"context", "context", "context", "step_committed"}));
  ExpectEventsOf(plan, run_, "reserve", 1);
  std::map<std::string, Json> changed;
  for (const auto& event : plan.events) {
    if (event.kind != "context") continue;
    ASSERT_TRUE(event.value.has_value()) << *event.field;
    changed[*event.field] = *event.value;
  }
  // Unchanged "keep" and never-present "absent" leave no trace.
  EXPECT_EQ(changed,
            (std::map<std::string, Json>{{"change", "new"}, {"drop", nullptr}, {"added", {1, 2}}}));
}

TEST_F(PlanStepTest, NextAtTheLastStepCompletesWithTheContextAsOutput) {
  run_.cursor = "ship";
  StepOutcome outcome = Outcome(OutcomeKind::kNext);
  outcome.context_updates = {{"shipped", true}};
  StepPlan plan = Plan(outcome, "ship");

  const Json expected = {{"keep", 1}, {"change", "old"}, {"drop", true}, {"shipped", true}};
  EXPECT_EQ(plan.checkpoint.status, RunStatus::kCompleted);
  EXPECT_EQ(plan.checkpoint.cursor, std::optional<std::string>("ship"));
  EXPECT_EQ(plan.checkpoint.context, expected);
  EXPECT_EQ(plan.checkpoint.output, std::optional<Json>(expected));
  EXPECT_EQ(Kinds(plan), (std::vector<std::string>{"context", "completed"}));
  EXPECT_EQ(plan.events.back().value, std::optional<Json>(expected));
  ExpectEventsOf(plan, run_, "ship", 1);
}

TEST_F(PlanStepTest, ExpectedVersionIsTheRunsVersion) {
  run_.version = 123456789012;
  EXPECT_EQ(Plan(Outcome(OutcomeKind::kNext)).checkpoint.expected_version, 123456789012);
  EXPECT_EQ(Plan(Failure("boom")).checkpoint.expected_version, 123456789012);
  EXPECT_EQ(Plan(Failure("boom", false)).checkpoint.expected_version, 123456789012);
}

TEST_F(PlanStepTest, EventsCarryTheAttemptBeingRun) {
  run_.attempt = 1;  // one failed attempt before this one
  StepOutcome outcome = Outcome(OutcomeKind::kNext);
  outcome.context_updates = {{"x", 1}};
  StepPlan plan = Plan(outcome);
  ExpectEventsOf(plan, run_, "reserve", 2);
  EXPECT_EQ(plan.checkpoint.attempt, 0);  // a success resets the attempt count
}

// ---------------------------------------------------------------- jump

TEST_F(PlanStepTest, JumpMovesTheCursorToTheTarget) {
  StepOutcome outcome = Outcome(OutcomeKind::kJump);
  outcome.jump_to = "ship";
  outcome.context_updates = {{"skipped", "charge"}};
  StepPlan plan = Plan(outcome);

  EXPECT_EQ(plan.checkpoint.status, RunStatus::kRunning);
  EXPECT_EQ(plan.checkpoint.cursor, std::optional<std::string>("ship"));
  EXPECT_EQ(plan.checkpoint.context["skipped"], "charge");
  EXPECT_EQ(Kinds(plan), (std::vector<std::string>{"context", "step_committed", "jumped"}));
  EXPECT_EQ(plan.events.back().value, std::optional<Json>(Json{{"to", "ship"}}));
  ExpectEventsOf(plan, run_, "reserve", 1);
}

TEST_F(PlanStepTest, JumpBackwardsIsAllowed) {
  run_.cursor = "ship";
  StepOutcome outcome = Outcome(OutcomeKind::kJump);
  outcome.jump_to = "reserve";
  StepPlan plan = Plan(outcome, "ship");
  EXPECT_EQ(plan.checkpoint.status, RunStatus::kRunning);
  EXPECT_EQ(plan.checkpoint.cursor, std::optional<std::string>("reserve"));
}

TEST_F(PlanStepTest, JumpToAnUnknownStepFailsWithoutRetry) {
  StepOutcome outcome = Outcome(OutcomeKind::kJump);
  outcome.jump_to = "nowhere";
  outcome.context_updates = {{"lost", true}};
  StepPlan plan = Plan(outcome);

  EXPECT_EQ(plan.checkpoint.status, RunStatus::kFailed);
  EXPECT_EQ(plan.checkpoint.cursor, std::optional<std::string>("reserve"));
  EXPECT_EQ(plan.checkpoint.context, run_.context);
  ASSERT_TRUE(plan.checkpoint.error.has_value());
  EXPECT_THAT(*plan.checkpoint.error, HasSubstr("nowhere"));
  ASSERT_EQ(Kinds(plan), std::vector<std::string>{"failed"});
  EXPECT_EQ((*plan.events[0].value)["code"], "unknown_step");
  EXPECT_THAT((*plan.events[0].value)["error"].get<std::string>(), HasSubstr("order v4"));
}

// ---------------------------------------------------------------- sleep

TEST_F(PlanStepTest, SleepForADurationMakesTheNextStepDueLater) {
  StepOutcome outcome = Outcome(OutcomeKind::kSleep);
  outcome.sleep_ms = 1500;
  StepPlan plan = Plan(outcome);

  EXPECT_EQ(plan.checkpoint.status, RunStatus::kReady);
  EXPECT_EQ(plan.checkpoint.cursor, std::optional<std::string>("charge"));
  EXPECT_EQ(plan.checkpoint.delay_ms, 1500);
  EXPECT_FALSE(plan.checkpoint.run_at.has_value());
  EXPECT_EQ(plan.checkpoint.attempt, 0);
  EXPECT_EQ(Kinds(plan), (std::vector<std::string>{"step_committed", "sleeping"}));
  EXPECT_EQ(plan.events.back().value, std::optional<Json>(Json{{"ms", 1500}}));
}

TEST_F(PlanStepTest, SleepWithANegativeDurationIsDueAtOnce) {
  StepOutcome outcome = Outcome(OutcomeKind::kSleep);
  outcome.sleep_ms = -5;
  EXPECT_EQ(Plan(outcome).checkpoint.delay_ms, 0);
}

TEST_F(PlanStepTest, SleepUntilATimeSetsRunAt) {
  StepOutcome outcome = Outcome(OutcomeKind::kSleep);
  outcome.sleep_until = "2031-01-02 03:04:05+00";
  StepPlan plan = Plan(outcome);

  EXPECT_EQ(plan.checkpoint.status, RunStatus::kReady);
  EXPECT_EQ(plan.checkpoint.cursor, std::optional<std::string>("charge"));
  EXPECT_EQ(plan.checkpoint.run_at, std::optional<std::string>("2031-01-02 03:04:05+00"));
  EXPECT_EQ(plan.checkpoint.delay_ms, 0);
  EXPECT_EQ(plan.events.back().value,
            std::optional<Json>(Json{{"until", "2031-01-02 03:04:05+00"}}));
}

TEST_F(PlanStepTest, SleepAtTheLastStepCompletes) {
  run_.cursor = "ship";
  StepOutcome outcome = Outcome(OutcomeKind::kSleep);
  outcome.sleep_ms = 60000;
  StepPlan plan = Plan(outcome, "ship");

  EXPECT_EQ(plan.checkpoint.status, RunStatus::kCompleted);
  EXPECT_EQ(plan.checkpoint.output, std::optional<Json>(run_.context));
  EXPECT_EQ(Kinds(plan), (std::vector<std::string>{"completed"}));
}

// ---------------------------------------------------------------- wait

TEST_F(PlanStepTest, WaitWritesAWaitRecordContinuingAtTheNextStep) {
  StepOutcome outcome = Outcome(OutcomeKind::kWait);
  outcome.wait_event = "payment";
  outcome.wait_key = "payment:order-17";
  outcome.wait_timeout_ms = 60000;
  outcome.context_updates = {{"invoice", "INV-1"}};
  StepPlan plan = Plan(outcome);

  EXPECT_EQ(plan.checkpoint.status, RunStatus::kWaiting);
  EXPECT_EQ(plan.checkpoint.cursor, std::optional<std::string>("charge"));
  EXPECT_EQ(plan.checkpoint.context["invoice"], "INV-1");
  ASSERT_TRUE(plan.wait.has_value());
  EXPECT_EQ(plan.wait->correlation_key, "payment:order-17");
  EXPECT_EQ(plan.wait->run_id, run_.id);
  EXPECT_EQ(plan.wait->event, "payment");
  EXPECT_EQ(plan.wait->continuation_step, "charge");
  EXPECT_EQ(plan.wait->timeout_ms, std::optional<int64_t>(60000));
  EXPECT_EQ(Kinds(plan), (std::vector<std::string>{"context", "step_committed", "waiting"}));
  EXPECT_EQ(plan.events.back().value,
            std::optional<Json>(Json{{"event", "payment"}, {"key", "payment:order-17"}}));
  ExpectEventsOf(plan, run_, "reserve", 1);
}

TEST_F(PlanStepTest, WaitWithoutAnEventNameUsesTheKey) {
  StepOutcome outcome = Outcome(OutcomeKind::kWait);
  outcome.wait_key = "k-1";
  StepPlan plan = Plan(outcome);
  ASSERT_TRUE(plan.wait.has_value());
  EXPECT_EQ(plan.wait->event, "k-1");
  EXPECT_FALSE(plan.wait->timeout_ms.has_value());
}

TEST_F(PlanStepTest, WaitAtTheLastStepIsAFailure) {
  run_.cursor = "ship";
  StepOutcome outcome = Outcome(OutcomeKind::kWait);
  outcome.wait_event = "payment";
  outcome.wait_key = "payment:order-17";
  StepPlan plan = Plan(outcome, "ship");

  EXPECT_EQ(plan.checkpoint.status, RunStatus::kFailed);
  EXPECT_FALSE(plan.wait.has_value());
  ASSERT_EQ(Kinds(plan), std::vector<std::string>{"failed"});
  EXPECT_EQ((*plan.events[0].value)["code"], "invalid_wait");
  EXPECT_THAT(*plan.checkpoint.error, HasSubstr("last step"));
}

TEST_F(PlanStepTest, WaitWithoutAKeyIsAFailure) {
  StepOutcome outcome = Outcome(OutcomeKind::kWait);
  outcome.wait_event = "payment";
  StepPlan plan = Plan(outcome);
  EXPECT_EQ(plan.checkpoint.status, RunStatus::kFailed);
  EXPECT_FALSE(plan.wait.has_value());
  EXPECT_THAT(*plan.checkpoint.error, HasSubstr("correlation key"));
}

// ---------------------------------------------------------------- complete

TEST_F(PlanStepTest, CompleteFinishesWithTheGivenOutput) {
  StepOutcome outcome = Outcome(OutcomeKind::kComplete);
  outcome.output = {{"tracking", "T-9"}};
  outcome.context_updates = {{"change", "done"}};
  StepPlan plan = Plan(outcome);  // not the last step: complete ends the run early

  EXPECT_EQ(plan.checkpoint.status, RunStatus::kCompleted);
  EXPECT_EQ(plan.checkpoint.output, std::optional<Json>(Json{{"tracking", "T-9"}}));
  EXPECT_EQ(plan.checkpoint.context["change"], "done");
  EXPECT_EQ(plan.checkpoint.attempt, 0);
  EXPECT_FALSE(plan.checkpoint.error.has_value());
  EXPECT_EQ(Kinds(plan), (std::vector<std::string>{"context", "completed"}));
  EXPECT_EQ(plan.events.back().value, std::optional<Json>(Json{{"tracking", "T-9"}}));
}

// The commit that ends a run has one history row, `completed`, after the
// signals it sent and the children it started; a commit that carries the run
// on has `step_committed` first.
TEST_F(PlanStepTest, ACommitThatEndsTheRunHasOneRowAfterWhatItSentAndStarted) {
  StepOutcome outcome = Outcome(OutcomeKind::kComplete);
  outcome.signals = {{"order-7", Json{{"paid", true}}}};
  outcome.children = {ChildStart{"sub", Json::object(), {}}};
  StepPlan plan = Plan(outcome);
  EXPECT_EQ(Kinds(plan), (std::vector<std::string>{"signal_sent", "child_started", "completed"}));
  ExpectEventsOf(plan, run_, "reserve", 1);

  outcome.kind = OutcomeKind::kNext;
  plan = Plan(outcome);
  EXPECT_EQ(Kinds(plan),
            (std::vector<std::string>{"step_committed", "signal_sent", "child_started"}));
}

// ---------------------------------------------------------------- fail

TEST_F(PlanStepTest, RetryableFailureUnderMaxAttemptsIsRetriedAfterBackoff) {
  StepPlan plan = Plan(Failure("boom"), "reserve", 0.5);

  const Checkpoint& cp = plan.checkpoint;
  EXPECT_EQ(cp.status, RunStatus::kReady);
  EXPECT_EQ(cp.cursor, std::optional<std::string>("reserve"));  // the same step again
  EXPECT_EQ(cp.attempt, 1);
  EXPECT_EQ(cp.delay_ms, 1000);  // initial backoff, jitter sample in the middle
  EXPECT_FALSE(cp.run_at.has_value());
  EXPECT_EQ(cp.error, std::optional<std::string>("it went wrong"));
  EXPECT_EQ(cp.expected_version, run_.version);
  ASSERT_EQ(Kinds(plan), std::vector<std::string>{"retried"});
  EXPECT_EQ(plan.events[0].value,
            std::optional<Json>(
                Json{{"error", "it went wrong"}, {"code", "boom"}, {"retry_in_ms", 1000}}));
  ExpectEventsOf(plan, run_, "reserve", 1);
}

TEST_F(PlanStepTest, RetryBackoffGrowsAndStaysWithinTheJitterBounds) {
  run_.attempt = 1;  // the second attempt fails: the backoff is initial * multiplier
  struct Case {
    double sample;
    int64_t delay;
  };
  // base 2000 ms, jitter 0.2: uniform over [1600, 2400).
  for (const Case c : {Case{0.0, 1600}, Case{0.5, 2000}, Case{0.999, 2399}}) {
    StepPlan plan = Plan(Failure("boom"), "reserve", c.sample);
    EXPECT_EQ(plan.checkpoint.status, RunStatus::kReady) << c.sample;
    EXPECT_EQ(plan.checkpoint.attempt, 2) << c.sample;
    EXPECT_EQ(plan.checkpoint.delay_ms, c.delay) << c.sample;
    EXPECT_GE(plan.checkpoint.delay_ms, 1600) << c.sample;
    EXPECT_LT(plan.checkpoint.delay_ms, 2400) << c.sample;
    EXPECT_EQ((*plan.events[0].value)["retry_in_ms"], c.delay) << c.sample;
    ExpectEventsOf(plan, run_, "reserve", 2);
  }
}

TEST_F(PlanStepTest, RetryBackoffIsCappedByMaxBackoff) {
  workflow_.steps[0].retry.max_attempts = 20;
  workflow_.steps[0].retry.jitter = 0.0;
  run_.attempt = 10;  // 1000 * 2^9 would be far past the 10 s cap
  StepPlan plan = Plan(Failure("boom"), "reserve", 0.999);
  EXPECT_EQ(plan.checkpoint.status, RunStatus::kReady);
  EXPECT_EQ(plan.checkpoint.delay_ms, 10000);
}

TEST_F(PlanStepTest, WithoutJitterTheBackoffIsExact) {
  workflow_.steps[0].retry.jitter = 0.0;
  for (double sample : {0.0, 0.5, 0.999}) {
    EXPECT_EQ(Plan(Failure("boom"), "reserve", sample).checkpoint.delay_ms, 1000) << sample;
  }
}

TEST_F(PlanStepTest, FailureAtMaxAttemptsFailsTheRun) {
  run_.attempt = 2;  // this is attempt 3 of 3
  StepPlan plan = Plan(Failure("boom"));

  EXPECT_EQ(plan.checkpoint.status, RunStatus::kFailed);
  EXPECT_EQ(plan.checkpoint.cursor, std::optional<std::string>("reserve"));
  EXPECT_EQ(plan.checkpoint.attempt, 3);  // the run shows the attempts it used, as its history
  EXPECT_EQ(plan.checkpoint.delay_ms, 0);
  EXPECT_EQ(plan.checkpoint.error, std::optional<std::string>("it went wrong"));
  EXPECT_FALSE(plan.checkpoint.output.has_value());
  ASSERT_EQ(Kinds(plan), std::vector<std::string>{"failed"});
  EXPECT_EQ(plan.events[0].value,
            std::optional<Json>(Json{{"error", "it went wrong"}, {"code", "boom"}}));
  ExpectEventsOf(plan, run_, "reserve", 3);
}

TEST_F(PlanStepTest, MaxAttemptsOfOneNeverRetries) {
  workflow_.steps[0].retry.max_attempts = 1;
  EXPECT_EQ(Plan(Failure("boom")).checkpoint.status, RunStatus::kFailed);
}

TEST_F(PlanStepTest, NonRetryableCodeFailsAtOnce) {
  StepPlan plan = Plan(Failure("card_declined", /*retryable=*/true));
  EXPECT_EQ(plan.checkpoint.status, RunStatus::kFailed);
  EXPECT_EQ(plan.checkpoint.attempt, 1);
  ASSERT_EQ(Kinds(plan), std::vector<std::string>{"failed"});
  EXPECT_EQ((*plan.events[0].value)["code"], "card_declined");
  ExpectEventsOf(plan, run_, "reserve", 1);
}

TEST_F(PlanStepTest, NonRetryableFailureFailsAtOnce) {
  StepPlan plan = Plan(Failure("boom", /*retryable=*/false));
  EXPECT_EQ(plan.checkpoint.status, RunStatus::kFailed);
  EXPECT_EQ(Kinds(plan), std::vector<std::string>{"failed"});
}

TEST_F(PlanStepTest, FailedStepsContextUpdatesAreDiscarded) {
  for (bool retryable : {true, false}) {
    StepOutcome outcome = Failure("boom", retryable);
    outcome.context_updates = {{"change", "new"}, {"drop", nullptr}, {"partial", 1}};
    StepPlan plan = Plan(outcome);
    EXPECT_EQ(plan.checkpoint.context, run_.context) << retryable;
    for (const auto& event : plan.events) EXPECT_NE(event.kind, "context") << retryable;
  }
}

TEST(FailureOutcome, BuildsAFailOutcome) {
  StepOutcome outcome = FailureOutcome("timeout", "too slow", true);
  EXPECT_EQ(outcome.kind, OutcomeKind::kFail);
  EXPECT_EQ(outcome.error_code, "timeout");
  EXPECT_EQ(outcome.error_message, "too slow");
  EXPECT_TRUE(outcome.retryable);
  EXPECT_FALSE(FailureOutcome("x", "y", false).retryable);
}

// ---------------------------------------------------------------- MergeContext

TEST(MergeContext, NonObjectUpdatesChangeNothing) {
  cairn::Run run = MakeRun();
  std::vector<RunEvent> events;
  EXPECT_EQ(MergeContext(run.context, Json::array({1}), run, "s", 1, events), run.context);
  EXPECT_EQ(MergeContext(run.context, nullptr, run, "s", 1, events), run.context);
  EXPECT_TRUE(events.empty());
}

TEST(MergeContext, NonObjectContextStartsEmpty) {
  cairn::Run run = MakeRun();
  std::vector<RunEvent> events;
  EXPECT_EQ(MergeContext(nullptr, {{"a", 1}}, run, "s", 2, events), (Json{{"a", 1}}));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "context");
  EXPECT_EQ(events[0].field, std::optional<std::string>("a"));
  EXPECT_EQ(events[0].value, std::optional<Json>(1));
  EXPECT_EQ(events[0].attempt, 2);
  EXPECT_EQ(events[0].step, std::optional<std::string>("s"));
}

TEST(MergeContext, NestedValuesAreReplacedWhole) {
  cairn::Run run = MakeRun();
  std::vector<RunEvent> events;
  Json merged =
      MergeContext({{"obj", {{"a", 1}, {"b", 2}}}}, {{"obj", {{"a", 1}}}}, run, "s", 1, events);
  EXPECT_EQ(merged, (Json{{"obj", {{"a", 1}}}}));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].value, std::optional<Json>(Json{{"a", 1}}));
}

// Compensation: a workflow whose first two steps have one.
WorkflowDefinition CompensatedWorkflow() {
  WorkflowDefinition workflow = MakeWorkflow();
  workflow.steps[0].compensate = "release";
  workflow.steps[1].compensate = "refund";
  return workflow;
}

TEST(PlanStep, StepWithACompensationPushesItOnTheStackWhenItCommits) {
  const WorkflowDefinition workflow = CompensatedWorkflow();
  cairn::Run run = MakeRun();
  StepPlan plan =
      PlanStep(run, workflow, workflow.steps[0], Outcome(OutcomeKind::kNext), 0.5, kLease);
  EXPECT_EQ(plan.checkpoint.compensations, Json::array({"reserve"}));
  EXPECT_FALSE(plan.checkpoint.final_status.has_value());

  run.compensations = Json::array({"reserve"});
  run.cursor = "charge";
  plan = PlanStep(run, workflow, workflow.steps[1], Failure("flaky"), 0.5, kLease);
  EXPECT_EQ(plan.checkpoint.compensations, Json::array({"reserve"}))
      << "a step that did not commit owes no compensation";
  plan = PlanStep(run, workflow, workflow.steps[2], Outcome(OutcomeKind::kNext), 0.5, kLease);
  EXPECT_EQ(plan.checkpoint.compensations, Json::array({"reserve"}))
      << "a step without a compensation adds nothing";
}

TEST(PlanStep, FailingForGoodWithCommittedCompensationsUnwindsOnTheSlot) {
  const WorkflowDefinition workflow = CompensatedWorkflow();
  cairn::Run run = MakeRun();
  run.compensations = Json::array({"reserve", "charge"});
  run.cursor = "ship";
  run.attempt = 2;  // the third attempt is the last
  StepPlan plan = PlanStep(run, workflow, workflow.steps[2], Failure("flaky"), 0.5, kLease);
  EXPECT_EQ(plan.checkpoint.status, RunStatus::kRunning);
  EXPECT_EQ(plan.checkpoint.final_status, std::optional(RunStatus::kFailed));
  EXPECT_EQ(plan.checkpoint.attempt, 0) << "attempts now count the compensation's";
  EXPECT_EQ(plan.checkpoint.error, std::optional<std::string>("it went wrong"));
  EXPECT_EQ(plan.checkpoint.compensations, Json::array({"reserve", "charge"}));
  EXPECT_EQ(Kinds(plan), (std::vector<std::string>{"failed", "compensating"}));

  run.compensations = Json::array();
  plan = PlanStep(run, workflow, workflow.steps[2], Failure("flaky"), 0.5, kLease);
  EXPECT_EQ(plan.checkpoint.status, RunStatus::kFailed);
  EXPECT_FALSE(plan.checkpoint.final_status.has_value());
  EXPECT_EQ(plan.checkpoint.attempt, 3);
}

cairn::Run Unwinding(RunStatus final_status) {
  cairn::Run run = MakeRun();
  run.cursor = "ship";
  run.compensations = Json::array({"reserve", "charge"});
  run.final_status = final_status;
  run.error = "ship failed";
  return run;
}

TEST(PlanCompensation, SuccessPopsTheTopAndContinuesWithTheNext) {
  const WorkflowDefinition workflow = CompensatedWorkflow();
  const cairn::Run run = Unwinding(RunStatus::kFailed);
  StepOutcome outcome = Outcome(OutcomeKind::kNext);
  outcome.context_updates = {{"refunded", true}};
  StepPlan plan = PlanCompensation(run, workflow.steps[1], outcome, 0.5, kLease);
  EXPECT_EQ(plan.checkpoint.status, RunStatus::kRunning);
  EXPECT_EQ(plan.checkpoint.compensations, Json::array({"reserve"}));
  EXPECT_EQ(plan.checkpoint.cursor, std::optional<std::string>("ship"))
      << "the cursor keeps showing where the run stopped";
  EXPECT_EQ(plan.checkpoint.context["refunded"], true);
  EXPECT_EQ(plan.checkpoint.final_status, std::optional(RunStatus::kFailed));
  ASSERT_EQ(Kinds(plan), (std::vector<std::string>{"context", "compensated"}));
  EXPECT_EQ(plan.events[1].step, std::optional<std::string>("refund"));
  EXPECT_EQ(plan.events[1].value, std::optional<Json>(Json{{"for", "charge"}}));
}

TEST(PlanCompensation, TheLastOneEndsTheRunInItsFinalStatus) {
  const WorkflowDefinition workflow = CompensatedWorkflow();
  for (RunStatus final_status : {RunStatus::kFailed, RunStatus::kCancelled}) {
    cairn::Run run = Unwinding(final_status);
    run.compensations = Json::array({"reserve"});
    StepPlan plan =
        PlanCompensation(run, workflow.steps[0], Outcome(OutcomeKind::kNext), 0.5, kLease);
    EXPECT_EQ(plan.checkpoint.status, final_status);
    EXPECT_EQ(plan.checkpoint.compensations, Json::array());
    EXPECT_EQ(plan.checkpoint.error, std::optional<std::string>("ship failed"));
    EXPECT_EQ(Kinds(plan), (std::vector<std::string>{"compensated", "compensations_done"}));
  }
}

TEST(PlanCompensation, FailureIsRetriedByTheStepsPolicyThenEndsInCompensationFailed) {
  const WorkflowDefinition workflow = CompensatedWorkflow();
  cairn::Run run = Unwinding(RunStatus::kCancelled);
  StepPlan plan = PlanCompensation(run, workflow.steps[1], Failure("flaky"), 0.5, kLease);
  EXPECT_EQ(plan.checkpoint.status, RunStatus::kCompensating);
  EXPECT_EQ(plan.checkpoint.attempt, 1);
  EXPECT_EQ(plan.checkpoint.delay_ms, 1000);  // initial backoff, jitter sample 0.5
  EXPECT_EQ(plan.checkpoint.compensations, Json::array({"reserve", "charge"}));
  EXPECT_EQ(plan.checkpoint.error, std::optional<std::string>("ship failed"));
  EXPECT_EQ(Kinds(plan), std::vector<std::string>{"retried"});

  run.attempt = 2;
  plan = PlanCompensation(run, workflow.steps[1], Failure("flaky"), 0.5, kLease);
  EXPECT_EQ(plan.checkpoint.status, RunStatus::kCompensationFailed);
  EXPECT_EQ(plan.checkpoint.compensations, Json::array({"reserve", "charge"}))
      << "the failed compensation stays owed, for cairn retry";
  EXPECT_EQ(plan.checkpoint.error, std::optional<std::string>("it went wrong"));
  ASSERT_EQ(Kinds(plan), std::vector<std::string>{"compensation_failed"});
  EXPECT_EQ((*plan.events[0].value)["for"], "charge");

  run.attempt = 0;
  plan = PlanCompensation(run, workflow.steps[1], Failure("card_declined"), 0.5, kLease);
  EXPECT_EQ(plan.checkpoint.status, RunStatus::kCompensationFailed) << "non-retryable code";
}

TEST(PlanCompensation, ACompensationCannotWaitSleepJumpOrStartChildren) {
  const WorkflowDefinition workflow = CompensatedWorkflow();
  const cairn::Run run = Unwinding(RunStatus::kFailed);
  StepOutcome wait = Outcome(OutcomeKind::kWait);
  wait.wait_key = "k";
  StepOutcome child = Outcome(OutcomeKind::kNext);
  child.children = {ChildStart{"sub", Json::object(), {}}};
  for (const StepOutcome& outcome :
       {wait, Outcome(OutcomeKind::kSleep), Outcome(OutcomeKind::kJump), child}) {
    StepPlan plan = PlanCompensation(run, workflow.steps[1], outcome, 0.5, kLease);
    EXPECT_EQ(plan.checkpoint.status, RunStatus::kCompensationFailed);
    EXPECT_THAT(plan.checkpoint.error.value_or(""), HasSubstr("may only finish or fail"));
  }
}

TEST(PlanStep, WaitForChildrenUsesAKeyOfTheRunAndVersion) {
  const WorkflowDefinition workflow = MakeWorkflow();
  const cairn::Run run = MakeRun();
  StepOutcome outcome = Outcome(OutcomeKind::kWait);
  outcome.wait_children = ChildWait::kAll;
  outcome.wait_timeout_ms = 5000;
  outcome.children = {ChildStart{"sub", {{"n", 1}}, {}}, ChildStart{"sub", {{"n", 2}}, {}}};
  StepPlan plan = PlanStep(run, workflow, workflow.steps[0], outcome, 0.5, kLease);
  ASSERT_TRUE(plan.wait.has_value());
  EXPECT_EQ(plan.wait->correlation_key, "children:" + run.id + ":17");
  EXPECT_EQ(plan.wait->event, "children");
  EXPECT_EQ(plan.wait->children, std::optional(ChildWait::kAll));
  EXPECT_EQ(plan.wait->continuation_step, "charge");
  EXPECT_EQ(plan.checkpoint.status, RunStatus::kWaiting);
  EXPECT_EQ(plan.children.size(), 2u);
  EXPECT_EQ(Kinds(plan), (std::vector<std::string>{"step_committed", "child_started",
                                                   "child_started", "waiting"}));

  outcome.children.clear();
  plan = PlanStep(run, workflow, workflow.steps[0], outcome, 0.5, kLease);
  EXPECT_EQ(plan.checkpoint.status, RunStatus::kFailed);
  EXPECT_THAT(plan.checkpoint.error.value_or(""), HasSubstr("started none"));
}

// What a child asked for rides to the commit with it, and its child_started
// event names it; a child that asked for nothing has the event it always had.
TEST(PlanStep, ChildStartedNamesWhatTheChildAskedFor) {
  const WorkflowDefinition workflow = MakeWorkflow();
  const cairn::Run run = MakeRun();
  StepOutcome outcome = Outcome(OutcomeKind::kWait);
  outcome.wait_children = ChildWait::kFirst;
  outcome.children = {ChildStart{"sub", Json::object(), ChildOptions{true, true}},
                      ChildStart{"sub", Json::object(), ChildOptions{false, true}},
                      ChildStart{"sub", Json::object(), {}}};
  const StepPlan plan = PlanStep(run, workflow, workflow.steps[0], outcome, 0.5, kLease);
  ASSERT_EQ(plan.children.size(), 3u);
  EXPECT_EQ(plan.children[0].options, (ChildOptions{true, true}));
  std::vector<Json> started;
  for (const RunEvent& event : plan.events) {
    if (event.kind == "child_started") started.push_back(event.value.value_or(Json()));
  }
  ASSERT_EQ(started.size(), 3u);
  EXPECT_EQ(started[0], (Json{{"workflow", "sub"},
                              {"cancel_when", Json::array({"parent_fails", "first_done"})}}));
  EXPECT_EQ(started[1], (Json{{"workflow", "sub"}, {"cancel_when", Json::array({"first_done"})}}));
  EXPECT_EQ(started[2], (Json{{"workflow", "sub"}}));
}

}  // namespace
}  // namespace cairn
