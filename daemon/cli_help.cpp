// How cairn describes itself: `cairn version`, `cairn help`, the usage lines,
// each subcommand's --help and the manual page cairn(1), all made from the
// subcommand table (cli.hpp) so that they cannot disagree with the parser.
// The manual names the package's paths; installing rewrites them for other
// layouts (cmake/InstallLayout.cmake).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "errors.hpp"

namespace cairn::cli {

namespace {

std::string Upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return text;
}

// "Show one run": a summary as a sentence's start.
std::string Capitalized(std::string text) {
  if (!text.empty()) text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
  return text;
}

// The names of the connection options, which the manual lists once.
std::set<std::string> ConnectionOptionNames() {
  std::set<std::string> names;
  const po::options_description connection = ConnectionOptions();
  for (const auto& option : connection.options()) names.insert(option->long_name());
  return names;
}

// Text for a roff line: backslashes escaped, and a leading dot or quote
// kept from being read as a request.
std::string Roff(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else {
      out += c;
    }
  }
  if (!out.empty() && (out.front() == '.' || out.front() == '\'')) out.insert(0, "\\&");
  return out;
}

// Text that must not hyphenate or turn "-" into a typographic hyphen:
// option names, command lines.
std::string RoffLiteral(const std::string& text) {
  std::string out;
  for (char c : Roff(text)) {
    if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  return out;
}

// ".TP" entries for options: "--name VALUE" (and "-c", when it has a short
// form), then the description with its default.
void ManualOptions(std::ostream& out,
                   const std::vector<boost::shared_ptr<po::option_description>>& options) {
  for (const auto& option : options) {
    out << ".TP\n";
    const std::string short_name =
        option->canonical_display_name(po::command_line_style::allow_dash_for_short);
    if (short_name.size() == 2 && short_name[0] == '-' && short_name[1] != '-') {
      out << "\\fB" << RoffLiteral(short_name) << "\\fR, ";
    }
    out << R"(\fB\-\-)" << RoffLiteral(option->long_name()) << "\\fR";
    // "VALUE" or "VALUE (=default)", as --help prints it.
    if (option->semantic()->max_tokens() > 0) {
      out << " \\fI" << RoffLiteral(option->semantic()->name()) << "\\fR";
    }
    out << "\n" << Roff(option->description()) << "\n";
  }
}

std::string ManualDate() {
  // Reproducible builds set SOURCE_DATE_EPOCH; anything else gets today.
  std::time_t when = std::time(nullptr);
  if (const char* epoch = std::getenv("SOURCE_DATE_EPOCH"); epoch != nullptr && *epoch != '\0') {
    when = static_cast<std::time_t>(std::strtoll(epoch, nullptr, 10));
  }
  std::tm tm{};
  gmtime_r(&when, &tm);
  std::ostringstream date;
  date << std::put_time(&tm, "%Y-%m-%d");
  return date.str();
}

}  // namespace

std::string ArgumentName(const Argument& argument) {
  return argument.required ? Upper(argument.name) : "[" + Upper(argument.name) + "]";
}

std::string UsageLine(const Subcommand& command) {
  std::string line = "usage: cairn " + command.name;
  for (const Argument& argument : command.arguments) line += " " + ArgumentName(argument);
  return line + " [options]";
}

void PrintUsage(std::ostream& out) {
  out << "usage: cairn <command> [arguments] [options]\n\ncommands:\n";
  std::vector<std::pair<std::string, const Subcommand*>> listed;
  size_t widest = 0;
  for (const auto& command : Subcommands()) {
    if (command.internal) continue;
    std::string synopsis = command.name;
    for (const Argument& argument : command.arguments) synopsis += " " + ArgumentName(argument);
    widest = std::max(widest, synopsis.size());
    listed.emplace_back(std::move(synopsis), &command);
  }
  for (const auto& [synopsis, command] : listed) {
    out << "  " << std::left << std::setw(static_cast<int>(widest + 2)) << synopsis
        << command->summary << "\n";
  }
  out << "\nrun 'cairn <command> --help' for a command's options, 'man cairn' for more\n";
}

