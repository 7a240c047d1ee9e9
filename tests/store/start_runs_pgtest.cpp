// start_runs, the set-based start of the SQL API, against a real PostgreSQL:
// one run per input in their order, with the options start_run gives a run;
// keys that are taken (by an earlier run or an earlier input of the same
// call) name the run that holds them, in either scope; one refused input
// refuses the call.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using ::testing::HasSubstr;

class StartRuns : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (HasFatalFailure()) return;
    Sql("INSERT INTO {s}.workflow_definitions (hash, workflow, version, first_step, definition) "
        "VALUES ('h1', 'wf', 1, 's1', '{\"queue\": \"mail\", \"deadline_ms\": 60000}')");
  }

  // Calls start_runs(args) and keeps its rows, numbered in their order, in
  // the table `started` (run_id, created, n): a statement that calls it
  // cannot see the runs it inserted, the next one can.
  void Start(const std::string& args) {
    Sql("DROP TABLE IF EXISTS {s}.started; CREATE TABLE {s}.started AS SELECT * FROM "
        "{s}.start_runs(" +
        args + ") WITH ORDINALITY AS s(run_id, created, n)");
  }

  // The error start_runs(args) raises; fails the test when it raises none.
  std::string Refusal(const std::string& args) {
    try {
      Sql("SELECT count(*) FROM {s}.start_runs(" + args + ")");
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    ADD_FAILURE() << "start_runs(" << args << ") was accepted";
    return "";
  }
};

TEST_F(StartRuns, StartsOneRunPerInputInTheirOrderAsStartRunWould) {
  Start("'wf', '[{\"n\": 1}, {\"n\": 2}, {\"n\": 3}]', p_priority => 4");
  EXPECT_EQ(Sql("SELECT string_agg(created::text || ' ' || (r.input->>'n'), ',' ORDER BY s.n) "
                "FROM {s}.started s JOIN {s}.runs r ON r.id = s.run_id"),
            "true 1,true 2,true 3");
  const std::string single = Sql("SELECT {s}.start_run('wf', '{\"n\": 0}', p_priority => 4)");
  // Every run of the call is what start_run makes of the same options.
  const std::string columns =
      "definition_hash, definition_version, queue, priority, cursor, status, key_scope, "
      "deadline_at - run_at";
  EXPECT_EQ(SqlInt("SELECT count(DISTINCT (" + columns + ")) FROM {s}.runs"), 1);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 4);
  EXPECT_EQ(RunColumn(single,
                      "queue || ' ' || priority || ' ' || cursor || ' ' || "
                      "(deadline_at - run_at)"),
            "mail 4 s1 00:01:00");
  EXPECT_EQ(Sql("SELECT count(*) FROM {s}.start_runs('wf', '[]')"), "0");
}

TEST_F(StartRuns, ATakenKeyNamesItsHolderEvenAnEarlierInputOfTheSameCall) {
  const std::string held = Sql("SELECT {s}.start_run('wf', p_key => 'a')");
  Start("'wf', '[{}, {}, {}, {}]', ARRAY['a', 'b', 'b', NULL]");
  EXPECT_EQ(Sql("SELECT string_agg(coalesce(r.run_key, '-') || ' ' || created, ',' ORDER BY s.n) "
                "FROM {s}.started s JOIN {s}.runs r ON r.id = s.run_id"),
            "a false,b true,b false,- true");
  EXPECT_EQ(Sql("SELECT count(DISTINCT run_id) FROM {s}.started WHERE n IN (2, 3)"), "1");
  EXPECT_EQ(Sql("SELECT run_id FROM {s}.start_runs('wf', '[{}]', ARRAY['a'])"), held);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 3);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE run_key = 'b'"), 1);
}

