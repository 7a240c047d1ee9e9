// The least-privilege model against a real PostgreSQL: what each of the
// schema's roles (owner, worker, application, and a role with no grant) may
// do, table-driven, with refusals as SQLSTATE 42501; the SQL API's SECURITY
// DEFINER functions; and migrating as roles that are not superusers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "errors.hpp"
#include "migrate.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using ::testing::HasSubstr;

// A libpq session that reports each statement's SQLSTATE.
class Session {
 public:
  explicit Session(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string error = PQerrorMessage(conn_);
      PQfinish(conn_);
      throw std::runtime_error("connect: " + error);
    }
  }
  ~Session() { PQfinish(conn_); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs sql; "" when it succeeded, else its SQLSTATE, with the message in
  // *message when given.
  std::string State(const std::string& sql, std::string* message = nullptr) {
    PGresult* result = PQexec(conn_, sql.c_str());
    const ExecStatusType status = PQresultStatus(result);
    std::string state;
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      const char* code = PQresultErrorField(result, PG_DIAG_SQLSTATE);
      state = code ? code : "?????";
      if (message) *message = PQresultErrorMessage(result);
    }
    PQclear(result);
    return state;
  }

  // Runs sql as role in a transaction that is rolled back: the SQLSTATE, or
  // "" when the role may.
  std::string StateAs(const std::string& role, const std::string& sql,
                      std::string* message = nullptr) {
    Exec("BEGIN");
    Exec("SET LOCAL ROLE \"" + role + "\"");
    std::string state = State(sql, message);
    Exec("ROLLBACK");
    return state;
  }

  void Exec(const std::string& sql) {
    std::string message;
    if (!State(sql, &message).empty()) throw std::runtime_error(sql + ": " + message);
  }

 private:
  PGconn* conn_;
};

// A connection string for another user of the test server: libpq takes the
// last of repeated keywords, so a query parameter overrides the URI's user.
std::string UrlAs(const std::string& url, const std::string& user) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + "user=" + user;
}

// Drops cluster-wide roles a test created, once the schema is gone.
void DropRoles(const std::vector<std::string>& roles) {
  for (const auto& role : roles) {
    try {
      RunPsql("DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '" + role +
              "') THEN DROP OWNED BY \"" + role + "\"; DROP ROLE \"" + role + "\"; END IF; END $$");
    } catch (const std::exception& e) {
      ADD_FAILURE() << "dropping role " << role << ": " << e.what();
    }
  }
}

class RolesTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (HasFatalFailure()) return;
    owner_ = Sql("SELECT {s}.role_name('owner')");
    worker_ = Sql("SELECT {s}.role_name('worker')");
    app_ = Sql("SELECT {s}.role_name('app')");
    outsider_ = schema() + "_outsider";
    RunPsql("CREATE ROLE \"" + outsider_ + "\" NOLOGIN");
    Sql("INSERT INTO {s}.workflow_definitions (hash, workflow, version, first_step, definition) "
        "VALUES ('h1', 'wf', 1, 's1', '{}')");
    run_ = Sql("SELECT {s}.start_run('wf', '{\"a\": 1}'::jsonb, 'order-1')");
    failed_ = Sql("SELECT {s}.start_run('wf')");
    Sql("UPDATE {s}.runs SET status = 'failed', finished_at = now() - interval '2 days' "
        "WHERE id = '" +
        failed_ + "'");
    session_ = std::make_unique<Session>(url());
  }

  void TearDown() override {
    session_.reset();
    StoreTest::TearDown();
    DropRoles({outsider_, app_, worker_, owner_});
  }

  // Replaces {s}, {run} and {failed} in an operation's SQL.
  std::string Operation(std::string sql) const {
    for (const auto& [placeholder, value] :
         std::vector<std::pair<std::string, std::string>>{{"{run}", run_}, {"{failed}", failed_}}) {
      for (size_t at = sql.find(placeholder); at != std::string::npos;
           at = sql.find(placeholder, at)) {
        sql.replace(at, placeholder.size(), value);
      }
    }
    return InSchema(sql);
  }

  std::string owner_, worker_, app_, outsider_;
  std::string run_, failed_;
  std::unique_ptr<Session> session_;
};

struct RoleCase {
  const char* what;
  const char* sql;
  // Allowed for the owner, the worker, the application, a role with no grant.
  bool owner, worker, app, outsider;
};