void PrintCommandHelp(const Subcommand& command, std::ostream& out) {
  out << UsageLine(command) << "\n\n" << Capitalized(command.summary) << ".\n\n";
  if (!command.arguments.empty()) {
    out << "arguments:\n";
    for (const Argument& argument : command.arguments) {
      out << "  " << std::left << std::setw(22) << ArgumentName(argument) << argument.help << "\n";
    }
    out << "\n";
  }
  po::options_description options = command.options();
  options.add_options()("help,h", "show this help");
  out << options;
}

void PrintManual(std::ostream& out) {
  const std::set<std::string> connection = ConnectionOptionNames();
  out << ".TH CAIRN 1 \"" << ManualDate() << "\" \"cairn " << CAIRN_VERSION
      << "\" \"User Commands\"\n"
      << ".SH NAME\n"
      << "cairn \\- durable workflow worker daemon for PostgreSQL\n"
      << ".SH SYNOPSIS\n"
      << ".B cairn\n.I command\n.RI [ arguments ]\n.RI [ options ]\n"
      << ".br\n.B cairn \\-\\-version\n"
      << ".br\n.B cairn help\n.RI [ command ]\n"
      << ".SH DESCRIPTION\n"
      << "A fleet of \\fBcairn run\\fR daemons executes multi-step workflows whose steps come "
         "from shared-object plugins.\n"
         "Every step boundary is a checkpoint committed to PostgreSQL together with the step's "
         "audit events, so a run survives crashes of workers, of the network and of the "
         "database, and is never executed by two workers at once.\n"
         ".PP\n"
         "The other commands start, inspect, signal, cancel and retry runs, and manage the "
         "schema.\n"
         "Where their output is data, \\fB\\-\\-json\\fR prints it for scripts.\n"
      << ".SH COMMANDS\n";
  for (const auto& command : Subcommands()) {
    if (command.internal) continue;
    out << ".SS \"" << command.name << "\"\n.B cairn " << RoffLiteral(command.name) << "\n";
    for (const Argument& argument : command.arguments) {
      if (argument.required) {
        out << ".I " << Upper(argument.name) << "\n";
      } else {
        out << ".RI [ " << Upper(argument.name) << " ]\n";
      }
    }
    out << ".RI [ options ]\n.PP\n" << Roff(Capitalized(command.summary)) << ".\n";
    std::vector<boost::shared_ptr<po::option_description>> own;
    bool connects = false;
    const po::options_description options = command.options();
    for (const auto& option : options.options()) {
      if (connection.count(option->long_name()) > 0) {
        connects = true;
      } else {
        own.push_back(option);
      }
    }
    for (const Argument& argument : command.arguments) {
      out << ".TP\n\\fI" << Upper(argument.name) << "\\fR\n" << Roff(argument.help) << "\n";
    }
    ManualOptions(out, own);
    if (connects) {
      out << ".PP\nAnd the connection options (see \\fBCONNECTION OPTIONS\\fR).\n";
    }
  }
  out << ".SH CONNECTION OPTIONS\n"
         "Every command that connects to the database takes these.\n"
         "Flags beat the environment, which beats the configuration file.\n";
  ManualOptions(out, ConnectionOptions().options());
  out << ".SH ENVIRONMENT\n"
         "Every configuration key can be set from the environment: \\fBCAIRN_\\fR and the key's "
         "path in upper case with dots as underscores (\\fBworker.concurrency\\fR is "
         "\\fBCAIRN_WORKER_CONCURRENCY\\fR); lists and mappings in YAML flow style "
         "(\\fBCAIRN_WORKER_QUEUES='[default, mail]'\\fR). The environment beats the "
         "configuration file and its drop-ins, flags beat the environment, and "
         "\\fBcairn config show\\fR prints every key with its variable. Among them:\n"
         ".TP\n.B CAIRN_DATABASE_URL\n"
         "the database URL; beats \\fBdatabase.url\\fR, \\fBurl_file\\fR and "
         "\\fBurl_credential\\fR of the configuration file\n"
         ".TP\n.B CAIRN_DATABASE_SCHEMA\nthe schema (\\fBdatabase.schema\\fR; "
         "\\fBCAIRN_SCHEMA\\fR is read too)\n"
         ".TP\n.B CAIRN_WORKER_CONCURRENCY\nexecutor slots (\\fBworker.concurrency\\fR; "
         "\\fBCAIRN_CONCURRENCY\\fR is read too)\n"
         ".TP\n.B CAIRN_LOG_LEVEL\nthe log level (\\fBlog.level\\fR)\n"
         ".TP\n.B CAIRN_METRICS_LISTEN\n"
         "host:port of /metrics (\\fBmetrics.listen\\fR)\n"
         ".TP\n.B CAIRN_HEALTH_LISTEN\n"
         "host:port of /healthz and /readyz (\\fBhealth.listen\\fR)\n"
         ".TP\n.B CREDENTIALS_DIRECTORY\n"
         "set by systemd; \\fBdatabase.url_credential\\fR names a file in it\n"
         ".PP\n"
         "A variable set to the empty string counts as unset.\n"
      << ".SH FILES\n"
         ".TP\n.I /etc/cairn/cairn.yaml\n"
         "the daemon configuration the systemd unit runs \\fBcairn run\\fR with; as shipped, "
         "the reference that documents every key and its default\n"
         ".TP\n.I /etc/cairn/cairn.yaml.d/*.yaml\n"
         "drop-ins read after it in name order, each setting only the keys it names\n"
         ".TP\n.I /etc/cairn/workflows\n"
         "workflow definitions (\\fBworkflows.paths\\fR)\n"
         ".TP\n.I /usr/lib/cairn/plugins\n"
         "the plugins shipped with cairn (\\fBplugins.directories\\fR); cairn loads plugins only "
         "from paths that no other user can write\n"
         ".TP\n.I /etc/cairn/credentials/database\\-url\n"
         "the database URL, which the systemd unit loads as the credential "
         "\\fBdatabase\\-url\\fR\n"
         ".SH EXIT STATUS\n"
         ".TP\n.B 0\nsuccess (\\fBsignal\\fR: delivered)\n"
         ".TP\n.B 1\nruntime failure (database unreachable, benchmark runs failed, ...)\n"
         ".TP\n.B 2\nbad arguments or invalid input; nothing changed\n"
         ".TP\n.B 3\nnot found: unknown run or workflow; \\fBsignal\\fR: no wait with this key "
         "yet (the signal is kept in the inbox)\n"
         ".TP\n.B 4\nconflict: the object is in the wrong state\n"
         ".TP\n.B 5\nalready done: nothing changed\n"
         ".TP\n.B 6\nexpired: \\fBsignal\\fR to a wait that timed out; nothing changed\n"
         ".SH SEE ALSO\n"
         ".BR systemctl (1),\n.BR systemd.exec (5),\n.BR systemd\\-creds (1)\n"
         ".PP\n"
         "README.md and operations.md in /usr/share/doc/cairn, and the reference configuration "
         "in /usr/share/doc/cairn/examples/cairn.yaml.\n";
}

po::options_description VersionOptions() { return po::options_description("options"); }

int RunVersion(const std::vector<std::string>& args) {
  Parse("version", args);
  std::cout << "cairn " << CAIRN_VERSION << "\n";
  return kExitOk;
}

po::options_description HelpOptions() {
  po::options_description options("options");
  options.add_options()("man", "print the manual page cairn(1) as roff (man -l - reads it)");
  return options;
}

int RunHelp(const std::vector<std::string>& args) {
  auto vm = Parse("help", args);
  if (vm.count("man")) {
    PrintManual(std::cout);
    return kExitOk;
  }
  if (!vm.count("command")) {
    PrintUsage(std::cout);
    return kExitOk;
  }
  const std::string name = vm["command"].as<std::string>();
  const Subcommand* command = FindSubcommand(name);
  if (command == nullptr) {
    throw InvalidArgumentError("no command \"" + name + "\"; 'cairn help' lists them");
  }
  PrintCommandHelp(*command, std::cout);
  return kExitOk;
}

}  // namespace cairn::cli
