// `cairn cleanup`: one retention pass by hand, to the end of the backlog —
// finished runs (with their history and waits) older than the retention,
// finished waits, expired idempotency keys — and what it removed. It takes
// the fleet's retention lock like a daemon's pass, so it never runs beside
// one.
#include <iostream>
#include <map>

#include "cli.hpp"
#include "duration.hpp"
#include "retention.hpp"

namespace cairn::cli {

po::options_description CleanupOptions() {
  po::options_description options("options");
  options.add_options()(
      "older-than", po::value<std::string>()->value_name("DURATION"),
      "delete what finished longer ago than this (default: maintenance.retention)")(
      "json", "print one JSON object of counts");
  options.add(ConnectionOptions());
  return options;
}

int RunCleanup(const std::vector<std::string>& args) {
  auto vm = Parse("cleanup", args);
  const DaemonConfig config = LoadDaemonConfig(vm);
  const std::chrono::milliseconds older_than =
      vm.count("older-than") ? ParseDuration(vm["older-than"].as<std::string>())
                             : config.maintenance.retention;
  if (older_than.count() <= 0) {
    throw InvalidArgumentError(
        "retention is 0 (keep forever): pass --older-than to say what to delete");
  }
  RetentionOptions retention;
  retention.service.name = "cleanup";
  retention.service.connection = ConnectionFor(config, "cairn cleanup");
  retention.older_than = std::chrono::ceil<std::chrono::hours>(older_than);
  Retention pass(retention);
  std::map<std::string, int64_t> counts;
  while (true) {
    const ServiceReport report = pass.RunOnce();
    if (pass.LastPassSkipped()) {
      std::cerr << "cairn cleanup: a worker of the fleet is deleting right now; nothing done, "
                   "try again later\n";
      return kExitConflict;
    }
    for (const auto& [what, count] : report.counts) counts[what] += count;
    if (report.Count("more") == 0) break;
  }
  counts.erase("more");
  if (vm.count("json")) {
    Json out = {{"runs", 0}, {"events", 0}, {"waits", 0}, {"idempotency_keys", 0}};
    for (const auto& [what, count] : counts) {
      out[what == "idempotency keys" ? "idempotency_keys" : what] = count;
    }
    std::cout << out.dump() << "\n";
    return kExitOk;
  }
  std::cout << "deleted " << counts["runs"] << " runs, " << counts["events"] << " history events, "
            << counts["waits"] << " waits, " << counts["idempotency keys"]
            << " idempotency keys (finished more than " << FormatDuration(older_than) << " ago)\n";
  return kExitOk;
}

}  // namespace cairn::cli
