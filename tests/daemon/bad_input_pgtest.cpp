// Bad input to the real `cairn` binary: empty and oversized keys, control
// characters in what the CLI prints, reserved schema names, JSON from files
// and standard input, caps of the database reported as invalid input, a
// password on the command line, and a jump cycle stopped by the transitions
// limit of a real daemon.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "daemon_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

class BadInput : public DaemonTest {
 protected:
  BadInput() : DaemonTest("tests/workflows/security.yaml") {}

  void SetUp() override {
    DaemonTest::SetUp();
    if (HasFatalFailure()) return;
    // Runs of sec_wait can start without a daemon.
    Sql("INSERT INTO {s}.workflow_definitions (hash, workflow, version, first_step, definition) "
        "VALUES ('sec-wait', 'sec_wait', 1, 'wait', '{}')");
  }

  // `cairn <args>` with nothing added.
  static CommandResult Raw(const std::vector<std::string>& args) {
    return RunCommand(CairnBinary(), args);
  }

  // A shell command line, for standard input from a file.
  CommandResult Shell(const std::string& command_line) const {
    return RunCommand("/bin/sh", {"-c", command_line});
  }

  static std::string ShellQuoted(const std::string& text) {
    std::string out = "'";
    for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  }

  std::string Flags() const {
    return " --database-url " + ShellQuoted(url()) + " --schema " + ShellQuoted(schema());
  }

  int64_t Runs() const { return SqlInt("SELECT count(*) FROM {s}.runs"); }
};

TEST_F(BadInput, EmptyAndHugeKeysExitTwoBeforeAnySql) {
  const std::string huge(10000, 'k');
  const struct {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"start", "sec_wait", "--key", ""}, "--key is empty"},
      {{"start", "sec_wait", "--key", huge}, "--key is 10000 bytes, over the limit of 512 bytes"},
      {{"signal", ""}, "the correlation key is empty"},
      {{"signal", huge}, "the correlation key is 10000 bytes, over the limit of 512 bytes"},
  };
  for (const auto& c : cases) {
    const CommandResult result = Cli(c.args);
    EXPECT_EQ(result.exit_code, 2) << c.message << ": " << result.err;
    EXPECT_THAT(result.err, HasSubstr(c.message));
    EXPECT_THAT(result.err, Not(HasSubstr("ERROR")));  // no raw SQL error
  }
  EXPECT_EQ(Runs(), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 0);
}

TEST_F(BadInput, ControlCharactersAreEscapedInEveryLineForPeople) {
  // A key with a newline, a screen clear, a title change and a C1 CSI.
  const std::string id =
      Sql("SELECT {s}.start_run('sec_wait', '{}'::jsonb, E'evil\\n\\x1b[2J\\x1b]0;pwned\\x07' || "
          "convert_from('\\xc29b'::bytea, 'UTF8') || '31m')");
  Sql("INSERT INTO {s}.run_events (run_id, kind, value) VALUES ('" + id +
      "', E'note\\x1b[1m', '{\"k\": \"a\\u007fb\"}')");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"list"}, {"show", id}, {"history", id}}) {
    const CommandResult result = Cli(args);
    ASSERT_EQ(result.exit_code, 0) << args[0] << ": " << result.err;
    EXPECT_EQ(result.out.find('\x1b'), std::string::npos) << args[0] << ":\n" << result.out;
    EXPECT_EQ(result.out.find('\x07'), std::string::npos) << args[0];
    EXPECT_EQ(result.out.find('\x7f'), std::string::npos) << args[0];
    EXPECT_EQ(result.out.find("\xc2\x9b"), std::string::npos) << args[0];
    if (args[0] != "history") {
      EXPECT_THAT(result.out, HasSubstr("evil\\n\\x1b[2J\\x1b]0;pwned\\x07\\u009b31m")) << args[0];
    } else {
      EXPECT_THAT(result.out, HasSubstr("note\\x1b[1m"));
    }
  }
  // Lines end where the output says they do: one header, one run.
  const CommandResult listed = Cli({"list"});
  EXPECT_EQ(std::count(listed.out.begin(), listed.out.end(), '\n'), 2) << listed.out;

  // --json stays JSON and carries the key as it is.
  const CommandResult json = Cli({"show", id, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(Json::parse(json.out)["key"].get<std::string>(),
            "evil\n\x1b[2J\x1b]0;pwned\x07\xc2\x9b"
            "31m");
}

TEST_F(BadInput, ReservedSchemasAreRefused) {
  for (const std::string name : {"information_schema", "INFORMATION_SCHEMA", "pg_catalog",
                                 "pg_toast", "PG_temp_3", "pg_x", "public", "Public"}) {
    const CommandResult result = Raw({"list", "--database-url", url(), "--schema", name});
    EXPECT_EQ(result.exit_code, 2) << name << ": " << result.err;
    EXPECT_THAT(result.err, HasSubstr("\"" + name + "\" is reserved")) << name;
  }
  const CommandResult migrate = Raw({"migrate", "--database-url", url(), "--schema", "public"});
  EXPECT_EQ(migrate.exit_code, 2) << migrate.err;
  EXPECT_EQ(RunPsql("SELECT count(*) FROM pg_tables WHERE schemaname = 'public' "
                    "AND tablename = 'schema_migrations'"),
            "0");
}

TEST_F(BadInput, JsonComesFromAFileOrStandardInputPastTheArgumentLimit) {
  // 900 KiB: far over the 128 KiB a single argument may hold.
  TempDir dir("cairn-input");
  const std::string blob(900 * 1024, 'x');
  const std::string file = dir.Write("input.json", "{\"blob\": \"" + blob + "\"}");
  const CommandResult from_file = Cli({"start", "sec_wait", "--input", "@" + file});
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  const std::string first = from_file.out.substr(0, 36);
  EXPECT_EQ(SqlInt("SELECT length(input->>'blob') FROM {s}.runs WHERE id = '" + first + "'"),
            static_cast<int64_t>(blob.size()));

  const CommandResult from_stdin = Shell(ShellQuoted(CairnBinary()) + " start sec_wait --input -" +
                                         Flags() + " < " + ShellQuoted(file));
  ASSERT_EQ(from_stdin.exit_code, 0) << from_stdin.err;
  EXPECT_EQ(Runs(), 2);

  const CommandResult payload_file = Cli({"signal", "k-file", "--payload", "@" + file});
  EXPECT_EQ(payload_file.exit_code, 3) << payload_file.err;  // kept in the inbox
  const CommandResult payload_stdin =
      Shell(ShellQuoted(CairnBinary()) + " signal k-stdin --payload -" + Flags() + " < " +
            ShellQuoted(file));
  EXPECT_EQ(payload_stdin.exit_code, 3) << payload_stdin.err;
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox WHERE length(payload->>'blob') = " +
                   std::to_string(blob.size())),
            2);

  // Missing files and oversized ones are refused before any SQL.
  const CommandResult missing =
      Cli({"start", "sec_wait", "--input", "@" + dir.path().string() + "/no"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("cannot read " + dir.path().string() + "/no"));
  const std::string big =
      dir.Write("big.json", "{\"blob\": \"" + std::string(2 << 20, 'x') + "\"}");
  const CommandResult too_big = Cli({"start", "sec_wait", "--input", "@" + big});
  EXPECT_EQ(too_big.exit_code, 2);
  EXPECT_THAT(too_big.err, HasSubstr("--input is more than 1048576 bytes"));
  EXPECT_EQ(Runs(), 2);
}

