// Option parsing shared by all subcommands.
#include <iostream>

#include "cli.hpp"

namespace cairn::cli {

void AddDatabaseOptions(po::options_description& options) {
  options.add_options()("database-url", po::value<std::string>(),
                        "PostgreSQL connection URI or libpq string (default: $CAIRN_DATABASE_URL)")(
      "schema", po::value<std::string>(),
      "schema holding cairn's tables (default: $CAIRN_SCHEMA, the config file's, or cairn)")(
      "config,c", po::value<std::string>(), "daemon YAML configuration file");
}

store::ConnectionOptions DatabaseOptions(const po::variables_map& vm,
                                         const std::string& application_name) {
  return ConnectionFor(LoadDaemonConfig(vm), application_name);
}

void PrintTable(const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(header.size());
  for (size_t c = 0; c < header.size(); ++c) widths[c] = header[c].size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  auto print = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < row.size(); ++c) {
      std::cout << row[c];
      if (c + 1 < row.size()) std::cout << std::string(widths[c] - row[c].size() + 2, ' ');
    }
    std::cout << "\n";
  };
  print(header);
  for (const auto& row : rows) print(row);
}

po::variables_map Parse(const std::string& command, const std::vector<std::string>& args,
                        const po::options_description& options,
                        const po::positional_options_description& positional) {
  po::options_description all(options);
  all.add_options()("help,h", "show this help");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    // --help wins over missing required arguments, so it is checked first.
    if (vm.count("help")) {
      std::cout << "usage: cairn " << command << " [options]\n" << all;
      throw UsageError("");
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError("cairn " + command + ": " + e.what() + " (see cairn " + command + " --help)");
  }
  return vm;
}

}  // namespace cairn::cli
