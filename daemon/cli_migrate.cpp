// `cairn migrate`: applies or reports the schema migrations.
#include <iostream>

#include "cli.hpp"
#include "migrate.hpp"

namespace cairn::cli {

namespace {

void PrintReport(const store::MigrationReport& report, const std::string& schema, bool dry_run) {
  for (const auto& m : report.migrations) {
    bool now = std::find(report.applied_now.begin(), report.applied_now.end(), m.version) !=
               report.applied_now.end();
    const char* state =
        now ? (dry_run ? "would apply" : "applied now") : (m.applied ? "applied" : "pending");
    std::cout << "  " << m.name << "  " << state;
    if (m.applied_at && !now) std::cout << " at " << *m.applied_at;
    std::cout << "\n";
  }
  std::cout << "schema " << schema << ": version " << report.schema_version << " of "
            << report.latest_version;
  if (report.schema_version == report.latest_version) std::cout << " (up to date)";
  std::cout << "\n";
}

}  // namespace

po::options_description MigrateOptions() {
  po::options_description options("options");
  options.add_options()("dry-run", "print what would be applied and change nothing")(
      "status", "print the schema's migration state and change nothing");
  options.add(ConnectionOptions());
  return options;
}

int RunMigrate(const std::vector<std::string>& args) {
  auto vm = Parse("migrate", args);
  auto connection_options = DatabaseOptions(vm, "cairn migrate");
  store::Connection connection(connection_options);
  if (vm.count("status")) {
    PrintReport(store::MigrationStatus(connection), connection.schema(), false);
    return kExitOk;
  }
  bool dry_run = vm.count("dry-run") > 0;
  auto report = store::Migrate(connection, dry_run);
  PrintReport(report, connection.schema(), dry_run);
  return kExitOk;
}

}  // namespace cairn::cli
