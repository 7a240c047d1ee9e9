// The least-privilege model end to end: `cairn migrate` as a LOGIN role
// with CREATEROLE (not a superuser), a real `cairn run` daemon as a LOGIN
// member of the worker role, and the CLI as a LOGIN member of the
// application role, driving runs to their end: a wait and its signal, child
// runs, a failure and its retry, a cancel, and retention.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "daemon_process.hpp"
#include "pg_harness.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

class RolesEndToEnd : public PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    if (HasFatalFailure()) return;
    if (!HarnessOwnsServer()) GTEST_SKIP() << "LOGIN roles need the harness's trust authentication";
    migrator_ = Login("mig", "CREATEROLE");
    RunPsql("GRANT CREATE ON DATABASE \"" + RunPsql("SELECT current_database()") + "\" TO \"" +
            migrator_ + "\"");
    const CommandResult migrated = CliAs(migrator_, {"migrate"});
    ASSERT_EQ(migrated.exit_code, 0) << migrated.out << migrated.err;
    worker_ = Login("w", "IN ROLE \"" + schema() + "_worker\"");
    app_ = Login("a", "IN ROLE \"" + schema() + "_app\"");
  }

  void TearDown() override {
    PgTest::TearDown();
    std::vector<std::string> roles = logins_;
    for (const char* kind : {"app", "worker", "owner"}) roles.push_back(schema() + "_" + kind);
    for (const auto& role : roles) {
      RunPsql("DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '" + role +
              "') THEN DROP OWNED BY \"" + role + "\"; DROP ROLE \"" + role + "\"; END IF; END $$");
    }
  }

  std::string Login(const std::string& suffix, const std::string& attributes) {
    const std::string role = schema() + "_" + suffix;
    RunPsql("CREATE ROLE \"" + role + "\" LOGIN " + attributes);
    logins_.push_back(role);
    return role;
  }

  // The test server's URL for another user (libpq takes the last user=).
  std::string UrlAs(const std::string& role) const {
    return url() + (url().find('?') == std::string::npos ? "?" : "&") + "user=" + role;
  }

  CommandResult CliAs(const std::string& role, std::vector<std::string> args) const {
    args.insert(args.end(), {"--database-url", UrlAs(role), "--schema", schema()});
    return RunCommand(CairnBinary(), args);
  }

  std::string Sql(const std::string& text) const {
    std::string out = text;
    for (size_t at = out.find("{s}"); at != std::string::npos; at = out.find("{s}", at)) {
      out.replace(at, 3, "\"" + schema() + "\"");
    }
    return RunPsql(out);
  }

  bool WaitForStatus(const std::string& id, const std::string& status) const {
    return PollUntil(
        [&] { return Sql("SELECT status FROM {s}.runs WHERE id = '" + id + "'") == status; }, 20s);
  }

  // Starts a run as the application; its id.
  std::string Start(const std::vector<std::string>& args) {
    std::vector<std::string> all{"start"};
    all.insert(all.end(), args.begin(), args.end());
    const CommandResult started = CliAs(app_, all);
    EXPECT_EQ(started.exit_code, 0) << started.err;
    std::string id = started.out;
    while (!id.empty() && id.back() == '\n') id.pop_back();
    return id;
  }

  std::string migrator_, worker_, app_;
  std::vector<std::string> logins_;
};

