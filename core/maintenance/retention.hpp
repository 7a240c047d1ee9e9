// Retention: the maintenance service that deletes what is old and finished —
// runs (with their history and waits), finished waits of live runs, and
// expired idempotency keys — in bounded passes of short transactions. One
// worker of the fleet runs it at a time (a fleet-wide advisory lock), so a
// large backlog costs one session's worth of deletes, not one per worker. A
// run whose compensation failed is kept until an operator retries it.
#pragma once

#include <atomic>

#include "periodic_service.hpp"

namespace cairn {

struct RetentionOptions {
  PeriodicServiceOptions service{"retention", {}, std::chrono::minutes(1)};
  std::chrono::hours older_than{24 * 30};
  int batch = 1000;      // rows per transaction
  int max_batches = 20;  // per pass; the rest waits for the next pass
};

class Retention : public PeriodicService {
 public:
  explicit Retention(RetentionOptions options);
  ~Retention() override;

  // Whether the last pass found another worker deleting (and did nothing).
  bool LastPassSkipped() const { return skipped_.load(); }

 protected:
  // Counts: "runs", "events", "waits", "idempotency keys", and "more" (1
  // when the pass stopped at its budget); nothing at all when another worker
  // holds the fleet's retention lock.
  ServiceReport Pass(store::Connection& connection) override;

 private:
  RetentionOptions options_;
  std::atomic<bool> skipped_{false};
};

}  // namespace cairn
