// Syncing a daemon's `queue_limits:` section into the fleet's queue_limits
// table, which every claim reads. Stateless; call from any thread.
#pragma once

#include <string>
#include <vector>

#include "store.hpp"

namespace cairn {

struct QueueLimitSync {
  int set = 0;                      // added or changed
  int unchanged = 0;                // already as declared
  std::vector<std::string> lifted;  // queues whose limits were removed
};

// Makes queue_limits match `declared` in one transaction: sets every queue
// it names and lifts the limits of every other queue. The last daemon to
// start or reload wins; a limit it changes or lifts that the table had
// otherwise (set by a daemon with another configuration) is logged as a
// warning, so that a fleet whose configurations disagree shows in the logs.
QueueLimitSync SyncQueueLimits(store::Connection& connection,
                               const std::vector<store::QueueLimit>& declared);

// "max_running 5, rate_per_second 50, burst 100", for logs and the CLI.
std::string DescribeQueueLimit(const store::QueueLimit& limit);

}  // namespace cairn