TEST_F(BadInput, ACapOfTheDatabaseIsInvalidInputForTheCli) {
  Sql("UPDATE {s}.limits SET value = 1000 WHERE name = 'max_input_bytes'");
  const CommandResult result =
      Cli({"start", "sec_wait", "--input", "{\"blob\": \"" + std::string(2000, 'x') + "\"}"});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_THAT(result.err, HasSubstr("the run's input is"));
  EXPECT_THAT(result.err, HasSubstr("max_input_bytes"));
  EXPECT_EQ(Runs(), 0);
}

TEST_F(BadInput, APasswordOnTheCommandLineIsWarnedAbout) {
  const std::string user = "://postgres@";
  const size_t at = url().find(user);
  if (at == std::string::npos) GTEST_SKIP() << "the test server's URL has another form";
  std::string with_password = url();
  with_password.replace(at, user.size(), "://postgres:not-needed@");
  const CommandResult warned = Raw({"list", "--database-url", with_password, "--schema", schema()});
  EXPECT_EQ(warned.exit_code, 0) << warned.err;
  EXPECT_THAT(warned.err, HasSubstr("warning: the password in --database-url is visible"));
  EXPECT_THAT(warned.err, HasSubstr("CAIRN_DATABASE_URL"));
  EXPECT_THAT(warned.err, HasSubstr("PGPASSFILE"));
  EXPECT_THAT(warned.err, Not(HasSubstr("not-needed")));
  const CommandResult quiet = Cli({"list"});
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_THAT(quiet.err, Not(HasSubstr("warning")));
}

TEST_F(BadInput, AJumpCycleFailsWithHistoryLimit) {
  Sql("UPDATE {s}.limits SET value = 200 WHERE name = 'max_transitions_per_run'");
  auto daemon = StartDaemon(2);
  const std::string id = StartRun("sec_loop", {{"target", "spin"}});
  ASSERT_TRUE(WaitForStatus(id, "failed", 30s)) << daemon->Log();
  EXPECT_EQ(RunColumn(id, "transitions"), "201");
  EXPECT_THAT(RunColumn(id, "error"), HasSubstr("max_transitions_per_run"));
  EXPECT_EQ(RunEventCount(id, "failed"), 1);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + id +
                   "' AND kind = 'failed' AND value->>'code' = 'history_limit'"),
            1);
  const CommandResult shown = Cli({"show", id});
  EXPECT_THAT(shown.out, HasSubstr("max_transitions_per_run"));
  Stop(*daemon);
}

}  // namespace
}  // namespace cairn::test
