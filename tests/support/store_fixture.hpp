// A PgTest whose schema is migrated and reachable through a
// cairn::store::Connection, with helpers to create runs quickly and to read
// the database back through the harness's admin connection.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "migrate.hpp"
#include "pg_harness.hpp"
#include "store.hpp"

namespace cairn::test {

class StoreTest : public PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    connection_ = Open();
    store::Migrate(*connection_);
  }

  void TearDown() override {
    connection_.reset();
    PgTest::TearDown();
  }

  // A new session on the test's schema; generic_plans as the engine's.
  std::unique_ptr<store::Connection> Open(const std::string& application_name = "cairn-test",
                                          bool generic_plans = false) const {
    store::ConnectionOptions options;
    options.url = url();
    options.schema = schema();
    options.application_name = application_name;
    options.generic_plans = generic_plans;
    return std::make_unique<store::Connection>(options);
  }

  store::Connection& conn() { return *connection_; }

  // How often `connection` planned its prepared statement `name`: generic
  // plans, custom plans (pg_prepared_statements).
  static std::pair<int64_t, int64_t> PreparedPlans(store::Connection& connection,
                                                   const std::string& name) {
    const Json plans = connection.Transact([&](store::Tx& tx) {
      return store::ExecuteStepSql(tx,
                                   "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                                   "WHERE name = '" +
                                       name + "'",
                                   nullptr);
    });
    return {plans[0]["generic_plans"].get<int64_t>(), plans[0]["custom_plans"].get<int64_t>()};
  }

  // A setting of the session, as the transaction sees it.
  static std::string Setting(store::Tx& tx, const std::string& name) {
    return store::ExecuteStepSql(tx, "SELECT current_setting('" + name + "') AS value",
                                 nullptr)[0]["value"]
        .get<std::string>();
  }

  // Rows of runs read from the heap by sequential scans and through indexes
  // (pg_stat_xact_user_tables): by `tx`, and by the session's earlier
  // transactions that PostgreSQL has not yet added to its statistics, so a
  // test of one of several transactions compares two readings.
  int64_t RunRowsRead(store::Tx& tx) const {
    return store::ExecuteStepSql(tx,
                                 "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
                                 "AS n FROM pg_stat_xact_user_tables WHERE schemaname = '" +
                                     schema() + "' AND relname = 'runs'",
                                 nullptr)[0]["n"]
        .get<int64_t>();
  }

  // Runs admin SQL in which every {s} stands for the test's quoted schema and
  // returns the first value of the last result as text ("" for none or NULL).
  std::string Sql(const std::string& text) const { return RunPsql(InSchema(text)); }
  int64_t SqlInt(const std::string& text) const { return std::stoll(Sql(text)); }
  bool SqlBool(const std::string& text) const { return Sql(text) == "t"; }

  std::string InSchema(const std::string& text) const {
    std::string out;
    const std::string quoted = "\"" + schema() + "\"";
    for (size_t i = 0; i < text.size(); ++i) {
      if (text.compare(i, 3, "{s}") == 0) {
        out += quoted;
        i += 2;
      } else {
        out += text[i];
      }
    }
    return out;
  }

  // How many wake gate stripes (migration 27) the sessions named
  // `application_name` hold open: their shared advisory locks.
  int64_t OpenGateStripes(const std::string& application_name) const {
    return SqlInt(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE "
        "l.locktype = 'advisory' AND l.mode = 'ShareLock' AND l.granted AND "
        "a.application_name = '" +
        application_name + "'");
  }

  // How many stack locks (session advisory locks) the slots of the daemon
  // `worker_id` hold: one for each run whose step a slot is running. Other
  // daemons on the same server, of tests running alongside, are not counted.
  int64_t StackLocksOfSlots(const std::string& worker_id) const {
    return SqlInt(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE "
        "l.locktype = 'advisory' AND l.granted AND a.application_name LIKE 'cairn slot% " +
        worker_id + "'");
  }

  // The value of a run's column as text, by admin SQL.
  std::string RunColumn(const std::string& run_id, const std::string& column) const {
    return Sql("SELECT " + column + " FROM {s}.runs WHERE id = '" + run_id + "'");
  }

  static NewRun MakeRun(std::string workflow = "orders",
                        std::optional<std::string> key = std::nullopt) {
    NewRun run;
    run.workflow = std::move(workflow);
    run.definition_hash = "hash-1";
    run.key = std::move(key);
    run.input = {{"sku", "A-1"}, {"quantity", 2}};
    run.cursor = "reserve";
    return run;
  }

  cairn::Run CreateRun(const NewRun& run) {
    return conn().Transact([&](store::Tx& tx) { return store::CreateRun(tx, run).run; });
  }

  cairn::Run CreateRun(std::string workflow = "orders",
                       std::optional<std::string> key = std::nullopt) {
    return CreateRun(MakeRun(std::move(workflow), std::move(key)));
  }

  // Commits a checkpoint with the run's current version and returns the new one.
  int64_t CommitStatus(const std::string& run_id, RunStatus status, Json context = Json::object(),
                       std::optional<Json> output = std::nullopt) {
    return conn().Transact([&](store::Tx& tx) {
      auto run = store::GetRun(tx, run_id);
      cairn::Checkpoint c;
      c.run_id = run_id;
      c.expected_version = run->version;
      c.context = std::move(context);
      c.cursor = run->cursor;
      c.status = status;
      c.lease_owner = "worker-1";
      c.output = std::move(output);
      return store::SaveCheckpoint(tx, c).version;
    });
  }

  // A run leased by worker-1 (status running).
  cairn::Run CreateRunningRun(std::string workflow = "orders") {
    cairn::Run run = CreateRun(std::move(workflow));
    CommitStatus(run.id, RunStatus::kRunning);
    return *conn().Transact([&](store::Tx& tx) { return store::GetRun(tx, run.id); });
  }

  WaitRecord SaveWait(const std::string& run_id, const std::string& key,
                      std::optional<int64_t> timeout_ms = std::nullopt) {
    NewWait wait;
    wait.correlation_key = key;
    wait.run_id = run_id;
    wait.event = "payment";
    wait.continuation_step = "ship";
    wait.timeout_step = "refund";
    wait.timeout_ms = timeout_ms;
    return conn().Transact([&](store::Tx& tx) { return store::SaveWait(tx, wait); });
  }

  // Terminates a session from the admin connection and waits until it is gone.
  static void TerminateBackend(int pid) {
    RunPsql("SELECT pg_terminate_backend(" + std::to_string(pid) + ", 10000)");
  }

 private:
  std::unique_ptr<store::Connection> connection_;
};

}  // namespace cairn::test
