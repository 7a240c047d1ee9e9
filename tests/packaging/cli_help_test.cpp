// The cairn binary describing itself: --version and `version`, usage lines
// with positional arguments, each subcommand's --help listing the options it
// takes and no others (and the parser refusing the others), `help COMMAND`,
// and the manual page naming every command and option --help shows. Runs the
// built binary; touches no database.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "daemon_process.hpp"

namespace cairn::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

CommandResult Cairn(const std::vector<std::string>& args) {
  return RunCommand(CairnBinary(), args);
}

// The long option names a --help text lists ("--json", "--config", ...).
std::set<std::string> OptionsIn(const std::string& help) {
  std::set<std::string> names;
  static const std::regex kOption(R"(^  (?:-[a-z] \[ )?(--[a-z][a-z-]*))");
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, kOption)) names.insert(match[1]);
  }
  return names;
}

const std::vector<std::string> kCommands = {
    "run",         "migrate", "start",   "show",    "list",      "history", "signal",
    "cancel",      "retry",   "plugins", "bench",   "schedules", "cleanup", "workers",
    "idempotency", "console", "config",  "version", "help"};

TEST(CliUsage, ListsExactlyTheCommandsTheseTestsCheck) {
  // A new command joins kCommands, so its help and manual entry are checked.
  const CommandResult usage = Cairn({"--help"});
  ASSERT_EQ(usage.exit_code, 0);
  std::vector<std::string> listed;
  std::istringstream lines(usage.out);
  bool in_commands = false;
  for (std::string line; std::getline(lines, line);) {
    if (line == "commands:") {
      in_commands = true;
    } else if (in_commands && line.rfind("  ", 0) == 0) {
      listed.push_back(line.substr(2, line.find(' ', 2) - 2));
    } else if (in_commands) {
      break;
    }
  }
  EXPECT_EQ(listed, kCommands);
}

TEST(CliUsage, EverySummaryStartsInOneColumnAfterItsSynopsis) {
  // The longest synopsis ("idempotency ACTION KEY") once ran into its summary.
  const CommandResult usage = Cairn({"--help"});
  ASSERT_EQ(usage.exit_code, 0);
  std::set<size_t> summary_columns;
  std::istringstream lines(usage.out);
  bool in_commands = false;
  for (std::string line; std::getline(lines, line);) {
    if (line == "commands:") {
      in_commands = true;
      continue;
    }
    if (!in_commands || line.rfind("  ", 0) != 0) {
      if (in_commands) break;
      continue;
    }
    const size_t gap = line.find("  ", 2);
    ASSERT_NE(gap, std::string::npos) << "no two spaces after the synopsis: " << line;
    summary_columns.insert(line.find_first_not_of(' ', gap));
  }
  EXPECT_EQ(summary_columns.size(), 1U) << usage.out;
}

TEST(CliVersion, PrintsTheVersionForBothSpellings) {
  const CommandResult flag = Cairn({"--version"});
  const CommandResult command = Cairn({"version"});
  EXPECT_EQ(flag.exit_code, 0);
  EXPECT_EQ(command.exit_code, 0);
  EXPECT_TRUE(std::regex_match(flag.out, std::regex(R"(cairn [0-9]+\.[0-9]+\.[0-9]+\n)")))
      << flag.out;
  EXPECT_EQ(flag.out, command.out);
}

TEST(CliUsage, ShowsPositionalArguments) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"show", "usage: cairn show RUN [options]\n"},
      {"history", "usage: cairn history RUN [options]\n"},
      {"cancel", "usage: cairn cancel RUN [options]\n"},
      {"retry", "usage: cairn retry RUN [options]\n"},
      {"start", "usage: cairn start WORKFLOW [options]\n"},
      {"signal", "usage: cairn signal KEY [options]\n"},
      {"list", "usage: cairn list [options]\n"},
      {"help", "usage: cairn help [COMMAND] [options]\n"},
  };
  for (const auto& [command, usage] : cases) {
    const CommandResult help = Cairn({command, "--help"});
    EXPECT_EQ(help.exit_code, 0) << command;
    EXPECT_THAT(help.out, StartsWith(usage));
  }
  const CommandResult top = Cairn({"--help"});
  EXPECT_EQ(top.exit_code, 0);
  for (const char* synopsis : {"  show RUN ", "  start WORKFLOW ", "  signal KEY ", "  run "}) {
    EXPECT_THAT(top.out, HasSubstr(synopsis));
  }
}

TEST(CliUsage, AMissingArgumentIsNamedWithTheUsageLine) {
  const CommandResult show = Cairn({"show"});
  EXPECT_EQ(show.exit_code, 2);
  EXPECT_EQ(show.err,
            "cairn show: missing argument RUN\n"
            "usage: cairn show RUN [options] (see cairn show --help)\n");
  EXPECT_EQ(show.out, "");
}

