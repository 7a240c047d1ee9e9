// Bad input to the real `cairn` binary gets a clear error, a non-zero exit
// and changes nothing: daemon start-up errors (plugins, workflow YAML,
// schema name) and CLI errors (unknown workflow or run, bad JSON, bad id).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "daemon_process.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class DaemonErrors : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (HasFatalFailure()) return;
    // A run that exists before the daemon tries to start; it must not move.
    existing_ = CreateRun().id;
    before_ = RunsSnapshot();
  }

  DaemonOptions Options() const {
    DaemonOptions o = BuiltDaemonOptions(url(), schema(), "e2e.yaml", 2);
    return o;
  }

  std::string RunsSnapshot() const {
    return Sql(
        "SELECT string_agg(id || ':' || status || ':' || version || ':' || updated_at, ',' "
        "ORDER BY id) FROM {s}.runs");
  }

  // Starts a daemon that must refuse to start: non-zero exit, `message` in
  // its log, no worker or definition registered and no run changed.
  void ExpectStartupError(DaemonOptions options, const std::vector<std::string>& messages) {
    DaemonProcess daemon(std::move(options));
    daemon.Start();
    auto status = daemon.WaitExit(20s);
    ASSERT_TRUE(status.has_value()) << "the daemon did not exit:\n" << daemon.Log();
    EXPECT_NE(*status, 0) << daemon.Log();
    EXPECT_LT(*status, 128) << "killed by a signal, not a clean error:\n" << daemon.Log();
    const std::string log = daemon.Log();
    for (const auto& message : messages) {
      EXPECT_NE(log.find(message), std::string::npos) << "expected \"" << message << "\" in:\n"
                                                      << log;
    }
    EXPECT_EQ(log.find(" started:"), std::string::npos) << log;
    ExpectNothingChanged();
  }

  void ExpectNothingChanged() const {
    EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.workers"), 0);
    EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.workflow_definitions"), 0);
    EXPECT_EQ(RunsSnapshot(), before_);
  }

  // Runs `cairn <args> --database-url U --schema S`.
  CommandResult Cli(std::vector<std::string> args) const {
    args.insert(args.end(), {"--database-url", url(), "--schema", schema()});
    return RunCommand(CairnBinary(), args);
  }

  // A definition the SQL API can start runs of, without a daemon.
  void RegisterWorkflow(const std::string& name) {
    Sql("INSERT INTO {s}.workflow_definitions (hash, workflow, version, first_step, definition) "
        "VALUES ('hash-" +
        name + "', '" + name + "', 1, 's1', '{}')");
  }

  std::string existing_;
  std::string before_;
};

TEST_F(DaemonErrors, ConnectionsTheServerCannotHoldAreAStartupError) {
  // The harness's server has max_connections 200. 300 slots and 7 fixed
  // sessions (poller, lease keeper, sweeper, schedules, idempotency, LISTEN,
  // retention; metrics are off).
  DaemonOptions o = Options();
  o.concurrency = 300;
  ExpectStartupError(o, {"this daemon may open 307 database connections", "the server allows 197",
                         "lower worker.concurrency"});
}

TEST_F(DaemonErrors, ASuperuserRoleIsWarnedAbout) {
  // The harness connects as postgres, a superuser.
  DaemonProcess daemon(Options());
  ASSERT_TRUE(daemon.StartAndWaitReady()) << daemon.Log();
  EXPECT_NE(daemon.Log().find("connected as role postgres, a superuser"), std::string::npos)
      << daemon.Log();
  daemon.Terminate();
  EXPECT_EQ(daemon.WaitExit(30s), 0) << daemon.Log();
}

TEST_F(DaemonErrors, PluginBuiltForAnotherAbiIsAStartupError) {
  TempDir plugins("cairn-abi");
  const std::string target = plugins.path().string() + "/wrong_major.so";
  fs::copy_file(BuiltPluginDir() + "/fixtures/wrong_major.so", target);
  ::chmod(target.c_str(), 0755);
  DaemonOptions options = Options();
  options.plugin_directories.push_back(plugins.path());
  ExpectStartupError(options, {"wrong_major.so", "built for plugin ABI", "rebuild the plugin"});
}

TEST_F(DaemonErrors, MissingPluginDirectoryIsAStartupError) {
  TempDir parent("cairn-missing");
  DaemonOptions options = Options();
  options.plugin_directories = {parent.path().string() + "/no-such-dir"};
  ExpectStartupError(options,
                     {"no such file or directory", parent.path().string() + "/no-such-dir"});
}