// Every role's allowed and refused operations. {run} is a ready run with key
// order-1, {failed} a run that failed two days ago.
const RoleCase kRoleCases[] = {
    {"start a run", "SELECT {s}.start_run('wf', '{\"a\": 2}'::jsonb)", true, true, true, false},
    {"start a run with a key", "SELECT {s}.start_run('wf', '{}'::jsonb, 'order-2')", true, true,
     true, false},
    {"start a run and learn whether it is new",
     "SELECT * FROM {s}.start_run_outcome('wf', '{}'::jsonb, 'order-3', p_key_scope => "
     "'unfinished')",
     true, true, true, false},
    {"signal", "SELECT {s}.signal('payment:1', '{\"ok\": true}'::jsonb)", true, true, true, false},
    {"cancel a run", "SELECT * FROM {s}.cancel_run('{run}', 'test')", true, true, true, false},
    {"retry a run", "SELECT * FROM {s}.retry_run('{failed}')", true, true, true, false},
    {"claim an idempotency key",
     "SELECT * FROM {s}.idempotency_claim('charge-1', 'app-1', interval '1 minute', 'shop')", true,
     true, true, false},
    {"complete an idempotency key",
     "SELECT {s}.idempotency_complete('charge-2', 'app-1', '{}', interval '1 day')", true, true,
     true, false},
    {"fail an idempotency key", "SELECT {s}.idempotency_fail('charge-3', 'app-1', 'declined')",
     true, true, true, false},
    {"read an idempotency key", "SELECT * FROM {s}.idempotency_get('charge-1', 'shop')", true, true,
     true, false},
    {"forge an idempotency result",
     "UPDATE {s}.idempotency_keys SET result = '{}', status = 'completed', completed_at = now()",
     true, true, false, false},
    {"read runs", "SELECT count(*) FROM {s}.runs", true, true, true, false},
    {"read history", "SELECT count(*) FROM {s}.run_events", true, true, true, false},
    {"read waits", "SELECT count(*) FROM {s}.wait_records", true, true, true, false},
    {"read the limits", "SELECT count(*) FROM {s}.limits", true, true, true, false},
    {"forge a completed event",
     "INSERT INTO {s}.run_events (run_id, kind, value) VALUES ('{run}', 'completed', '{}')", true,
     true, false, false},
    {"forge an event through append_events",
     "SELECT {s}.append_events('[{\"run_id\": \"{run}\", \"kind\": \"completed\"}]')", true, true,
     false, false},
    {"mark a run completed",
     "UPDATE {s}.runs SET status = 'completed', finished_at = now() WHERE id = '{run}'", true, true,
     false, false},
    {"insert a run directly",
     "SELECT * FROM {s}.create_run('default', 'wf', 1, 'h1', NULL, 'default', 0, '{}', '{}', "
     "'s1', NULL, NULL)",
     true, true, false, false},
    {"register a definition",
     "INSERT INTO {s}.workflow_definitions (hash, workflow, version, first_step, definition) "
     "VALUES ('h2', 'wf', 2, 's1', '{}')",
     true, true, false, false},
    {"register a worker", "INSERT INTO {s}.workers (id, hostname, pid) VALUES ('w1', 'h', 1)", true,
     true, false, false},
    {"store a signal in the inbox directly",
     "INSERT INTO {s}.signal_inbox (correlation_key, expires_at) VALUES ('k', now())", true, true,
     false, false},
    {"deliver a signal around the caps",
     "SELECT {s}.deliver_signal('k', '{}'::jsonb, interval '1 day')", true, true, false, false},
    {"delete old finished runs (retention)", "SELECT * FROM {s}.delete_finished_runs(24, 100)",
     true, true, false, false},
    {"edit history", "UPDATE {s}.run_events SET kind = 'completed'", true, false, false, false},
    {"delete history", "DELETE FROM {s}.run_events", true, false, false, false},
    {"truncate history", "TRUNCATE {s}.run_events", true, false, false, false},
    {"delete a run (and its history)", "DELETE FROM {s}.runs WHERE id = '{failed}'", true, false,
     false, false},
    {"change a limit", "UPDATE {s}.limits SET value = 1", true, false, false, false},
    {"rewrite the migration record", "DELETE FROM {s}.schema_migrations", true, false, false,
     false},
    {"create a table in the schema", "CREATE TABLE {s}.intruder (a integer)", true, false, false,
     false},
    {"drop the history table", "DROP TABLE {s}.run_events", true, false, false, false},
};

