// See step_invocation.hpp.
#include "step_invocation.hpp"

#include <condition_variable>
#include <thread>

#include "step_plan.hpp"

namespace cairn {

Json TransactionStepSql::Execute(const std::string& sql, const Json& params) {
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

std::optional<std::string> TransactionStepSql::Close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  return failure_;
}

namespace {

// Shared by the slot and the step thread, which may outlive the slot's
// interest when the step overruns its timeout.
struct Invocation {
  std::shared_ptr<Step> step;
  Json input;
  Json context;
  StepCall call;
  std::shared_ptr<TransactionStepSql> sql;
  std::shared_ptr<StepIdempotency> idempotency;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  StepOutcome outcome;
};

}  // namespace

std::optional<StepOutcome> InvokeWithTimeout(std::shared_ptr<Step> step, const StepCall& call,
                                             std::shared_ptr<TransactionStepSql> sql,
                                             std::shared_ptr<StepIdempotency> idempotency,
                                             std::chrono::milliseconds timeout) {
  if (step->EnforcesTimeout()) {
    StepCall direct = call;
    direct.sql = sql.get();
    direct.idempotency = idempotency.get();
    direct.timeout = timeout;
    try {
      return step->Invoke(direct);
    } catch (const std::exception& e) {
      return FailureOutcome("exception", e.what(), true);
    }
  }
  auto invocation = std::make_shared<Invocation>();
  invocation->step = std::move(step);
  invocation->input = call.input != nullptr ? *call.input : Json::object();
  invocation->context = call.context != nullptr ? *call.context : Json::object();
  invocation->sql = std::move(sql);
  invocation->idempotency = std::move(idempotency);
  invocation->call = call;
  invocation->call.input = &invocation->input;
  invocation->call.context = &invocation->context;
  invocation->call.sql = invocation->sql.get();
  invocation->call.idempotency = invocation->idempotency.get();
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

}  // namespace cairn
