// See sweeper.hpp.
#include "sweeper.hpp"

#include <spdlog/spdlog.h>

#include "logging.hpp"

namespace cairn {

Sweeper::Sweeper(SweeperOptions options)
    : PeriodicService(options.service), options_(std::move(options)) {}

Sweeper::~Sweeper() { Stop(); }

ServiceReport Sweeper::Pass(store::Connection& connection) {
  ServiceReport report;
  const auto reaped = connection.Transact([&](store::Tx& tx) {
    return store::ReapExpiredLeases(tx, options_.crash_limit, options_.batch);
  });
  int64_t crashed = 0;
  for (const store::ReapedRun& run : reaped) {
    const ScopedRunLog run_log({run.run_id, run.workflow, run.step.value_or(""), run.attempt + 1});
    const std::string where = "run " + run.run_id + " workflow " + run.workflow + " step " +
                              run.step.value_or("?") + " attempt " +
                              std::to_string(run.attempt + 1);
    if (run.crashed) {
      ++crashed;
      spdlog::error(
          "{}: the lease of worker {} expired {} times in a row without a commit; the step "
          "takes its workers down, so the run is now {} (code crashed)",
          where, run.previous_owner, run.lease_expiries, ToString(run.status));
    } else {
      spdlog::info("{}: taken over, the lease of worker {} expired ({} of {} before it fails)",
                   where, run.previous_owner, run.lease_expiries, options_.crash_limit);
    }
  }
  report.Add("taken over", static_cast<int64_t>(reaped.size()) - crashed);
  report.Add("crashed", crashed);

  const int64_t expired =
      connection.Transact([&](store::Tx& tx) { return store::ExpireWaits(tx, options_.batch); });
  if (expired > 0) spdlog::info("waits: {} expired, their runs took the timeout path", expired);
  report.Add("waits expired", expired);

  const auto past_deadline = connection.Transact(
      [&](store::Tx& tx) { return store::ExpireDeadlines(tx, options_.batch); });
  for (const store::DeadlineRun& run : past_deadline) {
    const ScopedRunLog run_log({run.run_id, run.workflow, run.step.value_or(""), run.attempt});
    spdlog::warn(
        "run {} workflow {} step {}: its deadline of {} passed while it was not running; "
        "the run is now {} (code deadline_exceeded)",
        run.run_id, run.workflow, run.step.value_or("?"), run.deadline_at, ToString(run.status));
  }
  report.Add("deadlines passed", static_cast<int64_t>(past_deadline.size()));

  const int64_t dropped =
      connection.Transact([&](store::Tx& tx) { return store::CleanupInbox(tx, options_.batch); });
  if (dropped > 0) spdlog::info("inbox: {} signals nobody waited for were dropped", dropped);
  report.Add("inbox signals dropped", dropped);
  return report;
}

}  // namespace cairn