TEST_F(RolesTest, EveryRoleMayDoExactlyItsOperations) {
  for (const RoleCase& c : kRoleCases) {
    const std::string sql = Operation(c.sql);
    const std::pair<std::string, bool> expectations[] = {
        {owner_, c.owner}, {worker_, c.worker}, {app_, c.app}, {outsider_, c.outsider}};
    for (const auto& [role, allowed] : expectations) {
      std::string message;
      const std::string state = session_->StateAs(role, sql, &message);
      if (allowed) {
        EXPECT_EQ(state, "") << role << " should be able to " << c.what << ": " << message;
      } else {
        EXPECT_EQ(state, "42501") << role << " must not be able to " << c.what << ": " << message;
      }
    }
  }
  // Nothing of it stayed: every operation was rolled back.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 2);
  EXPECT_EQ(RunColumn(run_, "status"), "ready");
}

TEST_F(RolesTest, TheApplicationCannotForgeAnEventOrCompleteARun) {
  std::string message;
  EXPECT_EQ(session_->StateAs(app_,
                              InSchema("INSERT INTO {s}.run_events (run_id, kind) VALUES ('" +
                                       run_ + "', 'completed')"),
                              &message),
            "42501");
  EXPECT_THAT(message, HasSubstr("permission denied for table run_events"));
  EXPECT_EQ(
      session_->StateAs(app_,
                        InSchema("UPDATE {s}.runs SET status = 'completed', finished_at = now() "
                                 "WHERE id = '" +
                                 run_ + "'"),
                        &message),
      "42501");
  EXPECT_THAT(message, HasSubstr("permission denied for table runs"));
  // Yet it starts runs through the API, which runs as the owner.
  EXPECT_EQ(session_->StateAs(app_, InSchema("SELECT {s}.start_run('wf')")), "");
}

TEST_F(RolesTest, ApiFunctionsRunAsTheOwnerWithAPinnedSearchPath) {
  const std::string pinned =
      Sql("SELECT 'search_path=pg_catalog, ' || quote_ident('" + schema() + "') || ', pg_temp'");
  for (const char* name : {"start_run", "start_run_outcome", "start_runs", "signal", "cancel_run",
                           "retry_run", "delete_finished_runs", "idempotency_claim",
                           "idempotency_complete", "idempotency_fail", "idempotency_get"}) {
    EXPECT_EQ(
        Sql(std::string("SELECT string_agg(p.prosecdef::text || ' ' || "
                        "pg_get_userbyid(p.proowner) || ' ' || array_to_string(p.proconfig, "
                        "','), ';') FROM pg_proc p WHERE p.pronamespace = '{s}'::regnamespace "
                        "AND p.proname = '") +
            name + "'"),
        "true " + owner_ + " " + pinned)
        << name;
  }
  // Every SECURITY DEFINER function pins its search_path.
  EXPECT_EQ(Sql("SELECT string_agg(p.proname, ', ') FROM pg_proc p "
                "WHERE p.pronamespace = '{s}'::regnamespace AND p.prosecdef "
                "AND NOT coalesce(p.proconfig @> ARRAY['" +
                pinned + "'], false)"),
            "");
}

TEST_F(RolesTest, NoFunctionOfTheSchemaIsCallableByPublic) {
  EXPECT_EQ(Sql("SELECT string_agg(p.proname, ', ' ORDER BY p.proname) FROM pg_proc p "
                "CROSS JOIN LATERAL aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a "
                "WHERE p.pronamespace = '{s}'::regnamespace AND a.grantee = 0"),
            "");
  // The application may call the API functions and nothing else.
  EXPECT_EQ(Sql("SELECT string_agg(DISTINCT p.proname, ', ' ORDER BY p.proname) FROM pg_proc p "
                "WHERE p.pronamespace = '{s}'::regnamespace "
                "AND has_function_privilege('" +
                app_ + "', p.oid, 'EXECUTE')"),
            "cancel_run, idempotency_claim, idempotency_complete, idempotency_fail, "
            "idempotency_get, retry_run, signal, start_run, start_run_outcome, start_runs");
}

