// One call of a step's code, on the slot's step thread so that its timeout
// can be enforced: a step that overruns is abandoned (its thread finishes on
// its own and its results are discarded). A transactional step reaches its
// checkpoint transaction through TransactionStepSql, which is closed once
// the slot stops waiting, so an abandoned step can no longer touch a
// transaction that is being rolled back.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "step.hpp"
#include "store.hpp"

namespace cairn {

// The step's SQL gateway into the checkpoint transaction.
class TransactionStepSql : public StepSql {
 public:
  explicit TransactionStepSql(store::Tx& tx) : tx_(&tx) {}

  Json Execute(const std::string& sql, const Json& params) override;

  // Returns the SQL failure, if any, once no statement can run any more.
  std::optional<std::string> Close();

 private:
  std::mutex mutex_;
  store::Tx* tx_;
  bool closed_ = false;
  std::optional<std::string> failure_;
};

// Runs one slot's steps, one at a time, on a thread it keeps from step to
// step, so that a step costs no thread start. Not thread-safe: one slot
// calls it. A step that overruns its timeout keeps that thread, which is left
// to finish the step on its own and then ends; the next step gets a new one.
class StepRunner {
 public:
  StepRunner() = default;
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  // Invokes `step` with `call` (whose input and context this copies, so the
  // step thread never refers to the caller's objects) and waits up to
  // `timeout`. Returns the outcome, or nothing when the step overran. A step
  // that enforces its timeout itself (a step process) is called on this
  // thread instead, and reports an overrun as its own failure. An exception
  // from the step becomes a retryable failure with code "exception".
  // `idempotency` (may be null) is kept alive as long as the step's thread.
  std::optional<StepOutcome> Invoke(std::shared_ptr<Step> step, const StepCall& call,
                                    std::shared_ptr<TransactionStepSql> sql,
                                    std::shared_ptr<StepIdempotency> idempotency,
                                    std::chrono::milliseconds timeout);

 private:
  struct StepThread;  // the thread's state, shared with it
  std::shared_ptr<StepThread> thread_;
  // Stops the thread once it is done with what it runs, without waiting.
  void LetGo();
};

}  // namespace cairn
