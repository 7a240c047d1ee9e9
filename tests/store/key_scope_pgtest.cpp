// Start keys and their scope, against a real PostgreSQL: a forever key names
// one run ever; an unfinished key names one unfinished run at a time and
// starts a new run once that one has finished; the definition's key_scope
// applies when the start names none; concurrent starts of one key create
// exactly one run; start_run_outcome says whether a start created its run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "errors.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using ::testing::HasSubstr;

class StoreKeyScope : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (HasFatalFailure()) return;
    Sql("INSERT INTO {s}.workflow_definitions (hash, workflow, version, first_step, definition) "
        "VALUES ('h1', 'wf', 1, 's1', '{}'), "
        "('h2', 'reindex', 1, 's1', '{\"key_scope\": \"unfinished\"}')");
  }

  store::StartedRun Start(const std::string& workflow, const std::string& key,
                          std::optional<KeyScope> scope = std::nullopt) {
    store::StartRequest request;
    request.workflow = workflow;
    request.key = key;
    request.key_scope = scope;
    return conn().Transact([&](store::Tx& tx) { return store::StartRun(tx, request); });
  }
};

TEST_F(StoreKeyScope, AForeverKeyNamesOneRunEvenAfterItFinished) {
  const store::StartedRun first = Start("wf", "order-1");
  EXPECT_TRUE(first.created);
  const store::StartedRun again = Start("wf", "order-1");
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.id, first.id);
  CommitStatus(first.id, RunStatus::kCompleted);
  const store::StartedRun after = Start("wf", "order-1", KeyScope::kForever);
  EXPECT_FALSE(after.created);
  EXPECT_EQ(after.id, first.id);
  EXPECT_EQ(RunColumn(first.id, "key_scope"), "forever");
  // The same key in another workflow or namespace is another key.
  EXPECT_TRUE(Start("reindex", "order-1", KeyScope::kForever).created);
  EXPECT_EQ(Sql("SELECT {s}.start_run('wf', '{}'::jsonb, 'order-1', p_namespace => 'other') = '" +
                first.id + "'"),
            "f");
}

TEST_F(StoreKeyScope, AnUnfinishedKeyStartsANewRunOnceTheLastOneFinished) {
  const store::StartedRun first = Start("wf", "tenant-7", KeyScope::kUnfinished);
  ASSERT_TRUE(first.created);
  EXPECT_EQ(RunColumn(first.id, "key_scope"), "unfinished");
  // While it is unfinished (ready, running, waiting), the key is held.
  for (const RunStatus status : {RunStatus::kReady, RunStatus::kRunning, RunStatus::kWaiting}) {
    if (status != RunStatus::kReady) CommitStatus(first.id, status);
    const store::StartedRun held = Start("wf", "tenant-7", KeyScope::kUnfinished);
    EXPECT_FALSE(held.created) << ToString(status);
    EXPECT_EQ(held.id, first.id) << ToString(status);
  }
  CommitStatus(first.id, RunStatus::kFailed);
  const store::StartedRun second = Start("wf", "tenant-7", KeyScope::kUnfinished);
  EXPECT_TRUE(second.created);
  EXPECT_NE(second.id, first.id);
  // The new run holds the key now; a forever start of it finds the unfinished one too.
  EXPECT_EQ(Start("wf", "tenant-7", KeyScope::kUnfinished).id, second.id);
  EXPECT_EQ(Start("wf", "tenant-7", KeyScope::kForever).id, second.id);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE run_key = 'tenant-7'"), 2);
}

TEST_F(StoreKeyScope, TheDefinitionsScopeAppliesWhenTheStartNamesNone) {
  const store::StartedRun first = Start("reindex", "tenant-1");
  EXPECT_EQ(RunColumn(first.id, "key_scope"), "unfinished");
  CommitStatus(first.id, RunStatus::kCompleted);
  EXPECT_TRUE(Start("reindex", "tenant-1").created);
  // A start that names a scope overrides the definition's.
  const store::StartedRun forever = Start("reindex", "tenant-2", KeyScope::kForever);
  CommitStatus(forever.id, RunStatus::kCompleted);
  EXPECT_FALSE(Start("reindex", "tenant-2", KeyScope::kForever).created);
}

TEST_F(StoreKeyScope, StartRunOutcomeSaysWhetherTheCallCreatedTheRun) {
  EXPECT_EQ(Sql("SELECT created FROM {s}.start_run_outcome('wf', p_key => 'k-1')"), "t");
  EXPECT_EQ(Sql("SELECT created FROM {s}.start_run_outcome('wf', p_key => 'k-1')"), "f");
  EXPECT_EQ(Sql("SELECT count(DISTINCT run_id) FROM (SELECT run_id FROM "
                "{s}.start_run_outcome('wf', p_key => 'k-1') UNION ALL SELECT "
                "{s}.start_run('wf', p_key => 'k-1')) ids"),
            "1");
  // Without a key every start creates a run.
  EXPECT_EQ(Sql("SELECT created FROM {s}.start_run_outcome('wf')"), "t");
}

TEST_F(StoreKeyScope, AnUnknownScopeIsRefusedAndStartsNothing) {
  try {
    Sql("SELECT {s}.start_run('wf', p_key => 'k', p_key_scope => 'sometimes')");
    ADD_FAILURE() << "start_run accepted the scope 'sometimes'";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("the key scope must be forever or unfinished, got \"sometimes\""));
  }
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 0);
}

TEST_F(StoreKeyScope, ConcurrentStartsOfOneUnfinishedKeyCreateOneRun) {
  constexpr int kThreads = 16;
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> created{0};
    std::vector<std::string> ids(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        store::ConnectionOptions options;
        options.url = url();
        options.schema = schema();
        store::Connection connection(options);
        store::StartRequest request;
        request.workflow = "wf";
        request.key = "shared";
        request.key_scope = KeyScope::kUnfinished;
        const store::StartedRun started =
            connection.Transact([&](store::Tx& tx) { return store::StartRun(tx, request); });
        if (started.created) ++created;
        ids[static_cast<size_t>(i)] = started.id;
      });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(created.load(), 1) << "round " << round;
    EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 1u) << "round " << round;
    // The round's run finishes: the next round starts exactly one more.
    CommitStatus(ids[0], RunStatus::kCompleted);
  }
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE run_key = 'shared'"), 3);
}

}  // namespace
}  // namespace cairn::test