TEST_F(DaemonErrors, APluginErrorComesFirstWhenTheDatabaseCannotBeReachedEither) {
  // The daemon connects while its step process loads the plugins; the
  // plugin's error is still the one it reports.
  TempDir parent("cairn-missing");
  DaemonOptions options =
      BuiltDaemonOptions("postgresql://postgres@127.0.0.1:1/postgres", schema(), "e2e.yaml", 2);
  options.plugin_directories = {parent.path().string() + "/no-such-dir"};
  DaemonProcess daemon(std::move(options));
  daemon.Start();
  const auto status = daemon.WaitExit(20s);
  ASSERT_TRUE(status.has_value()) << "the daemon did not exit:\n" << daemon.Log();
  EXPECT_NE(*status, 0) << daemon.Log();
  EXPECT_NE(daemon.Log().find(parent.path().string() + "/no-such-dir"), std::string::npos)
      << daemon.Log();
  EXPECT_EQ(daemon.Log().find("127.0.0.1"), std::string::npos) << daemon.Log();
  ExpectNothingChanged();
}

TEST_F(DaemonErrors, WorldWritablePluginDirectoryIsRefused) {
  TempDir plugins("cairn-writable");
  const std::string target = plugins.path().string() + "/noop.so";
  fs::copy_file(BuiltPluginDir() + "/noop.so", target);
  ::chmod(target.c_str(), 0755);
  ::chmod(plugins.path().c_str(), 0777);
  DaemonOptions options = Options();
  options.plugin_directories = {BuiltPluginDir(), plugins.path()};
  ExpectStartupError(options, {plugins.path(), "writable by others"});
}

TEST_F(DaemonErrors, UnknownStepInWorkflowYamlIsAStartupError) {
  TempDir workflows("cairn-unknown-step");
  const std::string file = workflows.Write("unknown.yaml", R"(workflows:
  - name: has_typo
    version: 1
    steps:
      - name: first
        run: noop
      - name: second
        run: no_such_step
)");
  DaemonOptions options = Options();
  options.workflow_paths = {file};
  ExpectStartupError(options, {file, "no_such_step", "unknown plugin step", "has_typo"});
}