TEST_F(RolesEndToEnd, AWorkerRoleDaemonAndAnApplicationRoleCliDriveRunsToTheEnd) {
  // A run finished 31 days ago: retention (30 days by default) deletes it,
  // history included, through the function the worker may call.
  Sql("INSERT INTO {s}.workflow_definitions (hash, workflow, version, first_step, definition) "
      "VALUES ('old', 'old', 1, 's1', '{}')");
  const std::string old = Sql("SELECT {s}.start_run('old')");
  Sql("UPDATE {s}.runs SET status = 'completed', finished_at = now() - interval '31 days' "
      "WHERE id = '" +
      old + "'");

  DaemonOptions options = BuiltDaemonOptions(UrlAs(worker_), schema(), "security.yaml", 4);
  options.workflow_paths.push_back(SourceDir() + "/tests/workflows/children.yaml");
  options.poll_interval = "100ms";
  options.reaper_interval = "200ms";
  DaemonProcess daemon(options);
  ASSERT_TRUE(daemon.StartAndWaitReady()) << daemon.Log();

  // A wait, and the signal that ends it.
  const std::string waiting = Start({"sec_wait", "--key", "order-1"});
  ASSERT_TRUE(WaitForStatus(waiting, "waiting"));
  const CommandResult signalled =
      CliAs(app_, {"signal", "go:" + waiting, "--payload", "{\"paid\": true}"});
  EXPECT_EQ(signalled.exit_code, 0) << signalled.err;
  ASSERT_TRUE(WaitForStatus(waiting, "completed"));
  EXPECT_EQ(
      Sql("SELECT output->'context'->'go'->>'paid' FROM {s}.runs WHERE id = '" + waiting + "'"),
      "true");

  const CommandResult shown = CliAs(app_, {"show", waiting});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("completed"));
  const CommandResult listed = CliAs(app_, {"list", "--workflow", "sec_wait"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr(waiting));
  const CommandResult history = CliAs(app_, {"history", waiting});
  EXPECT_EQ(history.exit_code, 0) << history.err;
  EXPECT_THAT(history.out, HasSubstr("signalled"));

  // Child runs: each finishing child reports to its parent under the
  // worker role.
  const std::string parent = Start({"ch_parent", "--input",
                                    R"({"children": [{"workflow": "ch_work", "input": {"n": 1}},
                              {"workflow": "ch_work", "input": {"n": 2}}],
                 "child_wait": "all"})"});
  ASSERT_TRUE(WaitForStatus(parent, "completed")) << daemon.Log();
  EXPECT_EQ(Sql("SELECT jsonb_array_length(output->'context'->'children') FROM {s}.runs "
                "WHERE id = '" +
                parent + "'"),
            "2");

  // A failure, and its retry.
  const std::string failing = Start({"sec_fail"});
  ASSERT_TRUE(WaitForStatus(failing, "failed"));
  const CommandResult retried = CliAs(app_, {"retry", failing});
  EXPECT_EQ(retried.exit_code, 0) << retried.err;
  EXPECT_TRUE(PollUntil(
      [&] {
        return Sql("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + failing +
                   "' AND kind = 'failed'") == "2";
      },
      20s));

  // A cancel.
  const std::string cancelled = Start({"sec_wait"});
  ASSERT_TRUE(WaitForStatus(cancelled, "waiting"));
  const CommandResult cancel = CliAs(app_, {"cancel", cancelled});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(Sql("SELECT status FROM {s}.runs WHERE id = '" + cancelled + "'"), "cancelled");

  EXPECT_TRUE(PollUntil(
      [&] { return Sql("SELECT count(*) FROM {s}.runs WHERE id = '" + old + "'") == "0"; }, 20s));
  EXPECT_THAT(daemon.Log(), HasSubstr("retention: deleted 1 runs"));

  daemon.Terminate();
  EXPECT_EQ(daemon.WaitExit(30s), 0) << daemon.Log();
  const std::string log = daemon.Log();
  EXPECT_THAT(log, ::testing::Not(HasSubstr("permission denied"))) << log;
  EXPECT_THAT(log, ::testing::Not(HasSubstr("lease keeper:"))) << log;
  EXPECT_EQ(Sql("SELECT count(*) FROM {s}.workers WHERE id = '" + daemon.worker_id() + "'"), "1");
}

TEST_F(RolesEndToEnd, TheApplicationRoleCannotDoTheWorkersWork) {
  // Repinning runs and listing stranded ones are operations on the worker's
  // tables: refused, with the database's reason, and nothing changes.
  const CommandResult stranded = CliAs(app_, {"list", "--stranded"});
  EXPECT_EQ(stranded.exit_code, 1);
  EXPECT_THAT(stranded.err, HasSubstr("permission denied"));
  const CommandResult repin = CliAs(app_, {"list", "--repin", "a", "b"});
  EXPECT_EQ(repin.exit_code, 1);
  EXPECT_THAT(repin.err, HasSubstr("permission denied"));
  // Nor may it migrate.
  const CommandResult migrate = CliAs(app_, {"migrate"});
  EXPECT_NE(migrate.exit_code, 0);
}

}  // namespace
}  // namespace cairn::test