TEST_F(RolesTest, EveryObjectBelongsToTheOwnerRole) {
  EXPECT_EQ(Sql("SELECT string_agg(c.relname, ', ') FROM pg_class c "
                "WHERE c.relnamespace = '{s}'::regnamespace AND pg_get_userbyid(c.relowner) <> '" +
                owner_ + "'"),
            "");
  EXPECT_EQ(Sql("SELECT string_agg(p.proname, ', ') FROM pg_proc p "
                "WHERE p.pronamespace = '{s}'::regnamespace AND pg_get_userbyid(p.proowner) <> '" +
                owner_ + "'"),
            "");
  for (const auto& role : {owner_, worker_, app_}) {
    EXPECT_EQ(Sql("SELECT rolcanlogin FROM pg_roles WHERE rolname = '" + role + "'"), "f") << role;
  }
}

TEST_F(RolesTest, RetentionThroughItsFunctionDeletesOldHistory) {
  Sql("INSERT INTO {s}.run_events (run_id, kind) VALUES ('" + failed_ + "', 'failed')");
  std::string message;
  ASSERT_EQ(session_->State("BEGIN; SET LOCAL ROLE \"" + worker_ + "\"", &message), "") << message;
  EXPECT_EQ(session_->State(InSchema("SELECT * FROM {s}.delete_finished_runs(24, 100)"), &message),
            "")
      << message;
  session_->Exec("COMMIT");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE id = '" + failed_ + "'"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + failed_ + "'"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE id = '" + run_ + "'"), 1);
}

TEST_F(RolesTest, LaterTablesAndFunctionsFollowTheDefaultPrivileges) {
  // What a later migration creates as the owner: a table the worker may
  // change, a function nobody else may call.
  session_->Exec("BEGIN");
  session_->Exec("SET LOCAL ROLE \"" + owner_ + "\"");
  session_->Exec(InSchema("CREATE TABLE {s}.later (a integer)"));
  session_->Exec(
      InSchema("CREATE FUNCTION {s}.later_fn() RETURNS integer LANGUAGE sql AS "
               "'SELECT 1'"));
  session_->Exec("COMMIT");
  EXPECT_EQ(session_->StateAs(worker_, InSchema("INSERT INTO {s}.later VALUES (1)")), "");
  EXPECT_EQ(session_->StateAs(worker_, InSchema("SELECT {s}.later_fn()")), "");
  EXPECT_EQ(session_->StateAs(app_, InSchema("SELECT * FROM {s}.later")), "42501");
  EXPECT_EQ(session_->StateAs(app_, InSchema("SELECT {s}.later_fn()")), "42501");
  EXPECT_EQ(session_->StateAs(outsider_, InSchema("SELECT {s}.later_fn()")), "42501");
}

// Migrating as LOGIN roles that are not superusers.
class RoleMigrations : public PgTest {
 protected:
  void TearDown() override {
    std::vector<std::string> roles = created_;
    for (const char* kind : {"app", "worker", "owner"}) roles.push_back(schema() + "_" + kind);
    PgTest::TearDown();
    DropRoles(roles);
  }

  // A LOGIN role of the test's own, with CREATE on the database (to create
  // the schema) and the given attributes.
  std::string LoginRole(const std::string& suffix, const std::string& attributes = "") {
    const std::string role = schema() + "_" + suffix;
    RunPsql("CREATE ROLE \"" + role + "\" LOGIN " + attributes);
    RunPsql("GRANT CREATE ON DATABASE \"" + RunPsql("SELECT current_database()") + "\" TO \"" +
            role + "\"");
    created_.push_back(role);
    return role;
  }

  store::MigrationReport MigrateAs(const std::string& role) {
    store::ConnectionOptions options;
    options.url = UrlAs(url(), role);
    options.schema = schema();
    store::Connection connection(options);
    return store::Migrate(connection);
  }

  std::string Sql(const std::string& text) const {
    std::string out = text;
    for (size_t at = out.find("{s}"); at != std::string::npos; at = out.find("{s}", at)) {
      out.replace(at, 3, "\"" + schema() + "\"");
    }
    return RunPsql(out);
  }

  std::vector<std::string> created_;
};

TEST_F(RoleMigrations, ARoleWithCreateRoleMigratesAndBecomesAMemberOfTheOwner) {
  if (!HarnessOwnsServer()) GTEST_SKIP() << "LOGIN roles need the harness's trust authentication";
  const std::string migrator = LoginRole("mig", "CREATEROLE");
  const auto report = MigrateAs(migrator);
  EXPECT_EQ(report.schema_version, report.latest_version);
  const std::string owner = schema() + "_owner";
  EXPECT_EQ(RunPsql("SELECT pg_has_role('" + migrator + "', '" + owner + "', 'USAGE')"), "t");
  EXPECT_EQ(Sql("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = '{s}.runs'::regclass"),
            owner);
  EXPECT_EQ(RunPsql("SELECT rolsuper FROM pg_roles WHERE rolname = '" + owner + "'"), "f");
  // A second migrate, as the same role, finds nothing to do.
  EXPECT_TRUE(MigrateAs(migrator).applied_now.empty());
}

