// The indexes of runs against a real PostgreSQL. The status index
// (migration 20) holds no running or completed run, and the creation-order
// indexes (migration 24) no running run, so that a claim and a run's end
// write as few entries as they can; the readers that count or list runs
// still read an index for every filter instead of the finished runs, the
// bulk of the table.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "store_bench.hpp"
#include "store_console.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;

class RunsIndexes : public StoreTest {
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
TEST_F(RunsIndexes, HoldsNoRunningOrCompletedRun) {
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
TEST_F(RunsIndexes, TheConsoleCountsEveryStatusFromAnIndex) {
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
TEST_F(RunsIndexes, TheBacklogAndThePinnedRunsReadOnlyLiveRuns) {
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

// A claim moves its run to running, a version that no creation-order index
// holds: the claim writes entries into the primary key and the running index
// alone, and the run's end puts it back into the creation-order indexes.
TEST_F(RunsIndexes, AClaimWritesNoEntryIntoTheCreationOrderIndexes) {
  const std::vector<std::string> creation_order = {"runs_created_idx", "runs_list_idx",
                                                   "runs_queue_created_idx"};
  const cairn::Run run = CreateRun();
  for (const auto& index : creation_order) EXPECT_EQ(IndexEntries(index), 1) << index;
  const auto claimed = conn().Transact([](store::Tx& tx) {
    return store::ClaimRuns(tx, {"default"}, {"hash-1"}, 1, "worker-1", 30s);
  });
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(IndexEntries("runs_pkey"), 2);
  EXPECT_EQ(IndexEntries("runs_running_idx"), 1);
  for (const auto& index : creation_order) EXPECT_EQ(IndexEntries(index), 1) << index;

  CommitStatus(run.id, RunStatus::kCompleted);
  for (const auto& index : creation_order) EXPECT_EQ(IndexEntries(index), 2) << index;
}

// The lists of runs, oldest and newest first, read running runs apart from
// the others and merge them: pages of two, filtered or not, are exactly the
// database's order, running runs in their place.
TEST_F(RunsIndexes, ListsPutRunningRunsInTheirPlaceInCreationOrder) {
  std::vector<std::string> ids;
  for (int i = 0; i < 9; ++i) {
    NewRun run = MakeRun(i % 3 == 0 ? "refunds" : "orders");
    run.queue = i % 2 == 0 ? "default" : "bulk";
    ids.push_back(CreateRun(run).id);
    Sql("UPDATE {s}.runs SET created_at = '2026-01-01 00:00:00+00'::timestamptz + " +
        std::to_string(i / 2) + " * interval '1 second' WHERE id = '" + ids.back() + "'");
  }
  for (int i : {1, 4, 5, 8}) CommitStatus(ids[i], RunStatus::kRunning);
  CommitStatus(ids[2], RunStatus::kCompleted);

  const auto listed = [&](const RunFilter& filter, bool newest_first) {
    std::vector<std::string> seen;
    std::optional<std::string> cursor;
    do {
      const auto page = conn().Transact([&](store::Tx& tx) {
        return newest_first ? store::ListRunsNewestFirst(tx, filter, 2, cursor)
                            : store::ListRuns(tx, filter, 2, cursor);
      });
      for (const auto& run : page.runs) seen.push_back(run.id);
      cursor = page.next_cursor;
    } while (cursor && seen.size() < 20);
    std::string joined;
    for (const auto& id : seen) joined += (joined.empty() ? "" : ",") + id;
    return joined;
  };
  const auto expected = [&](const std::string& where, const std::string& direction) {
    return Sql("SELECT coalesce(string_agg(id::text, ',' ORDER BY created_at " + direction +
               ", id " + direction + "), '') FROM {s}.runs WHERE " + where);
  };
  const std::vector<std::pair<RunFilter, std::string>> cases = {
      {{}, "true"},
      {{.status = RunStatus::kRunning}, "status = 'running'"},
      {{.workflow = "orders"}, "workflow = 'orders'"},
      {{.queue = "bulk"}, "queue = 'bulk'"},
      {{.workflow = "refunds", .status = RunStatus::kReady},
       "workflow = 'refunds' AND status = 'ready'"},
  };
  for (const auto& [filter, where] : cases) {
    SCOPED_TRACE(where);
    EXPECT_EQ(listed(filter, false), expected(where, "ASC"));
    EXPECT_EQ(listed(filter, true), expected(where, "DESC"));
  }
  EXPECT_EQ(listed({.status = RunStatus::kRunning}, false).size(), 4 * 36 + 3);
}

// A page of either list reads about a page of runs with 20 000 finished
// runs in the table, unfiltered or filtered by status or queue.
TEST_F(RunsIndexes, AListPageReadsAboutAPageOfRuns) {
  SeedFinishedBulk();
  Seed("running", 30);
  Sql("ANALYZE {s}.runs");
  const std::vector<RunFilter> filters = {
      {}, {.status = RunStatus::kRunning}, {.status = RunStatus::kFailed}, {.queue = "default"}};
  for (const auto& filter : filters) {
    conn().Transact([&](store::Tx& tx) {
      const int64_t before = RunRowsRead(tx);
      EXPECT_EQ(store::ListRuns(tx, filter, 50).runs.empty(), false);
      EXPECT_EQ(store::ListRunsNewestFirst(tx, filter, 50).runs.empty(), false);
      EXPECT_LE(RunRowsRead(tx) - before, 250);
    });
  }
}

// What `cairn bench` polls while a phase drains: the phase's unfinished runs
// per status, read through the indexes of those statuses. The finished runs
// of the phases before, the bulk of the table, are never read: a poll that
// scanned them every 200 ms would take CPU from the daemons it measures.
TEST_F(RunsIndexes, TheBenchmarksPollReadsOnlyThePhasesUnfinishedRuns) {
  SeedFinishedBulk();
  Sql("INSERT INTO {s}.runs (workflow, definition_version, definition_hash, cursor, status, "
      "lease_owner, lease_expires_at, finished_at, final_status, input) "
      "SELECT 'orders', 1, 'hash-1', 'reserve', s, "
      "CASE WHEN s = 'running' THEN 'worker-1' END, "
      "CASE WHEN s = 'running' THEN now() + interval '1 hour' END, "
      "CASE WHEN s = 'completed' THEN now() END, "
      "CASE WHEN s = 'compensating' THEN 'failed' END, '{\"cairn_bench\": \"phase a\"}' "
      "FROM unnest(ARRAY['ready', 'ready', 'ready', 'running', 'waiting', 'waiting', "
      "'compensating', 'completed', 'completed']) s");
  Sql("ANALYZE {s}.runs");
  conn().Transact([&](store::Tx& tx) {
    const int64_t before = RunRowsRead(tx);
    const auto unfinished = store::bench::UnfinishedRunsOfPhase(tx, {{"cairn_bench", "phase a"}});
    EXPECT_EQ(unfinished, (std::unordered_map<RunStatus, int64_t>{{RunStatus::kReady, 3},
                                                                  {RunStatus::kRunning, 1},
                                                                  {RunStatus::kWaiting, 2},
                                                                  {RunStatus::kCompensating, 1}}));
    EXPECT_LE(RunRowsRead(tx) - before, 100);
  });
}

}  // namespace
}  // namespace cairn::test
