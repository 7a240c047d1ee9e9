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

void CallStep(Invocation& invocation) {
  StepOutcome outcome;
  try {
    outcome = invocation.step->Invoke(invocation.call);
  } catch (const std::exception& e) {
    outcome = FailureOutcome("exception", e.what(), true);
  } catch (...) {
    outcome = FailureOutcome("exception", "the step threw a non-standard exception", true);
  }
  std::lock_guard lock(invocation.mutex);
  invocation.outcome = std::move(outcome);
  invocation.done = true;
  invocation.finished.notify_all();
}

}  // namespace

struct StepRunner::StepThread {
  std::mutex mutex;
  std::condition_variable wake;
  std::shared_ptr<Invocation> next;  // handed over by Invoke, taken by the thread
  bool stop = false;
};

StepRunner::~StepRunner() { LetGo(); }

void StepRunner::LetGo() {
  if (!thread_) return;
  {
    std::lock_guard lock(thread_->mutex);
    thread_->stop = true;
  }
  thread_->wake.notify_all();
  thread_.reset();
}

std::optional<StepOutcome> StepRunner::Invoke(std::shared_ptr<Step> step, const StepCall& call,
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
  if (!thread_) {
    thread_ = std::make_shared<StepThread>();
    // Detached: the thread holds its state, and ends when told to stop and
    // done with its step, whether or not this runner still exists.
    std::thread([thread = thread_] {
      std::unique_lock lock(thread->mutex);
      while (true) {
        thread->wake.wait(lock, [&] { return thread->stop || thread->next; });
        if (!thread->next) return;
        std::shared_ptr<Invocation> current = std::move(thread->next);
        lock.unlock();
        CallStep(*current);
        current.reset();  // the step's objects go before the thread waits again
        lock.lock();
      }
    }).detach();
  }
  {
    std::lock_guard lock(thread_->mutex);
    thread_->next = invocation;
  }
  thread_->wake.notify_all();
  std::unique_lock lock(invocation->mutex);
  if (!invocation->finished.wait_for(lock, timeout, [&] { return invocation->done; })) {
    LetGo();  // busy with the overrunning step until it ends
    return std::nullopt;
  }
  return invocation->outcome;
}

}  // namespace cairn
