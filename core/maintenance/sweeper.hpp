// The sweeper: the maintenance service that keeps runs moving when nobody
// else will. Each pass, in short transactions of its own: runs whose lease
// expired are taken over (due again, or failed with code "crashed" once
// their lease expired crash_limit times in a row without a commit), waits
// whose timeout passed take their timeout path, runs whose deadline passed
// while ready or waiting fail (code "deadline_exceeded"), and inbox signals
// nobody waited for are dropped. Every worker of the fleet runs one; SKIP LOCKED
// keeps them from doing the same row twice.
#pragma once

#include "periodic_service.hpp"

namespace cairn {

struct SweeperOptions {
  PeriodicServiceOptions service{"sweeper"};
  int crash_limit = 3;
  int batch = 1000;  // rows per statement
};

class Sweeper : public PeriodicService {
 public:
  explicit Sweeper(SweeperOptions options);
  ~Sweeper() override;

 protected:
  // Counts: "taken over", "crashed", "waits expired", "deadlines passed",
  // "inbox signals dropped".
  ServiceReport Pass(store::Connection& connection) override;

 private:
  SweeperOptions options_;
};

}  // namespace cairn