TEST_F(RoleMigrations, PreCreatedRolesLetAMemberMigrateWithoutCreateRole) {
  if (!HarnessOwnsServer()) GTEST_SKIP() << "LOGIN roles need the harness's trust authentication";
  const std::string migrator = LoginRole("mig");
  for (const char* kind : {"owner", "worker", "app"}) {
    RunPsql("CREATE ROLE \"" + schema() + "_" + kind + "\" NOLOGIN");
  }
  RunPsql("GRANT \"" + schema() + "_owner\" TO \"" + migrator + "\"");
  const auto report = MigrateAs(migrator);
  EXPECT_EQ(report.schema_version, report.latest_version);
  EXPECT_EQ(Sql("SELECT pg_get_userbyid(proowner) FROM pg_proc WHERE oid = "
                "'{s}.start_run(text, jsonb, text, text, integer, timestamptz, text, "
                "integer, interval, text)'::regprocedure"),
            schema() + "_owner");
}

TEST_F(RoleMigrations, WithoutCreateRoleOrRolesTheMigrationSaysWhatToDoAndStops) {
  if (!HarnessOwnsServer()) GTEST_SKIP() << "LOGIN roles need the harness's trust authentication";
  const std::string migrator = LoginRole("mig");
  try {
    MigrateAs(migrator);
    FAIL() << "migrated without the roles";
  } catch (const DatabaseError& e) {
    EXPECT_EQ(e.sqlstate(), "42501") << e.what();
    EXPECT_THAT(e.what(), HasSubstr("0006_roles_limits.sql"));
    EXPECT_THAT(e.what(), HasSubstr("needs the roles " + schema() + "_owner, " + schema() +
                                    "_worker, " + schema() + "_app"));
    EXPECT_THAT(e.what(), HasSubstr("CREATE ROLE"));
    EXPECT_THAT(e.what(), HasSubstr("GRANT"));
  }
  // Versions before 6 are applied; 6 changed nothing.
  EXPECT_EQ(Sql("SELECT max(version) FROM {s}.schema_migrations"), "5");
  EXPECT_EQ(RunPsql("SELECT count(*) FROM pg_roles WHERE rolname LIKE '" + schema() +
                    "\\_%' "
                    "AND NOT rolcanlogin"),
            "0");
  EXPECT_EQ(Sql("SELECT to_regclass('{s}.limits') IS NULL"), "t");
}

TEST_F(RoleMigrations, RoleNamesOfALongSchemaAreShortenedWithAHash) {
  // Two 60-character schema names that differ only at the end: their role
  // names (over 63 bytes as <schema>_worker) must not collide.
  const std::string base = schema() + std::string(59 - schema().size(), 'x');
  std::vector<std::string> names;
  for (const char last : {'a', 'b'}) {
    store::ConnectionOptions options;
    options.url = url();
    options.schema = base + last;
    store::Connection connection(options);
    store::Migrate(connection);
    const std::string worker = RunPsql("SELECT \"" + options.schema + "\".role_name('worker')");
    EXPECT_EQ(worker.size(), 63u) << worker;
    EXPECT_EQ(worker.substr(worker.size() - 7), "_worker") << worker;
    EXPECT_EQ(RunPsql("SELECT count(*) FROM pg_roles WHERE rolname = '" + worker + "'"), "1");
    names.push_back(worker);
    for (const char* kind : {"app", "worker", "owner"}) {
      created_.push_back(RunPsql("SELECT \"" + options.schema + "\".role_name('" + kind + "')"));
    }
    connection.Transact([](store::Tx& tx) { store::DropSchema(tx); });
  }
  EXPECT_NE(names[0], names[1]);
  // DropSchema took the roles with the schema.
  EXPECT_EQ(RunPsql("SELECT count(*) FROM pg_roles WHERE rolname IN ('" + names[0] + "', '" +
                    names[1] + "')"),
            "0");
}

}  // namespace
}  // namespace cairn::test
