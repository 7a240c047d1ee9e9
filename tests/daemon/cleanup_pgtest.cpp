// `cairn cleanup` against a real PostgreSQL: it deletes what finished longer
// ago than asked (runs with their history, waits, expired idempotency keys),
// keeps the rest, says what it removed, and stands aside while a worker of
// the fleet holds the retention lock.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "daemon_process.hpp"
#include "pg_session.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using Json = nlohmann::json;

class Cleanup : public StoreTest {
 protected:
  CommandResult Cli(std::vector<std::string> args) const {
    args.insert(args.end(), {"--database-url", url(), "--schema", schema()});
    return RunCommand(CairnBinary(), args);
  }

  // count runs finished `age` ago, each with two history events.
  void Finished(int count, const std::string& age, const std::string& workflow) {
    Sql("INSERT INTO {s}.runs (workflow, definition_version, definition_hash, status, "
        "finished_at) SELECT '" +
        workflow + "', 1, 'h', 'completed', now() - interval '" + age +
        "' FROM generate_series(1, " + std::to_string(count) + ")");
    Sql("INSERT INTO {s}.run_events (run_id, kind) SELECT id, k FROM {s}.runs, "
        "unnest(ARRAY['started', 'completed']) k WHERE workflow = '" +
        workflow + "'");
  }
};

TEST_F(Cleanup, DeletesWhatFinishedLongerAgoAndSaysWhat) {
  Finished(2500, "3 days", "old");
  Finished(10, "1 hour", "recent");
  CreateRun("unfinished");
  Sql("INSERT INTO {s}.idempotency_keys (key, status, expires_at) "
      "VALUES ('k1', 'in_progress', now() - interval '1 minute')");

  const CommandResult result = Cli({"cleanup", "--older-than", "1d", "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const Json counts = Json::parse(result.out);
  EXPECT_EQ(counts["runs"], 2500);
  EXPECT_EQ(counts["events"], 5000);
  EXPECT_EQ(counts["idempotency_keys"], 1);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE workflow = 'old'"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE workflow = 'recent'"), 10);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE workflow = 'unfinished'"), 1);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events"), 20);

  const CommandResult again = Cli({"cleanup", "--older-than", "1d"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("deleted 0 runs"), std::string::npos) << again.out;
}

TEST_F(Cleanup, StandsAsideWhileAWorkerHoldsTheRetentionLock) {
  Finished(5, "3 days", "old");
  PgSession worker(url());
  ASSERT_EQ(
      worker.Value("SELECT pg_try_advisory_lock(hashtextextended($1 || ':task:retention', 0))",
                   {schema()}),
      "t");
  const CommandResult result = Cli({"cleanup", "--older-than", "1d"});
  EXPECT_EQ(result.exit_code, 4) << result.out << result.err;
  EXPECT_NE(result.err.find("deleting right now"), std::string::npos) << result.err;
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE workflow = 'old'"), 5);
}

TEST_F(Cleanup, WithoutARetentionItAsksWhatToDelete) {
  const CommandResult result = Cli({"cleanup", "--older-than", "0"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--older-than"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace cairn::test