TEST(CliUsage, UnknownCommandsAreUsageErrors) {
  const CommandResult unknown = Cairn({"frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("unknown command \"frobnicate\""));
  const CommandResult help = Cairn({"help", "frobnicate"});
  EXPECT_EQ(help.exit_code, 2);
  EXPECT_THAT(help.err, HasSubstr("no command \"frobnicate\""));
  const CommandResult none = Cairn({});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, StartsWith("usage: cairn <command>"));
}

TEST(CliHelp, ListsOnlyTheOptionsThatApply) {
  struct Case {
    std::string command;
    std::set<std::string> has;
    std::set<std::string> lacks;
  };
  const std::set<std::string> connection = {"--config", "--database-url", "--schema"};
  const std::set<std::string> daemon = {"--concurrency", "--worker-id", "--log-level"};
  const std::vector<Case> cases = {
      {"plugins",
       {"--config", "--json"},
       {"--database-url", "--schema", "--concurrency", "--worker-id", "--log-level"}},
      {"run",
       {"--config", "--database-url", "--schema", "--concurrency", "--worker-id", "--log-level"},
       {"--json"}},
      {"bench",
       {"--config", "--database-url", "--concurrency", "--runs"},
       {"--worker-id", "--log-level"}},
      {"show", {"--json", "--config", "--database-url", "--schema"}, daemon},
      {"start", {"--input", "--key", "--database-url"}, {"--workflow", "--concurrency"}},
      {"signal", {"--payload", "--inbox-retention", "--database-url"}, {"--key", "--json"}},
      {"cancel", {"--reason", "--database-url"}, {"--run", "--json", "--concurrency"}},
      {"retry", connection, {"--run", "--json", "--concurrency"}},
      {"migrate", {"--dry-run", "--status", "--database-url"}, {"--json", "--concurrency"}},
      {"schedules", {"--json", "--database-url"}, daemon},
      {"list", {"--workflow", "--stranded", "--repin", "--database-url"}, daemon},
      {"history", {"--after", "--limit", "--json"}, daemon},
      {"version", {}, connection},
      {"help", {"--man"}, connection},
  };
  for (const Case& c : cases) {
    const CommandResult help = Cairn({c.command, "--help"});
    ASSERT_EQ(help.exit_code, 0) << c.command << ": " << help.err;
    const std::set<std::string> options = OptionsIn(help.out);
    for (const auto& option : c.has) {
      EXPECT_EQ(options.count(option), 1u) << c.command << " --help lacks " << option;
    }
    for (const auto& option : c.lacks) {
      EXPECT_EQ(options.count(option), 0u) << c.command << " --help lists " << option;
    }
  }
  // What --help leaves out, the parser refuses.
  const CommandResult plugins = Cairn({"plugins", "--database-url", "postgresql://x/y"});
  EXPECT_EQ(plugins.exit_code, 2);
  EXPECT_THAT(plugins.err, HasSubstr("database-url"));
  const CommandResult show = Cairn({"show", "--concurrency", "3", "x"});
  EXPECT_EQ(show.exit_code, 2);
}

TEST(CliHelp, EveryCommandHasHelpAndTheHelpCommandSaysTheSame) {
  for (const std::string& command : kCommands) {
    const CommandResult flag = Cairn({command, "--help"});
    EXPECT_EQ(flag.exit_code, 0) << command;
    EXPECT_THAT(flag.out, StartsWith("usage: cairn " + command + " "));
    const CommandResult help = Cairn({"help", command});
    EXPECT_EQ(help.exit_code, 0) << command;
    EXPECT_EQ(help.out, flag.out) << command;
  }
}

TEST(CliManual, DocumentsEveryCommandAndEveryOptionOfItsHelp) {
  const CommandResult manual = Cairn({"help", "--man"});
  ASSERT_EQ(manual.exit_code, 0) << manual.err;
  EXPECT_THAT(manual.out, StartsWith(".TH CAIRN 1 "));
  for (const char* section : {".SH NAME\n", ".SH SYNOPSIS\n", ".SH DESCRIPTION\n",
                              ".SH ENVIRONMENT\n", ".SH FILES\n", ".SH EXIT STATUS\n"}) {
    EXPECT_THAT(manual.out, HasSubstr(section));
  }
  EXPECT_THAT(manual.out, HasSubstr("CAIRN_METRICS_LISTEN"));
  for (const std::string& command : kCommands) {
    EXPECT_THAT(manual.out, HasSubstr(".SS \"" + command + "\"\n"));
    for (const std::string& option : OptionsIn(Cairn({command, "--help"}).out)) {
      if (option == "--help") continue;
      std::string roff = "\\fB";
      for (char c : option) roff += c == '-' ? std::string("\\-") : std::string(1, c);
      EXPECT_THAT(manual.out, HasSubstr(roff + "\\fR")) << command << " " << option;
    }
  }
}

TEST(CliManual, IsDatedBySourceDateEpoch) {
  setenv("SOURCE_DATE_EPOCH", "0", 1);
  const CommandResult manual = Cairn({"help", "--man"});
  unsetenv("SOURCE_DATE_EPOCH");
  EXPECT_THAT(manual.out, StartsWith(".TH CAIRN 1 \"1970-01-01\" \"cairn "));
}

}  // namespace
}  // namespace cairn::test
