// See retention.hpp.
#include "retention.hpp"

#include <spdlog/spdlog.h>

namespace cairn {

namespace {
constexpr std::string_view kRetentionTask = "retention";
}

Retention::Retention(RetentionOptions options)
    : PeriodicService(options.service), options_(std::move(options)) {}

Retention::~Retention() { Stop(); }

ServiceReport Retention::Pass(store::Connection& connection) {
  ServiceReport report;
  skipped_ = !connection.Autocommit(
      [&](store::Tx& tx) { return store::TryLockFleetTask(tx, kRetentionTask); });
  if (skipped_) return report;  // another worker is deleting
  struct Unlock {
    store::Connection& connection;
    ~Unlock() {
      try {
        if (connection.IsOpen()) {
          connection.Autocommit([&](store::Tx& tx) { store::UnlockFleetTask(tx, kRetentionTask); });
        }
      } catch (const std::exception& e) {
        // The session is going; its lock goes with it.
        spdlog::warn("retention: releasing the fleet lock failed: {}", e.what());
      }
    }
  } unlock{connection};
  const RetentionResult deleted =
      store::DeleteFinished(connection, options_.older_than, options_.batch, options_.max_batches);
  report.Add("runs", deleted.runs);
  report.Add("events", deleted.events);
  report.Add("waits", deleted.waits);
  report.Add("idempotency keys", deleted.idempotency_keys);
  if (!report.Empty()) {
    spdlog::info("retention: deleted {}{}", report.Text(), deleted.more ? " (more next pass)" : "");
  }
  report.Add("more", deleted.more ? 1 : 0);
  return report;
}

}  // namespace cairn
