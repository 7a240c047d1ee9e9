// StepRunner without a database: a slot's steps run one after another on one
// thread it keeps, an overrunning step is abandoned with its thread, and the
// next step still runs.
#include "step_invocation.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>

namespace cairn {
namespace {

using namespace std::chrono_literals;

// A step whose code is a function of the call.
class FunctionStep : public Step {
 public:
  explicit FunctionStep(std::function<StepOutcome(const StepCall&)> body)
      : body_(std::move(body)) {}
  const std::string& name() const override { return name_; }
  const std::string& plugin() const override { return name_; }
  StepOutcome Invoke(const StepCall& call) override { return body_(call); }

 private:
  std::string name_ = "function";
  std::function<StepOutcome(const StepCall&)> body_;
};

// Counts the steps run on the calling thread: a thread that runs steps one
// after another counts up, a new thread starts again at one.
StepOutcome CountOnThisThread(const StepCall&) {
  thread_local int steps = 0;
  StepOutcome outcome;
  outcome.context_updates = {{"steps_on_this_thread", ++steps}};
  return outcome;
}

int StepsOnItsThread(const std::optional<StepOutcome>& outcome) {
  return outcome ? outcome->context_updates.value("steps_on_this_thread", 0) : -1;
}

TEST(StepRunner, RunsASlotsStepsOnOneThreadOffTheCaller) {
  auto step = std::make_shared<FunctionStep>(CountOnThisThread);
  StepRunner runner;
  StepCall call;
  EXPECT_EQ(StepsOnItsThread(runner.Invoke(step, call, nullptr, nullptr, 5s)), 1);
  EXPECT_EQ(StepsOnItsThread(runner.Invoke(step, call, nullptr, nullptr, 5s)), 2);
  EXPECT_EQ(StepsOnItsThread(runner.Invoke(step, call, nullptr, nullptr, 5s)), 3);
  // None of them ran on the caller's thread.
  EXPECT_EQ(CountOnThisThread(call).context_updates["steps_on_this_thread"], 1);
}

TEST(StepRunner, AbandonsAnOverrunningStepAndRunsTheNextOnAFreshThread) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto stuck = std::make_shared<FunctionStep>([released](const StepCall& call) {
    released.wait();
    return CountOnThisThread(call);
  });
  auto quick = std::make_shared<FunctionStep>(CountOnThisThread);
  StepRunner runner;
  StepCall call;
  EXPECT_EQ(StepsOnItsThread(runner.Invoke(quick, call, nullptr, nullptr, 5s)), 1);
  EXPECT_FALSE(runner.Invoke(stuck, call, nullptr, nullptr, 20ms).has_value());
  // The overrunning step still holds its thread: the next one runs elsewhere.
  EXPECT_EQ(StepsOnItsThread(runner.Invoke(quick, call, nullptr, nullptr, 5s)), 1);
  release.set_value();
}

TEST(StepRunner, AnExceptionFromTheStepIsARetryableFailure) {
  auto step = std::make_shared<FunctionStep>(
      [](const StepCall&) -> StepOutcome { throw std::runtime_error("boom"); });
  StepRunner runner;
  StepCall call;
  const auto outcome = runner.Invoke(step, call, nullptr, nullptr, 5s);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind, OutcomeKind::kFail);
  EXPECT_EQ(outcome->error_code, "exception");
  EXPECT_TRUE(outcome->retryable);
}

}  // namespace
}  // namespace cairn