TEST_F(StartRuns, AnUnfinishedKeyStartsANewRunOnceItsHolderFinished) {
  const std::string first = Sql(
      "SELECT run_id FROM {s}.start_runs('wf', '[{}]', ARRAY['t'], p_key_scope => 'unfinished')");
  EXPECT_EQ(Sql("SELECT run_id::text || ' ' || created FROM {s}.start_runs('wf', '[{}]', "
                "ARRAY['t'], p_key_scope => 'unfinished')"),
            first + " false");
  CommitStatus(first, RunStatus::kCompleted);
  EXPECT_EQ(Sql("SELECT created FROM {s}.start_runs('wf', '[{}]', ARRAY['t'], "
                "p_key_scope => 'unfinished')"),
            "t");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE run_key = 't'"), 2);
}

TEST_F(StartRuns, OneRefusedInputRefusesTheWholeCall) {
  EXPECT_THAT(Refusal("'wf', '[{}, 3]'"),
              HasSubstr("run input 2 must be a JSON object, got number"));
  EXPECT_THAT(Refusal("'wf', '{}'"), HasSubstr("inputs must be a JSON array, got object"));
  EXPECT_THAT(Refusal("'wf', '[{}, {}]', ARRAY['a']"), HasSubstr("1 run keys for 2 inputs"));
  EXPECT_THAT(Refusal("'wf', '[{}, {}]', ARRAY['a', '']"), HasSubstr("the run key is empty"));
  EXPECT_THAT(Refusal("'nope', '[{}]'"), HasSubstr("unknown workflow \"nope\""));
  EXPECT_THAT(Refusal("'wf', '[{}]', p_key_scope => 'sometimes'"),
              HasSubstr("the key scope must be forever or unfinished"));
  Sql("UPDATE {s}.limits SET value = 20 WHERE name = 'max_input_bytes'");
  EXPECT_THAT(Refusal("'wf', '[{}, {\"long\": \"0123456789abcdef\"}, {}]'"),
              HasSubstr("the input of run 2 is 28 bytes, over the limit of 20 bytes"));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 0);
}

// Run ids are version 7 UUIDs: the RFC's version and variant, the start's
// millisecond in their first 48 bits, increasing from one start to the next.
TEST_F(StartRuns, RunIdsAreTimeOrderedVersion7Uuids) {
  for (int i = 0; i < 5; ++i) Sql("SELECT {s}.start_run('wf'); SELECT pg_sleep(0.002)");
  Start("'wf', '[{}, {}, {}]'");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE substr(id::text, 15, 1) = '7' "
                   "AND substr(id::text, 20, 1) IN ('8', '9', 'a', 'b')"),
            8);
  // The first 48 bits are the Unix time of the start, in milliseconds.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE abs(('x' || lpad(replace(substr(id::text, "
                   "1, 13), '-', ''), 16, '0'))::bit(64)::bigint - "
                   "extract(epoch FROM created_at) * 1000) < 1000"),
            8);
  EXPECT_TRUE(
      SqlBool("SELECT array_agg(id ORDER BY id) = array_agg(id ORDER BY created_at, id) "
              "FROM {s}.runs WHERE run_key IS NULL AND input = '{}' AND created_at < "
              "(SELECT max(created_at) FROM {s}.runs)"));
}

// The id's default is planned with the statement that inserts, not parsed
// and planned again at every start: the planner inlines the function.
TEST_F(StartRuns, TheRunIdsFunctionIsInlinedIntoItsCaller) {
  const std::string plan =
      Sql("CREATE FUNCTION pg_temp.plan() RETURNS SETOF text LANGUAGE plpgsql AS $$ BEGIN "
          "RETURN QUERY EXPLAIN (VERBOSE, COSTS OFF) SELECT {s}.time_ordered_uuid(); END $$; "
          "SELECT string_agg(line, ' ') FROM pg_temp.plan() AS line");
  EXPECT_THAT(plan, HasSubstr("gen_random_uuid()"));
  EXPECT_THAT(plan, ::testing::Not(HasSubstr("time_ordered_uuid")));
}

}  // namespace
}  // namespace cairn::test
