// The worker's session for the idempotency store: the claims, completions
// and failures of steps (ctx.once) commit on it at once, apart from any
// step's own transaction (a transactional step's is still open while it
// calls). One session per worker, opened on first use and reopened after a
// failure; the slots' calls take turns on it, each one short statement with
// bounded lock waits. Thread-safe; a gateway may outlive its step (a step
// abandoned on its thread may still complete its key).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "step.hpp"
#include "store.hpp"

namespace cairn {

class IdempotencySession : public std::enable_shared_from_this<IdempotencySession> {
 public:
  explicit IdempotencySession(store::ConnectionOptions options);

  // The gateway of one step invocation: keys in the run's namespace, owned
  // by the run (the same owner on every attempt).
  std::shared_ptr<StepIdempotency> ForRun(const std::string& namespace_name,
                                          const std::string& run_id);

  // The owner a run's claims carry.
  static std::string OwnerOf(const std::string& run_id) { return "run:" + run_id; }

 private:
  class Gateway;

  // Runs fn(tx) in a transaction of its own on the session, opening it
  // first if needed; a failed session is dropped and reopened next time.
  template <class F>
  auto Transact(F&& fn);

  store::ConnectionOptions options_;
  std::mutex mutex_;
  std::unique_ptr<store::Connection> connection_;
};

}  // namespace cairn
