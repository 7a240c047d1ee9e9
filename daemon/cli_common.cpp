// Option parsing shared by all subcommands: the connection options and
// Parse, which reads a subcommand's options and arguments from the table.
#include <iostream>

#include "cli.hpp"

namespace cairn::cli {

po::options_description ConnectionOptions() {
  po::options_description options("connection");
  options.add_options()("config,c", po::value<std::string>()->value_name("FILE"),
                        "the daemon's YAML configuration file")(
      "database-url", po::value<std::string>()->value_name("URL"),
      "PostgreSQL connection URI or libpq string (default: $CAIRN_DATABASE_URL)")(
      "schema", po::value<std::string>()->value_name("NAME"),
      "schema holding cairn's tables (default: $CAIRN_SCHEMA, the config file's, or cairn)");
  return options;
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

po::variables_map Parse(const std::string& command, const std::vector<std::string>& args) {
  const Subcommand* subcommand = FindSubcommand(command);
  if (subcommand == nullptr) throw std::logic_error("Parse: no subcommand " + command);
  po::options_description all = subcommand->options();
  all.add_options()("help,h", "show this help");
  // Positional arguments are options too (so that vm holds them), but their
  // help is the "arguments" section, not a --flag of their own.
  po::options_description arguments;
  po::positional_options_description positional;
  for (const Argument& argument : subcommand->arguments) {
    auto* value = po::value<std::string>();
    if (argument.required) value->required();
    arguments.add_options()(argument.name.c_str(), value, argument.help.c_str());
    positional.add(argument.name.c_str(), 1);
  }
  po::options_description parsed;
  parsed.add(all).add(arguments);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(parsed).positional(positional).run(), vm);
    // --help wins over missing required arguments, so it is checked first.
    if (vm.count("help")) {
      PrintCommandHelp(*subcommand, std::cout);
      throw UsageError("");
    }
    for (const Argument& argument : subcommand->arguments) {
      if (argument.required && !vm.count(argument.name)) {
        throw po::error("missing argument " + ArgumentName(argument));
      }
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError("cairn " + command + ": " + e.what() + "\n" + UsageLine(*subcommand) +
                     " (see cairn " + command + " --help)");
  }
  return vm;
}

}  // namespace cairn::cli
