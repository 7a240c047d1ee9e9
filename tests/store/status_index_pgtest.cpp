// The runs' status index against a real PostgreSQL (migration 20): it holds
// no running or completed run, so that a claim and a run's end write no
// entry into it, and the readers that count or list runs by status still
// read an index for every status instead of the finished runs, the bulk of
// the table.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>

#include "store_console.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;

class StatusIndex : public StoreTest {
 protected:
  // `count` runs of workflow orders in `status`, created by admin SQL.
  void Seed(const std::string& status, int count) {
    Sql("INSERT INTO {s}.runs (workflow, definition_version, definition_hash, cursor, status, "
        "lease_owner, lease_expires_at, finished_at) "
        "SELECT 'orders', 1, 'hash-1', 'reserve', s, "
        "CASE WHEN s = 'running' THEN 'worker-1' END, "
        "CASE WHEN s = 'running' THEN now() + interval '1 hour' END, "
        "CASE WHEN s IN ('completed', 'failed', 'cancelled', 'compensation_failed') "
        "THEN now() END "
        "FROM (SELECT '" +
        status + "'::text AS s) v, generate_series(1, " + std::to_string(count) + ")");
  }

  // A table of 20 000 completed runs and a few of every live or failed kind.
  void SeedFinishedBulk() {
    Seed("completed", 20000);
    Seed("ready", 4);
    Seed("running", 1);
    Seed("waiting", 2);
    Seed("failed", 3);
    Sql("ANALYZE {s}.runs");
  }

  // The entries one of the runs' indexes holds, live or dead: every entry
  // written since the table was made, as nothing here vacuums it
  // (pgstattuple, installed once in the database).
  int64_t IndexEntries(const std::string& index) {
    Sql("CREATE EXTENSION IF NOT EXISTS pgstattuple");
    const std::string where =
        Sql("SELECT extnamespace::regnamespace FROM pg_extension WHERE extname = 'pgstattuple'");
    return SqlInt("SELECT tuple_count + dead_tuple_count FROM " + where + ".pgstattuple('{s}." +
                  index + "')");
  }
};

// A run that is started, claimed and completed adds no entry to the status
// index after its start; one that fails adds one, for the operator looking
// for it. Neither the claim nor the end is a HOT update: the primary key
// gets an entry at each.
TEST_F(StatusIndex, HoldsNoRunningOrCompletedRun) {
  const cairn::Run done = CreateRun();
  const cairn::Run failed = CreateRun();
  EXPECT_EQ(IndexEntries("runs_status_created_idx"), 2);
  const auto claimed = conn().Transact([](store::Tx& tx) {
    return store::ClaimRuns(tx, {"default"}, {"hash-1"}, 2, "worker-1", 30s);
  });
  ASSERT_EQ(claimed.size(), 2u);
  EXPECT_EQ(IndexEntries("runs_status_created_idx"), 2);
  CommitStatus(done.id, RunStatus::kCompleted);
  CommitStatus(failed.id, RunStatus::kFailed);

  EXPECT_EQ(IndexEntries("runs_status_created_idx"), 3);
  EXPECT_EQ(IndexEntries("runs_pkey"), 6);
  EXPECT_EQ(Sql("SELECT string_agg(status, ',' ORDER BY status) FROM {s}.runs"),
            "completed,failed");
}

// The console's counts read at most their cap per status, however many runs
// have finished: each status is counted from an index that holds it.
TEST_F(StatusIndex, TheConsoleCountsEveryStatusFromAnIndex) {
  SeedFinishedBulk();
  conn().Transact([&](store::Tx& tx) {
    std::map<RunStatus, int64_t> counts;
    for (const auto& [status, runs] : store::CountRunsUpTo(tx, 10)) counts[status] = runs;
    EXPECT_EQ(counts, (std::map<RunStatus, int64_t>{{RunStatus::kReady, 4},
                                                    {RunStatus::kRunning, 1},
                                                    {RunStatus::kWaiting, 2},
                                                    {RunStatus::kCompleted, 10},
                                                    {RunStatus::kFailed, 3},
                                                    {RunStatus::kCancelled, 0},
                                                    {RunStatus::kCompensating, 0},
                                                    {RunStatus::kCompensationFailed, 0}}));
    EXPECT_LE(RunRowsRead(tx), 200);
  });
}

// The backlog of the metrics and the console's pinned runs read the live
// runs alone, running ones included, not the finished bulk.
TEST_F(StatusIndex, TheBacklogAndThePinnedRunsReadOnlyLiveRuns) {
  SeedFinishedBulk();
  Sql("INSERT INTO {s}.workflow_definitions (hash, workflow, version, first_step, definition) "
      "VALUES ('hash-1', 'orders', 1, 'reserve', '{}')");
  conn().Transact([&](store::Tx& tx) {
    int64_t backlog = 0;
    for (const auto& row : store::ReadBacklog(tx)) backlog += row.runs;
    EXPECT_EQ(backlog, 7);
    const auto definitions = store::ListDefinitionUse(tx);
    ASSERT_EQ(definitions.size(), 1u);
    EXPECT_EQ(definitions[0].pinned, 7);
    EXPECT_LE(RunRowsRead(tx), 100);
  });
}

}  // namespace
}  // namespace cairn::test
