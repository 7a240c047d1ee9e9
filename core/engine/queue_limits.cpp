// See queue_limits.hpp.
#include "queue_limits.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace cairn {

std::string DescribeQueueLimit(const store::QueueLimit& limit) {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (limit.max_running) add(fmt::format("max_running {}", *limit.max_running));
  if (limit.rate_per_second) add(fmt::format("rate_per_second {}", *limit.rate_per_second));
  if (limit.burst) add(fmt::format("burst {}", *limit.burst));
  return out.empty() ? "no limit" : out;
}

QueueLimitSync SyncQueueLimits(store::Connection& connection,
                               const std::vector<store::QueueLimit>& declared) {
  std::vector<store::QueueLimit> sorted = declared;  // one lock order for every daemon
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.queue < b.queue; });
  std::vector<std::string> queues;
  for (const auto& limit : sorted) queues.push_back(limit.queue);
  return store::RetryTransient([&] {
    return connection.Transact([&](store::Tx& tx) {
      QueueLimitSync sync;
      for (const auto& limit : sorted) {
        const store::QueueLimitChange change = store::SetQueueLimit(tx, limit);
        if (change.kind == store::QueueLimitChange::kUnchanged) {
          ++sync.unchanged;
          continue;
        }
        ++sync.set;
        if (change.kind == store::QueueLimitChange::kUpdated) {
          spdlog::warn(
              "queue_limits: queue {} was limited to {} across the fleet; this daemon's "
              "configuration sets {}, which now holds (the last daemon to start or reload wins: "
              "give every daemon the same queue_limits)",
              limit.queue, DescribeQueueLimit(change.before), DescribeQueueLimit(limit));
        } else {
          spdlog::info("queue_limits: queue {} limited to {} across the fleet", limit.queue,
                       DescribeQueueLimit(limit));
        }
      }
      sync.lifted = store::DeleteQueueLimitsExcept(tx, queues);
      for (const auto& queue : sync.lifted) {
        spdlog::warn(
            "queue_limits: lifted the limits of queue {} across the fleet: this daemon's "
            "configuration does not list it (the last daemon to start or reload wins: give every "
            "daemon the same queue_limits)",
            queue);
      }
      return sync;
    });
  });
}

}  // namespace cairn