TEST_F(DaemonErrors, MalformedWorkflowYamlNamesFileAndLine) {
  TempDir workflows("cairn-malformed");
  // Line 5 opens a flow sequence that never closes.
  const std::string file = workflows.Write("broken.yaml", R"(workflows:
  - name: broken
    version: 1
    steps:
      - name: [first
        run: noop
)");
  DaemonOptions options = Options();
  options.workflow_paths = {file};
  DaemonProcess daemon(options);
  daemon.Start();
  auto status = daemon.WaitExit(20s);
  ASSERT_TRUE(status.has_value()) << daemon.Log();
  EXPECT_NE(*status, 0);
  const std::string log = daemon.Log();
  // "file:line" with the line of the error (yaml-cpp may point at 5, 6 or 7).
  EXPECT_TRUE(log.find(file + ":5") != std::string::npos ||
              log.find(file + ":6") != std::string::npos ||
              log.find(file + ":7") != std::string::npos)
      << log;
  ExpectNothingChanged();
}

TEST_F(DaemonErrors, InvalidSchemaNameIsRefusedBeforeAnySql) {
  const std::string bad = "cairn\"; DROP SCHEMA x; --";
  DaemonOptions options = Options();
  options.schema = bad;
  ExpectStartupError(options, {"database.schema"});
  EXPECT_EQ(SqlInt("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'cairn%'"), 0);

  // The CLI refuses it the same way.
  auto migrate = RunCommand(CairnBinary(), {"migrate", "--database-url", url(), "--schema", bad});
  EXPECT_EQ(migrate.exit_code, 2) << migrate.out << migrate.err;
  EXPECT_NE(migrate.err.find("schema"), std::string::npos) << migrate.err;
  EXPECT_EQ(SqlInt("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'cairn%'"), 0);
}

TEST_F(DaemonErrors, StartOfAnUnknownWorkflowExitsThreeNamingIt) {
  auto result = Cli({"start", "no_such_workflow", "--input", "{}"});
  EXPECT_EQ(result.exit_code, 3) << result.out << result.err;
  EXPECT_NE(result.err.find("no_such_workflow"), std::string::npos) << result.err;
  EXPECT_TRUE(result.out.empty()) << result.out;
  ExpectNothingChanged();
}

TEST_F(DaemonErrors, StartWithInvalidJsonInputExitsTwo) {
  RegisterWorkflow("cli_wf");
  for (const std::string input : {"{not json", "[1, 2]", "\"text\""}) {
    SCOPED_TRACE(input);
    auto result = Cli({"start", "cli_wf", "--input", input});
    EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
    EXPECT_NE(result.err.find("--input"), std::string::npos) << result.err;
    EXPECT_TRUE(result.out.empty()) << result.out;
  }
  EXPECT_EQ(RunsSnapshot(), before_);
}

TEST_F(DaemonErrors, ShowOfAnUnknownRunExitsThreeAndOfAMalformedIdTwo) {
  const std::string unknown = "2f1b7c1e-9d4a-4c55-8a43-5b7f0d6f9e21";
  auto missing = Cli({"show", unknown, "--json"});
  EXPECT_EQ(missing.exit_code, 3) << missing.out << missing.err;
  EXPECT_NE(missing.err.find(unknown), std::string::npos) << missing.err;

  auto malformed = Cli({"show", "not-a-uuid'; --", "--json"});
  EXPECT_EQ(malformed.exit_code, 2) << malformed.out << malformed.err;
  EXPECT_TRUE(malformed.out.empty()) << malformed.out;

  auto existing = Cli({"show", existing_, "--json"});
  EXPECT_EQ(existing.exit_code, 0) << existing.err;
  EXPECT_NE(existing.out.find(existing_), std::string::npos) << existing.out;
  EXPECT_EQ(RunsSnapshot(), before_);
}

TEST_F(DaemonErrors, StartWithTheSameKeyTwicePrintsTheSameId) {
  RegisterWorkflow("cli_wf");
  auto first = Cli({"start", "cli_wf", "--input", R"({"n": 1})", "--key", "order-42"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto second = Cli({"start", "cli_wf", "--input", R"({"n": 2})", "--key", "order-42"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_FALSE(first.out.empty());
  EXPECT_EQ(first.out, second.out);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE run_key = 'order-42'"), 1);
  // The first start's input stands.
  EXPECT_EQ(Sql("SELECT input->>'n' FROM {s}.runs WHERE run_key = 'order-42'"), "1");
  // The second says on stderr that no run was started; --json says which.
  EXPECT_TRUE(first.err.empty()) << first.err;
  EXPECT_NE(second.err.find("key order-42 is held by run"), std::string::npos) << second.err;
  auto json = Cli({"start", "cli_wf", "--key", "order-42", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json reported = Json::parse(json.out);
  EXPECT_EQ(reported["id"].get<std::string>() + "\n", first.out);
  EXPECT_EQ(reported["created"], false);
}

TEST_F(DaemonErrors, AnUnfinishedKeyScopeStartsANewRunOnceTheLastOneFinished) {
  RegisterWorkflow("cli_wf");
  const std::vector<std::string> start = {"start",       "cli_wf",     "--key", "tenant-7",
                                          "--key-scope", "unfinished", "--json"};
  auto first = Cli(start);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(Json::parse(first.out)["created"], true);
  auto held = Cli(start);
  ASSERT_EQ(held.exit_code, 0) << held.err;
  EXPECT_EQ(Json::parse(held.out)["created"], false);
  EXPECT_EQ(Json::parse(held.out)["id"], Json::parse(first.out)["id"]);
  Sql("UPDATE {s}.runs SET status = 'completed', finished_at = now() WHERE run_key = 'tenant-7'");
  auto next = Cli(start);
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_EQ(Json::parse(next.out)["created"], true);
  EXPECT_NE(Json::parse(next.out)["id"], Json::parse(first.out)["id"]);
  auto shown = Cli({"show", Json::parse(next.out)["id"].get<std::string>(), "--json"});
  EXPECT_EQ(Json::parse(shown.out)["key_scope"], "unfinished") << shown.out;
}

TEST_F(DaemonErrors, ABadKeyScopeExitsTwoAndStartsNothing) {
  RegisterWorkflow("cli_wf");
  const std::string before = RunsSnapshot();
  auto unknown = Cli({"start", "cli_wf", "--key", "k", "--key-scope", "sometimes"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.err;
  EXPECT_NE(unknown.err.find("--key-scope must be forever or unfinished, got \"sometimes\""),
            std::string::npos)
      << unknown.err;
  auto keyless = Cli({"start", "cli_wf", "--key-scope", "unfinished"});
  EXPECT_EQ(keyless.exit_code, 2) << keyless.err;
  EXPECT_NE(keyless.err.find("--key-scope needs --key"), std::string::npos) << keyless.err;
  EXPECT_EQ(RunsSnapshot(), before);
}

}  // namespace
}  // namespace cairn::test
