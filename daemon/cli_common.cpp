// Option parsing and output helpers shared by all subcommands: the
// connection options, Parse, which reads a subcommand's options and arguments
// from the table, and Printable for every line meant for people.
#include <cstdio>
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
      "schema holding cairn's tables (default: $CAIRN_DATABASE_SCHEMA or $CAIRN_SCHEMA, the "
      "config file's, or cairn)");
  return options;
}

store::ConnectionOptions DatabaseOptions(const po::variables_map& vm,
                                         const std::string& application_name) {
  return ConnectionFor(LoadDaemonConfig(vm), application_name);
}

namespace {

std::string Escape(const char* format, unsigned value) {
  char text[16];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

// The length of the valid UTF-8 sequence at text[i] (2..4) and its code
// point, or 0 when the bytes there are not one.
size_t DecodeUtf8(std::string_view text, size_t i, char32_t& code_point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t length = 0;
  char32_t value = 0;
  char32_t smallest = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    value = lead & 0x1FU;
    smallest = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    value = lead & 0x0FU;
    smallest = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    value = lead & 0x07U;
    smallest = 0x10000;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0U) != 0x80U) return 0;
    value = (value << 6) | (byte(i + k) & 0x3FU);
  }
  if (value < smallest || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return 0;
  code_point = value;
  return length;
}

// C1 controls, the line and paragraph separators and the bidirectional
// marks, embeddings, overrides and isolates.
bool IsInvisibleControl(char32_t c) {
  return (c >= 0x80 && c <= 0x9F) || c == 0x200E || c == 0x200F || c == 0x2028 || c == 0x2029 ||
         (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

}  // namespace

std::string Printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte < 0x7F) {
      out += static_cast<char>(byte);
      ++i;
    } else if (byte == '\n') {
      out += "\\n";
      ++i;
    } else if (byte == '\r') {
      out += "\\r";
      ++i;
    } else if (byte == '\t') {
      out += "\\t";
      ++i;
    } else if (byte < 0x80) {
      out += Escape("\\x%02x", byte);  // other C0 controls and DEL
      ++i;
    } else {
      char32_t code_point = 0;
      const size_t length = DecodeUtf8(text, i, code_point);
      if (length == 0) {
        out += Escape("\\x%02x", byte);  // not UTF-8: a terminal may read it as C1
        ++i;
      } else if (IsInvisibleControl(code_point)) {
        out += Escape("\\u%04x", static_cast<unsigned>(code_point));
        i += length;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
    }
  }
  return out;
}

void PrintTable(const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::vector<std::string>> cells{header};
  cells.insert(cells.end(), rows.begin(), rows.end());
  for (auto& row : cells) {
    for (auto& cell : row) cell = Printable(cell);
  }
  std::vector<size_t> widths(header.size());
  for (const auto& row : cells) {
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  for (const auto& row : cells) {
    for (size_t c = 0; c < row.size(); ++c) {
      std::cout << row[c];
      if (c + 1 < row.size() && c < widths.size())
        std::cout << std::string(widths[c] - row[c].size() + 2, ' ');
    }
    std::cout << "\n";
  }
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
  // A command line is visible to every user of the machine (ps, /proc).
  if (vm.count("database-url") && DatabaseUrlHasPassword(vm["database-url"].as<std::string>())) {
    std::cerr << "cairn " << command
              << ": warning: the password in --database-url is visible to other users (ps); "
                 "use CAIRN_DATABASE_URL, database.url_file or database.url_credential in the "
                 "config file, or a ~/.pgpass (PGPASSFILE) entry instead\n";
  }
  return vm;
}

}  // namespace cairn::cli
