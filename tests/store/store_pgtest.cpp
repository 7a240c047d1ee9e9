// The store against a real PostgreSQL: every operation, with assertions on
// what the database holds afterwards.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "errors.hpp"
#include "pg_session.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr const char* kUnknownRun = "00000000-0000-4000-8000-000000000000";

template <class E, class F>
E Catch(F&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw the wrong exception: " << e.what();
    throw;
  }
  ADD_FAILURE() << "did not throw";
  throw std::logic_error("expected an exception");
}

// ---------------------------------------------------------------- runs

class StoreRuns : public StoreTest {};

TEST_F(StoreRuns, CreateRunGeneratesIdAndStoresTheRun) {
  NewRun fresh = MakeRun("orders");
  fresh.queue = "billing";
  fresh.priority = 7;
  fresh.context = {{"step", 0}};
  auto result = conn().Transact([&](store::Tx& tx) { return store::CreateRun(tx, fresh); });

  EXPECT_TRUE(result.created);
  EXPECT_EQ(result.run.id.size(), 36u);
  EXPECT_EQ(result.run.status, RunStatus::kReady);
  EXPECT_EQ(result.run.version, 1);
  EXPECT_EQ(result.run.namespace_name, "default");
  EXPECT_FALSE(result.run.key.has_value());
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE id = '" + result.run.id +
                   "' AND workflow = 'orders' AND queue = 'billing' AND priority = 7"
                   " AND input = '{\"sku\": \"A-1\", \"quantity\": 2}'::jsonb"
                   " AND context = '{\"step\": 0}'::jsonb AND cursor = 'reserve'"
                   " AND status = 'ready' AND run_at <= now() AND finished_at IS NULL"),
            1);

  cairn::Run second = CreateRun("orders");
  EXPECT_NE(second.id, result.run.id);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 2);
}

TEST_F(StoreRuns, CreateRunWithExistingKeyReturnsTheExistingRun) {
  auto first = conn().Transact(
      [&](store::Tx& tx) { return store::CreateRun(tx, MakeRun("orders", "order-17")); });
  NewRun again = MakeRun("orders", "order-17");
  again.input = {{"sku", "OTHER"}};
  auto second = conn().Transact([&](store::Tx& tx) { return store::CreateRun(tx, again); });

  EXPECT_TRUE(first.created);
  EXPECT_FALSE(second.created);
  EXPECT_EQ(second.run.id, first.run.id);
  EXPECT_EQ(second.run.input, first.run.input);
  EXPECT_EQ(second.run.key, std::optional<std::string>("order-17"));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 1);
  EXPECT_EQ(Sql("SELECT input->>'sku' FROM {s}.runs"), "A-1");
}

TEST_F(StoreRuns, SameKeyInAnotherWorkflowOrNamespaceCreatesANewRun) {
  cairn::Run a = CreateRun("orders", "k1");
  cairn::Run b = CreateRun("refunds", "k1");
  NewRun other_namespace = MakeRun("orders", "k1");
  other_namespace.namespace_name = "tenant-2";
  auto c = conn().Transact([&](store::Tx& tx) { return store::CreateRun(tx, other_namespace); });

  EXPECT_TRUE(c.created);
  EXPECT_EQ(std::set<std::string>({a.id, b.id, c.run.id}).size(), 3u);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE run_key = 'k1'"), 3);
  EXPECT_EQ(SqlInt("SELECT count(DISTINCT (namespace, workflow)) FROM {s}.runs"), 3);
}

TEST_F(StoreRuns, CreateRunWithRunAtIsDueThen) {
  NewRun later = MakeRun();
  later.run_at = "2031-01-02 03:04:05+00";
  cairn::Run run = CreateRun(later);
  EXPECT_EQ(RunColumn(run.id, "run_at = '2031-01-02 03:04:05+00'"), "t");
  EXPECT_EQ(RunColumn(run.id, "status"), "ready");
}

TEST_F(StoreRuns, GetRunReturnsTheStoredRun) {
  cairn::Run created = CreateRun("orders", "order-1");
  auto run = conn().Transact([&](store::Tx& tx) { return store::GetRun(tx, created.id); });
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->id, created.id);
  EXPECT_EQ(run->workflow, "orders");
  EXPECT_EQ(run->definition_hash, "hash-1");
  EXPECT_EQ(run->key, std::optional<std::string>("order-1"));
  EXPECT_EQ(run->input, Json({{"sku", "A-1"}, {"quantity", 2}}));
  EXPECT_EQ(run->cursor, std::optional<std::string>("reserve"));
  EXPECT_EQ(run->created_at, created.created_at);
  EXPECT_EQ(RunColumn(created.id, "created_at = '" + run->created_at + "'::timestamptz"), "t");
}

TEST_F(StoreRuns, GetRunOfUnknownIdIsEmpty) {
  CreateRun();
  auto run = conn().Transact([&](store::Tx& tx) { return store::GetRun(tx, kUnknownRun); });
  EXPECT_FALSE(run.has_value());
}

// ---------------------------------------------------------------- checkpoints

class StoreCheckpoint : public StoreTest {
 protected:
  cairn::Checkpoint Next(const std::string& run_id, int64_t expected,
                         RunStatus status = RunStatus::kRunning) {
    cairn::Checkpoint c;
    c.run_id = run_id;
    c.expected_version = expected;
    c.status = status;
    c.lease_owner = "worker-1";
    c.cursor = "charge";
    return c;
  }

  CheckpointResult Save(const cairn::Checkpoint& c) {
    return conn().Transact([&](store::Tx& tx) { return store::SaveCheckpoint(tx, c); });
  }
};

TEST_F(StoreCheckpoint, SaveCheckpointIncrementsTheVersion) {
  cairn::Run run = CreateRun();
  auto c = Next(run.id, 1);
  c.context = {{"reserved", true}};
  c.attempt = 2;
  CheckpointResult first = Save(c);
  EXPECT_EQ(first.version, 2);
  EXPECT_EQ(first.status, RunStatus::kRunning);

  CheckpointResult second = Save(Next(run.id, 2));
  EXPECT_EQ(second.version, 3);
  EXPECT_EQ(RunColumn(run.id, "version"), "3");
  EXPECT_EQ(RunColumn(run.id, "cursor"), "charge");
  // Each checkpoint replaces the context and the attempt.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE id = '" + run.id +
                   "' AND context = '{}'::jsonb AND attempt = 0 AND status = 'running'"),
            1);
}

TEST_F(StoreCheckpoint, StaleVersionThrowsOccConflictNamingBothVersions) {
  cairn::Run run = CreateRun();
  auto c = Next(run.id, 1);
  c.context = {{"winner", true}};
  Save(c);
  Save(Next(run.id, 2));

  auto stale = Next(run.id, 1);
  stale.context = {{"zombie", true}};
  auto error = Catch<OccConflictError>([&] { Save(stale); });
  EXPECT_EQ(error.kind(), ErrorKind::kConflict);
  EXPECT_EQ(error.run_id(), run.id);
  EXPECT_EQ(error.expected(), 1);
  EXPECT_EQ(error.current(), 3);
  EXPECT_THAT(error.what(), HasSubstr(run.id));
  EXPECT_THAT(error.what(), HasSubstr("expected version 1"));
  EXPECT_THAT(error.what(), HasSubstr("current version is 3"));
  // The zombie wrote nothing.
  EXPECT_EQ(RunColumn(run.id, "version"), "3");
  EXPECT_EQ(RunColumn(run.id, "context->>'zombie'"), "");
}

TEST_F(StoreCheckpoint, FutureVersionThrowsOccConflict) {
  cairn::Run run = CreateRun();
  auto error = Catch<OccConflictError>([&] { Save(Next(run.id, 5)); });
  EXPECT_EQ(error.expected(), 5);
  EXPECT_EQ(error.current(), 1);
  EXPECT_EQ(RunColumn(run.id, "version"), "1");
}

TEST_F(StoreCheckpoint, UnknownRunThrowsNotFound) {
  CreateRun();
  auto error = Catch<NotFoundError>([&] { Save(Next(kUnknownRun, 1)); });
  EXPECT_EQ(error.kind(), ErrorKind::kNotFound);
  EXPECT_THAT(error.what(), HasSubstr(kUnknownRun));
}

TEST_F(StoreCheckpoint, CancelledRunStaysCancelledWhateverTheCheckpointAsks) {
  cairn::Run run = CreateRunningRun();
  auto cancel =
      conn().Transact([&](store::Tx& tx) { return store::CancelRun(tx, run.id, "operator"); });
  const std::string finished_at = RunColumn(run.id, "finished_at");
  ASSERT_FALSE(finished_at.empty());

  int64_t version = cancel.version;
  for (RunStatus asked : {RunStatus::kRunning, RunStatus::kReady, RunStatus::kWaiting,
                          RunStatus::kCompleted, RunStatus::kFailed}) {
    SCOPED_TRACE(std::string(ToString(asked)));
    auto c = Next(run.id, version, asked);
    c.delay_ms = 3600 * 1000;
    CheckpointResult result = Save(c);
    EXPECT_EQ(result.status, RunStatus::kCancelled);
    EXPECT_EQ(result.version, version + 1);
    version = result.version;
    EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE id = '" + run.id +
                     "' AND status = 'cancelled' AND lease_owner IS NULL"
                     " AND lease_expires_at IS NULL AND cancel_reason = 'operator'"
                     " AND run_at <= now() AND version = " +
                     std::to_string(version)),
              1);
    EXPECT_EQ(RunColumn(run.id, "finished_at"), finished_at);
  }
}

TEST_F(StoreCheckpoint, ReadyWithDelayIsDueLaterByDatabaseTime) {
  cairn::Run run = CreateRunningRun();
  auto c = Next(run.id, run.version, RunStatus::kReady);
  c.delay_ms = 3600 * 1000;
  EXPECT_EQ(Save(c).status, RunStatus::kReady);
  EXPECT_TRUE(
      SqlBool("SELECT run_at > now() + interval '59 minutes'"
              " AND run_at < now() + interval '61 minutes' FROM {s}.runs WHERE id = '" +
              run.id + "'"));
  // Not leased while it waits to be due.
  EXPECT_EQ(RunColumn(run.id, "lease_owner IS NULL AND lease_expires_at IS NULL"), "t");

  auto now = Next(run.id, run.version + 1, RunStatus::kReady);
  Save(now);
  EXPECT_TRUE(SqlBool("SELECT run_at <= now() FROM {s}.runs WHERE id = '" + run.id + "'"));

  auto at = Next(run.id, run.version + 2, RunStatus::kReady);
  at.run_at = "2031-01-02 03:04:05+00";
  Save(at);
  EXPECT_TRUE(SqlBool("SELECT run_at = '2031-01-02 03:04:05+00' FROM {s}.runs WHERE id = '" +
                      run.id + "'"));
}

TEST_F(StoreCheckpoint, CompletedSetsFinishedAtAndOutput) {
  cairn::Run run = CreateRunningRun();
  auto c = Next(run.id, run.version, RunStatus::kCompleted);
  c.output = Json{{"total", 42}};
  c.context = {{"done", true}};
  EXPECT_EQ(Save(c).status, RunStatus::kCompleted);

  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE id = '" + run.id +
                   "' AND status = 'completed' AND finished_at IS NOT NULL"
                   " AND finished_at <= now() AND output = '{\"total\": 42}'::jsonb"
                   " AND lease_owner IS NULL AND lease_expires_at IS NULL"),
            1);
  auto stored = conn().Transact([&](store::Tx& tx) { return store::GetRun(tx, run.id); });
  ASSERT_TRUE(stored->output.has_value());
  EXPECT_EQ((*stored->output)["total"], 42);
  EXPECT_TRUE(stored->finished_at.has_value());
}

TEST_F(StoreCheckpoint, RunningSetsTheLeaseFromDatabaseTime) {
  cairn::Run run = CreateRun();
  auto c = Next(run.id, 1, RunStatus::kRunning);
  c.lease_owner = "worker-7";
  c.lease_ms = 30000;
  Save(c);
  EXPECT_EQ(RunColumn(run.id, "lease_owner"), "worker-7");
  EXPECT_TRUE(
      SqlBool("SELECT lease_expires_at > now() + interval '25 seconds'"
              " AND lease_expires_at <= now() + interval '30 seconds'"
              " FROM {s}.runs WHERE id = '" +
              run.id + "'"));

  // Without an owner the current one keeps the lease, extended.
  auto renew = Next(run.id, 2, RunStatus::kRunning);
  renew.lease_owner.reset();
  renew.lease_ms = 120000;
  Save(renew);
  EXPECT_EQ(RunColumn(run.id, "lease_owner"), "worker-7");
  EXPECT_TRUE(
      SqlBool("SELECT lease_expires_at > now() + interval '110 seconds'"
              " FROM {s}.runs WHERE id = '" +
              run.id + "'"));
}

// ---------------------------------------------------------------- cancel

class StoreCancel : public StoreTest {
 protected:
  CancelResult Cancel(const std::string& run_id, const std::string& reason = "operator") {
    return conn().Transact([&](store::Tx& tx) { return store::CancelRun(tx, run_id, reason); });
  }
};

TEST_F(StoreCancel, CancelsTheRunAndItsLiveWaitsAtomically) {
  cairn::Run run = CreateRunningRun();
  SaveWait(run.id, "w-waiting");
  SaveWait(run.id, "w-resuming");
  SaveWait(run.id, "w-resumed");
  conn().Transact([&](store::Tx& tx) {
    store::ClaimWait(tx, "w-resuming", "worker-1");
    store::ClaimWait(tx, "w-resumed", "worker-1");
    store::CompleteWait(tx, "w-resumed", "worker-1");
  });
  cairn::Run other = CreateRunningRun();
  SaveWait(other.id, "w-other");

  CancelResult result = Cancel(run.id, "customer asked");
  EXPECT_EQ(result.outcome, CancelOutcome::kCancelled);
  EXPECT_EQ(result.status, RunStatus::kCancelled);
  EXPECT_EQ(result.version, run.version + 1);
  EXPECT_EQ(result.waits_cancelled, 2);

  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE id = '" + run.id +
                   "' AND status = 'cancelled' AND cancel_reason = 'customer asked'"
                   " AND finished_at IS NOT NULL AND lease_owner IS NULL AND version = " +
                   std::to_string(run.version + 1)),
            1);
  EXPECT_EQ(Sql("SELECT string_agg(correlation_key || '=' || status, ',' ORDER BY correlation_key)"
                " FROM {s}.wait_records"),
            "w-other=WAITING,w-resumed=RESUMED,w-resuming=CANCELLED,w-waiting=CANCELLED");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records WHERE status = 'CANCELLED'"
                   " AND finished_at IS NOT NULL"),
            2);
  EXPECT_EQ(RunColumn(other.id, "status"), "running");
}

TEST_F(StoreCancel, CancelRolledBackWithItsTransactionChangesNothing) {
  cairn::Run run = CreateRunningRun();
  SaveWait(run.id, "w1");
  EXPECT_THROW(conn().Transact([&](store::Tx& tx) {
    store::CancelRun(tx, run.id, "operator");
    throw std::runtime_error("caller failed");
  }),
               std::runtime_error);
  EXPECT_EQ(RunColumn(run.id, "status"), "running");
  EXPECT_EQ(Sql("SELECT status FROM {s}.wait_records WHERE correlation_key = 'w1'"), "WAITING");
}

TEST_F(StoreCancel, SecondCancelReportsAlreadyFinishedAndChangesNothing) {
  cairn::Run run = CreateRunningRun();
  SaveWait(run.id, "w1");
  CancelResult first = Cancel(run.id, "first");
  const std::string before =
      Sql("SELECT row_to_json(r)::text FROM {s}.runs r WHERE id = '" + run.id + "'");
  const std::string waits_before =
      Sql("SELECT row_to_json(w)::text FROM {s}.wait_records w WHERE correlation_key = 'w1'");

  CancelResult second = Cancel(run.id, "second");
  EXPECT_EQ(second.outcome, CancelOutcome::kAlreadyFinished);
  EXPECT_EQ(second.status, RunStatus::kCancelled);
  EXPECT_EQ(second.version, first.version);
  EXPECT_EQ(second.waits_cancelled, 0);
  EXPECT_EQ(Sql("SELECT row_to_json(r)::text FROM {s}.runs r WHERE id = '" + run.id + "'"), before);
  EXPECT_EQ(Sql("SELECT row_to_json(w)::text FROM {s}.wait_records w WHERE correlation_key = 'w1'"),
            waits_before);
  EXPECT_EQ(RunColumn(run.id, "cancel_reason"), "first");
}

TEST_F(StoreCancel, CompletedRunReportsAlreadyFinished) {
  cairn::Run run = CreateRunningRun();
  SaveWait(run.id, "w1");
  int64_t version = CommitStatus(run.id, RunStatus::kCompleted, Json::object(), Json{{"ok", 1}});

  CancelResult result = Cancel(run.id);
  EXPECT_EQ(result.outcome, CancelOutcome::kAlreadyFinished);
  EXPECT_EQ(result.status, RunStatus::kCompleted);
  EXPECT_EQ(result.version, version);
  EXPECT_EQ(RunColumn(run.id, "status"), "completed");
  EXPECT_EQ(RunColumn(run.id, "cancel_reason"), "");
  EXPECT_EQ(RunColumn(run.id, "version"), std::to_string(version));
  EXPECT_EQ(Sql("SELECT status FROM {s}.wait_records"), "WAITING");
}

TEST_F(StoreCancel, UnknownRunThrowsNotFound) {
  CreateRun();
  auto error = Catch<NotFoundError>([&] { Cancel(kUnknownRun); });
  EXPECT_THAT(error.what(), HasSubstr(kUnknownRun));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'cancelled'"), 0);
}

TEST_F(StoreCancel, CheckpointWithTheVersionReadBeforeTheCancelIsFenced) {
  cairn::Run run = CreateRunningRun();
  Cancel(run.id);
  cairn::Checkpoint late;
  late.run_id = run.id;
  late.expected_version = run.version;  // what the worker read before the cancel
  late.status = RunStatus::kCompleted;
  late.output = Json{{"late", true}};
  auto error = Catch<OccConflictError>(
      [&] { conn().Transact([&](store::Tx& tx) { store::SaveCheckpoint(tx, late); }); });
  EXPECT_EQ(error.expected(), run.version);
  EXPECT_EQ(error.current(), run.version + 1);
  EXPECT_EQ(RunColumn(run.id, "status"), "cancelled");
  EXPECT_EQ(RunColumn(run.id, "output IS NULL"), "t");
}

// ---------------------------------------------------------------- list

class StoreListRuns : public StoreTest {
 protected:
  std::vector<std::string> Ids(const RunFilter& filter) {
    auto page = conn().Transact([&](store::Tx& tx) { return store::ListRuns(tx, filter); });
    EXPECT_FALSE(page.next_cursor.has_value());
    std::vector<std::string> ids;
    for (const auto& run : page.runs) ids.push_back(run.id);
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  static std::vector<std::string> Sorted(std::vector<std::string> ids) {
    std::sort(ids.begin(), ids.end());
    return ids;
  }
};

TEST_F(StoreListRuns, FiltersByWorkflowStatusKeyPrefixAndNamespace) {
  cairn::Run order_a = CreateRun("orders", "eu-1");
  cairn::Run order_b = CreateRun("orders", "eu-2");
  cairn::Run order_c = CreateRun("orders", "us-1");
  cairn::Run refund = CreateRun("refunds", "eu-3");
  cairn::Run unkeyed = CreateRun("orders");
  NewRun tenant = MakeRun("orders", "eu-9");
  tenant.namespace_name = "tenant-2";
  cairn::Run other_namespace = CreateRun(tenant);
  CommitStatus(order_b.id, RunStatus::kRunning);
  CommitStatus(order_b.id, RunStatus::kCompleted);

  EXPECT_EQ(Ids({}).size(), 6u);
  EXPECT_EQ(Ids({.workflow = "refunds"}), Sorted({refund.id}));
  EXPECT_EQ(Ids({.namespace_name = "default", .workflow = "orders"}),
            Sorted({order_a.id, order_b.id, order_c.id, unkeyed.id}));
  EXPECT_EQ(Ids({.status = RunStatus::kCompleted}), Sorted({order_b.id}));
  EXPECT_EQ(Ids({.workflow = "orders", .status = RunStatus::kReady}),
            Sorted({order_a.id, order_c.id, unkeyed.id, other_namespace.id}));
  EXPECT_EQ(Ids({.key_prefix = "eu-"}),
            Sorted({order_a.id, order_b.id, refund.id, other_namespace.id}));
  EXPECT_EQ(Ids({.namespace_name = "default", .key_prefix = "eu-"}),
            Sorted({order_a.id, order_b.id, refund.id}));
  EXPECT_EQ(Ids({.namespace_name = "tenant-2"}), Sorted({other_namespace.id}));
  // LIKE wildcards in a prefix are plain characters.
  EXPECT_TRUE(Ids({.key_prefix = "eu_"}).empty());
  EXPECT_TRUE(Ids({.key_prefix = "%"}).empty());
  EXPECT_TRUE(Ids({.namespace_name = "nobody"}).empty());
}

TEST_F(StoreListRuns, FiltersByCreatedRange) {
  std::vector<std::string> ids;
  for (int day = 1; day <= 4; ++day) {
    cairn::Run run = CreateRun();
    Sql("UPDATE {s}.runs SET created_at = '2024-03-0" + std::to_string(day) +
        " 00:00:00+00' WHERE id = '" + run.id + "'");
    ids.push_back(run.id);
  }
  EXPECT_EQ(
      Ids({.created_after = "2024-03-02 00:00:00+00", .created_before = "2024-03-04 00:00:00+00"}),
      Sorted({ids[1], ids[2]}));
  EXPECT_EQ(Ids({.created_after = "2024-03-03 00:00:00+00"}), Sorted({ids[2], ids[3]}));
  EXPECT_EQ(Ids({.created_before = "2024-03-02 00:00:00+00"}), Sorted({ids[0]}));
}

TEST_F(StoreListRuns, KeysetPaginationHasNoDuplicatesAndNoGaps) {
  conn().Transact([&](store::Tx& tx) {
    for (int i = 0; i < 450; ++i) store::CreateRun(tx, MakeRun("bulk"));
  });
  // Spread created_at over a few instants so that many rows tie on it and
  // the id has to break the ties across page boundaries.
  Sql("UPDATE {s}.runs SET created_at = created_at - (abs(hashtext(id::text)) % 4) * interval '1 "
      "second'");
  CreateRun("other");

  std::vector<size_t> sizes;
  std::vector<std::string> seen;
  std::optional<std::string> cursor;
  std::string previous_key;
  do {
    auto page = conn().Transact(
        [&](store::Tx& tx) { return store::ListRuns(tx, {.workflow = "bulk"}, 200, cursor); });
    sizes.push_back(page.runs.size());
    for (const auto& run : page.runs) {
      seen.push_back(run.id);
    }
    cursor = page.next_cursor;
    ASSERT_LT(sizes.size(), 5u) << "pagination does not end";
  } while (cursor);

  EXPECT_EQ(sizes, (std::vector<size_t>{200, 200, 50}));
  std::set<std::string> unique(seen.begin(), seen.end());
  EXPECT_EQ(unique.size(), 450u);
  // The pages, concatenated, are exactly the database's order.
  std::string expected =
      Sql("SELECT string_agg(id::text, ',' ORDER BY created_at, id)"
          " FROM {s}.runs WHERE workflow = 'bulk'");
  std::string got;
  for (const auto& id : seen) got += (got.empty() ? "" : ",") + id;
  EXPECT_EQ(got, expected);
}

TEST_F(StoreListRuns, AFullLastPageHasNoCursor) {
  for (int i = 0; i < 4; ++i) CreateRun();
  auto first = conn().Transact([&](store::Tx& tx) { return store::ListRuns(tx, {}, 2); });
  ASSERT_EQ(first.runs.size(), 2u);
  ASSERT_TRUE(first.next_cursor.has_value());
  auto second =
      conn().Transact([&](store::Tx& tx) { return store::ListRuns(tx, {}, 2, first.next_cursor); });
  EXPECT_EQ(second.runs.size(), 2u);
  EXPECT_FALSE(second.next_cursor.has_value());
}

TEST_F(StoreListRuns, PageSizeOutsideOneTo200IsRefused) {
  CreateRun();
  for (int size : {0, -1, 201}) {
    SCOPED_TRACE(size);
    auto error = Catch<InvalidArgumentError>(
        [&] { conn().Transact([&](store::Tx& tx) { store::ListRuns(tx, {}, size); }); });
    EXPECT_THAT(error.what(), HasSubstr(std::to_string(size)));
  }
  EXPECT_THROW(conn().Transact([&](store::Tx& tx) {
    store::ListRuns(tx, {}, 10, std::string("no-separator"));
  }),
               InvalidArgumentError);
  auto page = conn().Transact([&](store::Tx& tx) { return store::ListRuns(tx, {}, 200); });
  EXPECT_EQ(page.runs.size(), 1u);
}

// ---------------------------------------------------------------- history

class StoreHistory : public StoreTest {
 protected:
  static RunEvent Event(const std::string& run_id, int i) {
    RunEvent e;
    e.run_id = run_id;
    e.step = "step-" + std::to_string(i % 3);
    e.attempt = i % 2;
    e.kind = "context";
    e.field = "f" + std::to_string(i);
    e.value = Json{{"i", i}};
    return e;
  }
};

TEST_F(StoreHistory, PagesOfAThousandFromAPosition) {
  cairn::Run run = CreateRun();
  cairn::Run other = CreateRun();
  std::vector<RunEvent> events;
  for (int i = 0; i < 2500; ++i) {
    events.push_back(Event(run.id, i));
    if (i % 100 == 0) events.push_back(Event(other.id, i));
  }
  conn().Transact([&](store::Tx& tx) { store::AppendEvents(tx, events); });
  ASSERT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + run.id + "'"), 2500);

  std::vector<size_t> sizes;
  std::vector<int64_t> positions;
  std::vector<int> order;
  int64_t after = 0;
  while (true) {
    auto page = conn().Transact([&](store::Tx& tx) { return store::History(tx, run.id, after); });
    sizes.push_back(page.events.size());
    for (const auto& e : page.events) {
      EXPECT_EQ(e.run_id, run.id);
      positions.push_back(e.position);
      order.push_back((*e.value)["i"].get<int>());
    }
    if (!page.next_position) break;
    EXPECT_EQ(*page.next_position, page.events.back().position);
    after = *page.next_position;
    ASSERT_LT(sizes.size(), 5u);
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{1000, 1000, 500}));
  EXPECT_TRUE(std::is_sorted(positions.begin(), positions.end()));
  EXPECT_EQ(std::set<int64_t>(positions.begin(), positions.end()).size(), 2500u);
  for (int i = 0; i < 2500; ++i) ASSERT_EQ(order[i], i);

  // From the middle.
  auto tail = conn().Transact(
      [&](store::Tx& tx) { return store::History(tx, run.id, positions[2399], 1000); });
  ASSERT_EQ(tail.events.size(), 100u);
  EXPECT_EQ(tail.events.front().position, positions[2400]);
  EXPECT_FALSE(tail.next_position.has_value());

  for (int limit : {0, 1001}) {
    EXPECT_THROW(conn().Transact([&](store::Tx& tx) { store::History(tx, run.id, 0, limit); }),
                 InvalidArgumentError);
  }
}

TEST_F(StoreHistory, EventsRoundTripEveryField) {
  cairn::Run run = CreateRun();
  RunEvent lifecycle;
  lifecycle.run_id = run.id;
  lifecycle.kind = "started";
  RunEvent mutation = Event(run.id, 5);
  conn().Transact([&](store::Tx& tx) { store::AppendEvents(tx, {lifecycle, mutation}); });

  auto page = conn().Transact([&](store::Tx& tx) { return store::History(tx, run.id); });
  ASSERT_EQ(page.events.size(), 2u);
  EXPECT_EQ(page.events[0].kind, "started");
  EXPECT_FALSE(page.events[0].step.has_value());
  EXPECT_FALSE(page.events[0].field.has_value());
  EXPECT_FALSE(page.events[0].value.has_value());
  EXPECT_EQ(page.events[1].kind, "context");
  EXPECT_EQ(page.events[1].step, std::optional<std::string>("step-2"));
  EXPECT_EQ(page.events[1].attempt, 1);
  EXPECT_EQ(page.events[1].field, std::optional<std::string>("f5"));
  EXPECT_EQ(page.events[1].value, std::optional<Json>(Json{{"i", 5}}));
  EXPECT_FALSE(page.events[1].created_at.empty());
  EXPECT_FALSE(page.next_position.has_value());
}

// History holds no foreign key to its run (migration 17): an event's insert
// takes no lock on the run's row, which cost a WAL record per event, and
// deleting a run still deletes its history.
TEST_F(StoreHistory, AnEventLocksNotItsRunAndGoesWithTheRun) {
  cairn::Run run = CreateRun();
  cairn::Run kept = CreateRun();
  // The run's row locked as a claim or a checkpoint locks it.
  PgSession holder(url());
  holder.Value("BEGIN");
  holder.Value(InSchema("SELECT id FROM {s}.runs WHERE id = $1 FOR UPDATE"), {run.id});
  PgSession writer(url());
  writer.Value("SET lock_timeout = '500ms'");
  EXPECT_NO_THROW(writer.Value(InSchema("INSERT INTO {s}.run_events (run_id, kind) VALUES "
                                        "($1, 'test'), ($2, 'test')"),
                               {run.id, kept.id}));
  holder.Value("ROLLBACK");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events"), 2);

  Sql("DELETE FROM {s}.runs WHERE id = '" + run.id + "'");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + run.id + "'"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + kept.id + "'"), 1);
}

// Every event writes one index entry (migration 17): the primary key is
// what history is read by, a run's events in order.
TEST_F(StoreHistory, OneIndexHoldsHistoryItsPrimaryKeyByRunAndPosition) {
  EXPECT_EQ(SqlInt("SELECT count(*) FROM pg_indexes WHERE schemaname = '" + schema() +
                   "' AND tablename = 'run_events'"),
            1);
  EXPECT_EQ(Sql("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = "
                "'{s}.run_events'::regclass AND contype = 'p'"),
            "PRIMARY KEY (run_id, \"position\")");
}

TEST_F(StoreHistory, AppendEventsCommitsAndRollsBackWithTheCallersTransaction) {
  cairn::Run run = CreateRunningRun();
  EXPECT_THROW(conn().Transact([&](store::Tx& tx) {
    cairn::Checkpoint c;
    c.run_id = run.id;
    c.expected_version = run.version;
    c.context = {{"paid", true}};
    store::SaveCheckpoint(tx, c);
    store::AppendEvents(tx, {Event(run.id, 1), Event(run.id, 2)});
    throw std::runtime_error("step failed after writing");
  }),
               std::runtime_error);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events"), 0);
  EXPECT_EQ(RunColumn(run.id, "version"), std::to_string(run.version));
  EXPECT_EQ(RunColumn(run.id, "context->>'paid'"), "");

  conn().Transact([&](store::Tx& tx) {
    cairn::Checkpoint c;
    c.run_id = run.id;
    c.expected_version = run.version;
    c.context = {{"paid", true}};
    store::SaveCheckpoint(tx, c);
    store::AppendEvents(tx, {Event(run.id, 1), Event(run.id, 2)});
    store::AppendEvents(tx, {});
  });
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + run.id + "'"), 2);
  EXPECT_EQ(RunColumn(run.id, "context->>'paid'"), "true");
}

// ---------------------------------------------------------------- waits

class StoreWaits : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    run_ = CreateRunningRun();
  }
  const cairn::Run& run() const { return run_; }
  std::string WaitColumn(const std::string& key, const std::string& column) const {
    return Sql("SELECT " + column + " FROM {s}.wait_records WHERE correlation_key = '" + key + "'");
  }
  WaitRecord Claim(const std::string& key, const std::string& claimant,
                   std::optional<Json> payload = std::nullopt, bool allow_expired = false) {
    return conn().Transact(
        [&](store::Tx& tx) { return store::ClaimWait(tx, key, claimant, payload, allow_expired); });
  }
  WaitRecord Complete(const std::string& key, const std::string& claimant) {
    return conn().Transact([&](store::Tx& tx) { return store::CompleteWait(tx, key, claimant); });
  }

 private:
  cairn::Run run_;
};

TEST_F(StoreWaits, SaveWaitStoresTheRecord) {
  WaitRecord forever = SaveWait(run().id, "pay-1");
  EXPECT_EQ(forever.status, WaitStatus::kWaiting);
  EXPECT_EQ(forever.run_id, run().id);
  EXPECT_EQ(forever.event, "payment");
  EXPECT_EQ(forever.continuation_step, "ship");
  EXPECT_EQ(forever.timeout_step, std::optional<std::string>("refund"));
  EXPECT_FALSE(forever.expires_at.has_value());
  EXPECT_FALSE(forever.expired);
  EXPECT_FALSE(forever.claimant.has_value());

  WaitRecord bounded = SaveWait(run().id, "pay-2", 60000);
  EXPECT_TRUE(bounded.expires_at.has_value());
  EXPECT_FALSE(bounded.expired);
  EXPECT_TRUE(
      SqlBool("SELECT expires_at > now() + interval '55 seconds' AND expires_at <= now()"
              " + interval '60 seconds' FROM {s}.wait_records WHERE correlation_key = 'pay-2'"));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records WHERE run_id = '" + run().id +
                   "' AND status = 'WAITING' AND finished_at IS NULL"),
            2);
}

TEST_F(StoreWaits, DuplicateKeyIsAConflictNamingTheKey) {
  SaveWait(run().id, "pay-1");
  cairn::Run other = CreateRunningRun();
  auto error = Catch<Error>([&] { SaveWait(other.id, "pay-1"); });
  EXPECT_EQ(error.kind(), ErrorKind::kConflict);
  EXPECT_THAT(error.what(), HasSubstr("pay-1"));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records"), 1);
  EXPECT_EQ(WaitColumn("pay-1", "run_id"), run().id);
}

TEST_F(StoreWaits, SaveWaitForUnknownRunThrowsNotFound) {
  EXPECT_THROW(SaveWait(kUnknownRun, "pay-1"), NotFoundError);
  EXPECT_THROW(SaveWait(run().id, ""), InvalidArgumentError);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records"), 0);
}

TEST_F(StoreWaits, GetWaitFindsByKey) {
  SaveWait(run().id, "pay-1", 60000);
  auto found = conn().Transact([&](store::Tx& tx) { return store::GetWait(tx, "pay-1"); });
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->correlation_key, "pay-1");
  EXPECT_EQ(found->run_id, run().id);
  ASSERT_TRUE(found->expires_at.has_value());
  EXPECT_EQ(WaitColumn("pay-1", "expires_at = '" + *found->expires_at + "'::timestamptz"), "t");
  auto missing = conn().Transact([&](store::Tx& tx) { return store::GetWait(tx, "nope"); });
  EXPECT_FALSE(missing.has_value());
}

TEST_F(StoreWaits, WaitsOfRunListsThatRunsWaitsOnly) {
  SaveWait(run().id, "a");
  SaveWait(run().id, "b");
  cairn::Run other = CreateRunningRun();
  SaveWait(other.id, "c");
  auto waits = conn().Transact([&](store::Tx& tx) { return store::WaitsOfRun(tx, run().id); });
  std::set<std::string> keys;
  for (const auto& w : waits) keys.insert(w.correlation_key);
  EXPECT_EQ(keys, (std::set<std::string>{"a", "b"}));
  auto none = conn().Transact([&](store::Tx& tx) { return store::WaitsOfRun(tx, kUnknownRun); });
  EXPECT_TRUE(none.empty());
}

TEST_F(StoreWaits, ClaimWaitStoresThePayloadAndTheClaimant) {
  SaveWait(run().id, "pay-1", 60000);
  WaitRecord claimed = Claim("pay-1", "worker-1", Json{{"amount", 120}});
  EXPECT_EQ(claimed.status, WaitStatus::kResuming);
  EXPECT_EQ(claimed.claimant, std::optional<std::string>("worker-1"));
  EXPECT_EQ(claimed.payload, std::optional<Json>(Json{{"amount", 120}}));
  EXPECT_TRUE(claimed.claimed_at.has_value());
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records WHERE correlation_key = 'pay-1'"
                   " AND status = 'RESUMING' AND claimant = 'worker-1'"
                   " AND payload = '{\"amount\": 120}'::jsonb AND claimed_at IS NOT NULL"
                   " AND finished_at IS NULL"),
            1);
}

TEST_F(StoreWaits, ExpiredWaitThrowsWaitExpiredUnlessAllowed) {
  SaveWait(run().id, "late", -1000);
  auto error = Catch<WaitExpiredError>([&] { Claim("late", "worker-1", Json{{"x", 1}}); });
  EXPECT_EQ(error.key(), "late");
  EXPECT_THAT(error.what(), HasSubstr("late"));
  EXPECT_EQ(WaitColumn("late", "status"), "WAITING");
  EXPECT_EQ(WaitColumn("late", "payload IS NULL AND claimant IS NULL"), "t");

  // The expiry path (continuing at the timeout step) may still claim it.
  WaitRecord claimed = Claim("late", "reaper", std::nullopt, /*allow_expired=*/true);
  EXPECT_EQ(claimed.status, WaitStatus::kResuming);
  EXPECT_TRUE(claimed.expired);
  EXPECT_EQ(WaitColumn("late", "claimant"), "reaper");
}

TEST_F(StoreWaits, SecondClaimThrowsAlreadyClaimed) {
  SaveWait(run().id, "pay-1");
  Claim("pay-1", "worker-1", Json{{"first", true}});
  auto error = Catch<WaitAlreadyClaimedError>([&] { Claim("pay-1", "worker-2", Json{{"x", 1}}); });
  EXPECT_EQ(error.key(), "pay-1");
  EXPECT_EQ(error.status(), "RESUMING");
  EXPECT_EQ(WaitColumn("pay-1", "claimant"), "worker-1");
  EXPECT_EQ(WaitColumn("pay-1", "payload->>'first'"), "true");
}

TEST_F(StoreWaits, ClaimOfUnknownKeyThrowsNotFound) {
  auto error = Catch<NotFoundError>([&] { Claim("nope", "worker-1"); });
  EXPECT_THAT(error.what(), HasSubstr("nope"));
}

TEST_F(StoreWaits, CompleteWaitMarksItResumed) {
  SaveWait(run().id, "pay-1");
  Claim("pay-1", "worker-1", Json{{"amount", 5}});
  WaitRecord done = Complete("pay-1", "worker-1");
  EXPECT_EQ(done.status, WaitStatus::kResumed);
  EXPECT_EQ(done.claimant, std::optional<std::string>("worker-1"));
  EXPECT_TRUE(done.resumed_at.has_value());
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records WHERE correlation_key = 'pay-1'"
                   " AND status = 'RESUMED' AND claimant = 'worker-1' AND resumed_at IS NOT NULL"
                   " AND finished_at IS NOT NULL AND payload->>'amount' = '5'"),
            1);
  // Completing twice is refused.
  EXPECT_THROW(Complete("pay-1", "worker-1"), WaitAlreadyClaimedError);
}

TEST_F(StoreWaits, CompleteByAnotherClaimantIsRefused) {
  SaveWait(run().id, "pay-1");
  Claim("pay-1", "worker-1");
  auto error = Catch<WaitAlreadyClaimedError>([&] { Complete("pay-1", "worker-2"); });
  EXPECT_THAT(error.what(), HasSubstr("worker-1"));
  EXPECT_EQ(WaitColumn("pay-1", "status"), "RESUMING");
  EXPECT_EQ(WaitColumn("pay-1", "resumed_at IS NULL"), "t");

  SaveWait(run().id, "unclaimed");
  EXPECT_THROW(Complete("unclaimed", "worker-1"), WaitAlreadyClaimedError);
  EXPECT_EQ(WaitColumn("unclaimed", "status"), "WAITING");
  EXPECT_THROW(Complete("nope", "worker-1"), NotFoundError);
}

TEST_F(StoreWaits, CancelWaitCancelsOnlyLiveWaits) {
  SaveWait(run().id, "waiting");
  SaveWait(run().id, "resuming");
  SaveWait(run().id, "resumed");
  Claim("resuming", "worker-1");
  Claim("resumed", "worker-1");
  Complete("resumed", "worker-1");

  auto cancel = [&](const std::string& key) {
    return conn().Transact([&](store::Tx& tx) { return store::CancelWait(tx, key); });
  };
  EXPECT_TRUE(cancel("waiting"));
  EXPECT_TRUE(cancel("resuming"));
  EXPECT_FALSE(cancel("resumed"));
  EXPECT_FALSE(cancel("waiting"));
  EXPECT_FALSE(cancel("nope"));
  EXPECT_EQ(Sql("SELECT string_agg(correlation_key || '=' || status, ',' ORDER BY correlation_key)"
                " FROM {s}.wait_records WHERE finished_at IS NOT NULL"),
            "resumed=RESUMED,resuming=CANCELLED,waiting=CANCELLED");
  // A cancelled wait cannot be claimed.
  auto error = Catch<WaitAlreadyClaimedError>([&] { Claim("waiting", "worker-1"); });
  EXPECT_EQ(error.status(), "CANCELLED");
}

// ---------------------------------------------------------------- idempotency

class StoreIdempotency : public StoreTest {
 protected:
  IdempotencyClaim Claim(const std::string& key, const std::string& owner,
                         std::chrono::milliseconds lease = 60s, const std::string& ns = "default") {
    return conn().Transact(
        [&](store::Tx& tx) { return store::ClaimIdempotencyKey(tx, ns, key, owner, lease); });
  }
  bool Complete(const std::string& key, const std::string& owner, const Json& result,
                std::chrono::milliseconds ttl = 24h, const std::string& ns = "default") {
    return conn().Transact([&](store::Tx& tx) {
      return store::CompleteIdempotencyKey(tx, ns, key, owner, result, ttl);
    });
  }
  bool Fail(const std::string& key, const std::string& owner, const std::string& error = "boom") {
    return conn().Transact(
        [&](store::Tx& tx) { return store::FailIdempotencyKey(tx, "default", key, owner, error); });
  }
  std::optional<IdempotencyRecord> Record(const std::string& key,
                                          const std::string& ns = "default") {
    return conn().Transact([&](store::Tx& tx) { return store::GetIdempotencyRecord(tx, ns, key); });
  }
  std::optional<Json> Result(const std::string& key, const std::string& ns = "default") {
    return conn().Transact([&](store::Tx& tx) { return store::IdempotencyResult(tx, ns, key); });
  }
  std::string KeyColumn(const std::string& key, const std::string& column) const {
    return Sql("SELECT " + column + " FROM {s}.idempotency_keys WHERE key = '" + key + "'");
  }
};

TEST_F(StoreIdempotency, FirstOwnerClaimsAndASecondSeesInProgressWithItsExpiry) {
  IdempotencyClaim first = Claim("charge-1", "owner-a");
  EXPECT_EQ(first.status, IdempotencyClaimStatus::kClaimed);
  EXPECT_FALSE(first.in_doubt);
  EXPECT_EQ(first.record.claims, 1);
  IdempotencyClaim second = Claim("charge-1", "owner-b");
  EXPECT_EQ(second.status, IdempotencyClaimStatus::kInProgress);
  EXPECT_FALSE(second.record.result.has_value());
  EXPECT_EQ(second.record.owner, std::optional<std::string>("owner-a"));
  EXPECT_EQ(KeyColumn("charge-1", "expires_at = '" + second.record.expires_at + "'::timestamptz"),
            "t");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.idempotency_keys WHERE key = 'charge-1'"
                   " AND status = 'in_progress' AND owner = 'owner-a' AND result IS NULL"
                   " AND expires_at > now() + interval '55 seconds'"),
            1);
  EXPECT_FALSE(Result("charge-1").has_value());
}

// The owner asking again took its own claim back: its earlier attempt died
// (or gave up) before completing, so whether the effect happened is in doubt.
TEST_F(StoreIdempotency, TheOwnerReclaimingItsOwnClaimTakesItBackInDoubt) {
  Claim("charge-1", "run-1");
  IdempotencyClaim again = Claim("charge-1", "run-1");
  EXPECT_EQ(again.status, IdempotencyClaimStatus::kClaimed);
  EXPECT_TRUE(again.in_doubt);
  EXPECT_EQ(again.record.claims, 2);
  EXPECT_EQ(KeyColumn("charge-1", "status || ' ' || owner || ' ' || claims"),
            "in_progress run-1 2");
}

TEST_F(StoreIdempotency, KeysAreScopedByNamespace) {
  EXPECT_EQ(Claim("charge-1", "owner-a", 60s, "shop").status, IdempotencyClaimStatus::kClaimed);
  EXPECT_EQ(Claim("charge-1", "owner-b", 60s, "billing").status, IdempotencyClaimStatus::kClaimed);
  EXPECT_TRUE(Complete("charge-1", "owner-a", Json{{"in", "shop"}}, 1h, "shop"));
  EXPECT_FALSE(Complete("charge-1", "owner-a", Json{{"in", "billing"}}, 1h, "billing"));
  EXPECT_EQ(Result("charge-1", "shop"), std::optional<Json>(Json{{"in", "shop"}}));
  EXPECT_FALSE(Result("charge-1", "billing").has_value());
  EXPECT_FALSE(Record("charge-1").has_value());  // nothing in "default"
  EXPECT_EQ(Record("charge-1", "billing")->status, "in_progress");
  EXPECT_EQ(Record("charge-1", "shop")->namespace_name, "shop");
}

TEST_F(StoreIdempotency, CompletedKeyReturnsTheCachedResult) {
  Claim("charge-1", "owner-a");
  EXPECT_TRUE(Complete("charge-1", "owner-a", Json{{"receipt", "r-9"}}, 1h));

  IdempotencyClaim again = Claim("charge-1", "owner-b");
  EXPECT_EQ(again.status, IdempotencyClaimStatus::kCompleted);
  EXPECT_EQ(again.record.result, std::optional<Json>(Json{{"receipt", "r-9"}}));
  EXPECT_EQ(Result("charge-1"), std::optional<Json>(Json{{"receipt", "r-9"}}));
  // The owner itself is served the result too: a completed key is never
  // claimed again before it expires.
  EXPECT_EQ(Claim("charge-1", "owner-a").status, IdempotencyClaimStatus::kCompleted);

  auto record = Record("charge-1");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->key, "charge-1");
  EXPECT_EQ(record->namespace_name, "default");
  EXPECT_EQ(record->status, "completed");
  EXPECT_EQ(record->owner, std::optional<std::string>("owner-a"));
  EXPECT_EQ(record->result, std::optional<Json>(Json{{"receipt", "r-9"}}));
  EXPECT_TRUE(record->completed_at.has_value());
  EXPECT_FALSE(record->expired);
  EXPECT_EQ(KeyColumn("charge-1", "expires_at = '" + record->expires_at + "'::timestamptz"), "t");
  EXPECT_FALSE(record->created_at.empty());
  // The TTL runs from completion, by database time.
  EXPECT_EQ(KeyColumn("charge-1",
                      "expires_at > now() + interval '59 minutes'"
                      " AND expires_at <= now() + interval '60 minutes'"
                      " AND owner = 'owner-a' AND status = 'completed'"),
            "t");
  EXPECT_FALSE(Record("unknown").has_value());
  EXPECT_FALSE(Result("unknown").has_value());
}

TEST_F(StoreIdempotency, CompleteByAnotherOwnerIsRefused) {
  Claim("charge-1", "owner-a");
  EXPECT_FALSE(Complete("charge-1", "owner-b", Json{{"x", 1}}));
  EXPECT_FALSE(Complete("unknown", "owner-a", Json{{"x", 1}}));
  EXPECT_EQ(KeyColumn("charge-1", "status"), "in_progress");
  EXPECT_EQ(KeyColumn("charge-1", "result IS NULL"), "t");
}

TEST_F(StoreIdempotency, ExpiredInProgressClaimIsReclaimedByAnotherOwnerInDoubt) {
  EXPECT_EQ(Claim("charge-1", "owner-a", -1ms).status, IdempotencyClaimStatus::kClaimed);
  EXPECT_TRUE(Record("charge-1")->expired);

  IdempotencyClaim taken = Claim("charge-1", "owner-b");
  EXPECT_EQ(taken.status, IdempotencyClaimStatus::kClaimed);
  EXPECT_TRUE(taken.in_doubt);
  EXPECT_EQ(KeyColumn("charge-1", "owner"), "owner-b");
  EXPECT_FALSE(Record("charge-1")->expired);
  // The first owner lost it: its completion and its failure are refused.
  EXPECT_FALSE(Complete("charge-1", "owner-a", Json{{"stale", true}}));
  EXPECT_FALSE(Fail("charge-1", "owner-a"));
  EXPECT_TRUE(Complete("charge-1", "owner-b", Json{{"fresh", true}}));
  EXPECT_EQ(Result("charge-1"), std::optional<Json>(Json{{"fresh", true}}));
}

TEST_F(StoreIdempotency, ZeroLeaseClaimExpiresForTheNextTransaction) {
  EXPECT_EQ(Claim("charge-1", "owner-a", 0ms).status, IdempotencyClaimStatus::kClaimed);
  EXPECT_EQ(Claim("charge-1", "owner-b").status, IdempotencyClaimStatus::kClaimed);
  EXPECT_EQ(KeyColumn("charge-1", "owner"), "owner-b");
}

TEST_F(StoreIdempotency, ExpiredResultIsNotServedAndTheKeyCanBeClaimedAgain) {
  Claim("charge-1", "owner-a");
  EXPECT_TRUE(Complete("charge-1", "owner-a", Json{{"old", true}}, -1ms));
  EXPECT_FALSE(Result("charge-1").has_value());
  EXPECT_TRUE(Record("charge-1")->expired);
  IdempotencyClaim again = Claim("charge-1", "owner-b");
  EXPECT_EQ(again.status, IdempotencyClaimStatus::kClaimed);
  EXPECT_FALSE(again.in_doubt);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.idempotency_keys WHERE key = 'charge-1'"
                   " AND status = 'in_progress' AND owner = 'owner-b' AND result IS NULL"
                   " AND completed_at IS NULL"),
            1);
}

TEST_F(StoreIdempotency, FailedKeyIsKeptWithItsErrorAndClaimableAgain) {
  Claim("charge-1", "owner-a");
  EXPECT_FALSE(Fail("charge-1", "owner-b"));
  EXPECT_EQ(KeyColumn("charge-1", "status"), "in_progress");
  EXPECT_TRUE(Fail("charge-1", "owner-a", "card declined"));
  auto failed = Record("charge-1");
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->status, "failed");
  EXPECT_EQ(failed->error, std::optional<std::string>("card declined"));
  EXPECT_FALSE(Fail("charge-1", "owner-a"));  // no longer in progress

  // Claimable at once, by anyone, and not in doubt: the effect did not happen.
  IdempotencyClaim again = Claim("charge-1", "owner-b");
  EXPECT_EQ(again.status, IdempotencyClaimStatus::kClaimed);
  EXPECT_FALSE(again.in_doubt);
  EXPECT_EQ(again.record.error, std::optional<std::string>("card declined"));
  EXPECT_EQ(KeyColumn("charge-1", "status || ' ' || owner || ' ' || (error IS NULL)"),
            "in_progress owner-b true");

  // A completed key is not failed.
  Complete("charge-1", "owner-b", Json{{"ok", true}});
  EXPECT_FALSE(Fail("charge-1", "owner-b"));
  EXPECT_EQ(KeyColumn("charge-1", "status"), "completed");
}

TEST_F(StoreIdempotency, InvalidKeysOwnersAndResultsAreRefusedAndChangeNothing) {
  const std::vector<std::pair<std::function<void()>, std::string>> refused = {
      {[&] { Claim("", "owner-a"); }, "the idempotency key is empty"},
      {[&] { Claim("charge-1", ""); }, "the idempotency owner is empty"},
      {[&] { Claim("charge-1", "owner-a", 60s, ""); }, "the idempotency namespace is empty"},
      {[&] { Claim(std::string(513, 'k'), "owner-a"); },
       "the idempotency key is 513 bytes, over the limit of 512 bytes"},
  };
  for (const auto& [call, message] : refused) {
    auto error = Catch<Error>(call);
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument) << error.what();
    EXPECT_THAT(error.what(), HasSubstr(message));
  }
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.idempotency_keys"), 0);
  Claim("charge-1", "owner-a");
  Sql("UPDATE {s}.limits SET value = 100 WHERE name = 'max_idempotency_result_bytes'");
  auto error = Catch<Error>([&] {
    Complete("charge-1", "owner-a", Json{{"big", std::string(200, 'x')}});
  });
  EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
  EXPECT_THAT(error.what(), HasSubstr("max_idempotency_result_bytes"));
  EXPECT_EQ(KeyColumn("charge-1", "status"), "in_progress");
}

TEST_F(StoreIdempotency, RetentionDeletesExpiredKeysOfEveryStatus) {
  Claim("done", "owner-a");
  Complete("done", "owner-a", Json{{"ok", true}}, -1ms);
  Claim("failed", "owner-a", -1ms);
  Fail("failed", "owner-a");
  Claim("abandoned", "owner-a", -1ms);
  Claim("live", "owner-a");
  Claim("live", "owner-a", 60s, "other");
  EXPECT_EQ(conn().Transact([](store::Tx& tx) { return store::CleanupIdempotencyKeys(tx); }), 3);
  EXPECT_EQ(Sql("SELECT string_agg(namespace || '/' || key, ',' ORDER BY namespace) "
                "FROM {s}.idempotency_keys"),
            "default/live,other/live");
}

TEST_F(StoreIdempotency, CleanupRemovesExpiredKeysAndReturnsTheCount) {
  Claim("expired-claim-1", "a", -1ms);
  Claim("expired-claim-2", "a", -1ms);
  Claim("expired-result", "a");
  Complete("expired-result", "a", Json{{"x", 1}}, -1ms);
  Claim("live-claim", "a");
  Claim("live-result", "a");
  Complete("live-result", "a", Json{{"x", 1}});

  auto cleanup = [&](int limit) {
    return conn().Transact([&](store::Tx& tx) { return store::CleanupIdempotencyKeys(tx, limit); });
  };
  EXPECT_EQ(cleanup(2), 2);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.idempotency_keys"), 3);
  EXPECT_EQ(cleanup(1000), 1);
  EXPECT_EQ(cleanup(1000), 0);
  EXPECT_EQ(Sql("SELECT string_agg(key, ',' ORDER BY key) FROM {s}.idempotency_keys"),
            "live-claim,live-result");
}

// ---------------------------------------------------------------- stack lock

class StoreStackLock : public StoreTest {
 protected:
  int64_t AdvisoryLocksOf(int pid) const {
    return SqlInt(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = " +
        std::to_string(pid));
  }
};

TEST_F(StoreStackLock, HeldByOneConnectionBlocksAnother) {
  cairn::Run run = CreateRun();
  cairn::Run other_run = CreateRun();
  auto other = Open();
  EXPECT_TRUE(conn().TryLockStack(run.id));
  EXPECT_TRUE(conn().HoldsStack(run.id));
  EXPECT_EQ(AdvisoryLocksOf(conn().BackendPid()), 1);
  EXPECT_FALSE(other->TryLockStack(run.id));
  EXPECT_FALSE(other->HoldsStack(run.id));
  // Another run's stack is independent.
  EXPECT_TRUE(other->TryLockStack(other_run.id));
  other->UnlockStack(other_run.id);

  conn().UnlockStack(run.id);
  EXPECT_FALSE(conn().HoldsStack(run.id));
  EXPECT_EQ(AdvisoryLocksOf(conn().BackendPid()), 0);
  EXPECT_TRUE(other->TryLockStack(run.id));
  EXPECT_FALSE(conn().TryLockStack(run.id));
  other->UnlockStack(run.id);
}

TEST_F(StoreStackLock, ReentrantForItsHolder) {
  cairn::Run run = CreateRun();
  auto other = Open();
  EXPECT_TRUE(conn().TryLockStack(run.id));
  EXPECT_TRUE(conn().TryLockStack(run.id));
  conn().UnlockStack(run.id);
  EXPECT_TRUE(conn().HoldsStack(run.id));
  EXPECT_FALSE(other->TryLockStack(run.id)) << "one unlock of two released the lock";
  EXPECT_EQ(AdvisoryLocksOf(conn().BackendPid()), 1);
  conn().UnlockStack(run.id);
  EXPECT_EQ(AdvisoryLocksOf(conn().BackendPid()), 0);
  EXPECT_TRUE(other->TryLockStack(run.id));
  other->UnlockStack(run.id);
}

// The slot's one statement takes the same lock TryLockStack takes, reads the
// run only when it got it, and counts as one more hold for its holder.
TEST_F(StoreStackLock, LockStackAndLoadRunTakesTheSameLockAndReadsTheRun) {
  cairn::Run run = CreateRun();
  auto other = Open();
  store::StackLockedRun mine = store::LockStackAndLoadRun(conn(), run.id);
  EXPECT_TRUE(mine.locked);
  ASSERT_TRUE(mine.run.has_value());
  EXPECT_EQ(mine.run->run.version, run.version);
  EXPECT_FALSE(mine.run->resume.has_value());
  EXPECT_FALSE(other->TryLockStack(run.id));
  const store::StackLockedRun theirs = store::LockStackAndLoadRun(*other, run.id);
  EXPECT_FALSE(theirs.locked);
  EXPECT_FALSE(theirs.run.has_value());
  EXPECT_FALSE(other->HoldsStack(run.id));

  // Re-entrant: the session's lock is taken once, released by the last unlock.
  EXPECT_TRUE(store::LockStackAndLoadRun(conn(), run.id).locked);
  EXPECT_EQ(AdvisoryLocksOf(conn().BackendPid()), 1);
  conn().UnlockStack(run.id);
  EXPECT_FALSE(other->TryLockStack(run.id)) << "one unlock of two released the lock";
  conn().UnlockStack(run.id);
  EXPECT_EQ(AdvisoryLocksOf(conn().BackendPid()), 0);
  EXPECT_TRUE(other->TryLockStack(run.id));
  other->UnlockStack(run.id);

  // A run that is gone: locked, nothing to execute.
  const store::StackLockedRun gone = store::LockStackAndLoadRun(conn(), kUnknownRun);
  EXPECT_TRUE(gone.locked);
  EXPECT_FALSE(gone.run.has_value());
  conn().UnlockStack(kUnknownRun);
  EXPECT_EQ(AdvisoryLocksOf(conn().BackendPid()), 0);
}

// A batch slot's one statement: a result per run in their order, each lock
// taken or not on its own.
TEST_F(StoreStackLock, LockStacksAndLoadRunsTakesEachLockOnItsOwn) {
  cairn::Run first = CreateRun();
  cairn::Run taken = CreateRun();
  cairn::Run third = CreateRun();
  auto other = Open();
  ASSERT_TRUE(other->TryLockStack(taken.id));
  ASSERT_TRUE(conn().TryLockStack(third.id));  // held already: not taken twice

  const std::vector<store::StackLockedRun> got =
      store::LockStacksAndLoadRuns(conn(), {first.id, taken.id, third.id});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(got[0].locked);
  ASSERT_TRUE(got[0].run.has_value());
  EXPECT_EQ(got[0].run->run.id, first.id);
  EXPECT_FALSE(got[1].locked);
  EXPECT_FALSE(got[1].run.has_value());
  EXPECT_TRUE(got[2].locked);
  ASSERT_TRUE(got[2].run.has_value());
  EXPECT_EQ(got[2].run->run.id, third.id);
  EXPECT_EQ(AdvisoryLocksOf(conn().BackendPid()), 2);

  // One unlock each for the first, two for the third.
  conn().UnlockStacks({first.id, taken.id, third.id});
  EXPECT_FALSE(other->TryLockStack(third.id)) << "one unlock of two released the lock";
  EXPECT_TRUE(other->TryLockStack(first.id));
  conn().UnlockStacks({third.id});
  EXPECT_EQ(AdvisoryLocksOf(conn().BackendPid()), 0);
  other->UnlockStacks({first.id, taken.id});
}

// A checkpoint that parks its run can let the slot's stack lock go in its
// own statement: only when it lands, and only the session's last hold.
TEST_F(StoreStackLock, ACheckpointThatLandsReleasesTheLastHoldOfTheStack) {
  cairn::Run run = CreateRun();
  auto other = Open();
  cairn::Checkpoint done;
  done.run_id = run.id;
  done.status = RunStatus::kCompleted;
  auto save = [&](int64_t version) {
    done.expected_version = version;
    return conn().Autocommit(
        [&](store::Tx& tx) { return store::SaveCheckpoint(tx, done, {}, true); });
  };

  // Stale: nothing lands, the lock stays.
  ASSERT_TRUE(conn().TryLockStack(run.id));
  EXPECT_THROW(save(run.version + 5), OccConflictError);
  EXPECT_TRUE(conn().HoldsStack(run.id));
  EXPECT_EQ(AdvisoryLocksOf(conn().BackendPid()), 1);

  // Held twice: the checkpoint lands and the session keeps the lock.
  ASSERT_TRUE(conn().TryLockStack(run.id));
  done.status = RunStatus::kRunning;
  done.lease_owner = "worker-1";
  const int64_t second = save(run.version).version;
  EXPECT_TRUE(conn().HoldsStack(run.id));
  EXPECT_FALSE(other->TryLockStack(run.id));
  conn().UnlockStack(run.id);

  // The last hold goes with the checkpoint: no unlock round trip left.
  done.status = RunStatus::kCompleted;
  done.lease_owner.reset();
  save(second);
  EXPECT_FALSE(conn().HoldsStack(run.id));
  EXPECT_EQ(AdvisoryLocksOf(conn().BackendPid()), 0);
  EXPECT_EQ(RunColumn(run.id, "status"), "completed");
  EXPECT_TRUE(other->TryLockStack(run.id));
  other->UnlockStack(run.id);
}

TEST_F(StoreStackLock, ReleasedOnEveryPathOutOfTheScope) {
  cairn::Run run = CreateRun();
  auto other = Open();
  {
    store::StackLock lock(conn(), run.id);
    EXPECT_FALSE(other->TryLockStack(run.id));
    { store::StackLock nested(conn(), run.id); }
    EXPECT_FALSE(other->TryLockStack(run.id));
  }
  EXPECT_EQ(AdvisoryLocksOf(conn().BackendPid()), 0);

  EXPECT_THROW(
      {
        store::StackLock lock(conn(), run.id);
        conn().Transact([&](store::Tx& tx) { store::GetRun(tx, run.id); });
        throw std::runtime_error("step failed");
      },
      std::runtime_error);
  EXPECT_EQ(AdvisoryLocksOf(conn().BackendPid()), 0);
  EXPECT_FALSE(conn().HoldsStack(run.id));
  EXPECT_TRUE(other->TryLockStack(run.id));
  other->UnlockStack(run.id);
}

TEST_F(StoreStackLock, StackLockOnAHeldRunThrowsLockUnavailable) {
  cairn::Run run = CreateRun();
  auto other = Open();
  store::StackLock held(conn(), run.id);
  auto error = Catch<LockUnavailableError>([&] { store::StackLock second(*other, run.id); });
  EXPECT_EQ(error.run_id(), run.id);
  EXPECT_EQ(error.kind(), ErrorKind::kConflict);
  EXPECT_THAT(error.what(), HasSubstr(run.id));
  EXPECT_THAT(error.what(), HasSubstr("held by another session"));
  EXPECT_FALSE(other->HoldsStack(run.id));
  EXPECT_EQ(AdvisoryLocksOf(other->BackendPid()), 0);
}

TEST_F(StoreStackLock, FreeAgainAfterTheHoldersBackendIsTerminated) {
  cairn::Run run = CreateRun();
  auto holder = Open();
  auto other = Open();
  {
    store::StackLock held(*holder, run.id);
    ASSERT_FALSE(other->TryLockStack(run.id));
    TerminateBackend(holder->BackendPid());
    EXPECT_TRUE(other->TryLockStack(run.id));
    // Leaving the scope on a dead session neither throws nor touches the new
    // holder's lock.
  }
  EXPECT_FALSE(holder->HoldsStack(run.id));
  EXPECT_EQ(AdvisoryLocksOf(other->BackendPid()), 1);
  other->UnlockStack(run.id);
  EXPECT_EQ(AdvisoryLocksOf(other->BackendPid()), 0);
}

TEST_F(StoreStackLock, TheLockKeyIncludesTheSchema) {
  cairn::Run run = CreateRun();
  store::ConnectionOptions options;
  options.url = url();
  options.schema = schema() + "_other";  // no tables needed for the lock
  store::Connection elsewhere(options);
  store::StackLock held(conn(), run.id);
  EXPECT_TRUE(elsewhere.TryLockStack(run.id));
  elsewhere.UnlockStack(run.id);
}

// ---------------------------------------------------------------- claim

class StoreClaim : public StoreTest {
 protected:
  // A ready run of `queue` at `priority`, due `due_in_seconds` from now (by
  // database time), of definition `hash`; returns its id.
  std::string Ready(const std::string& queue, int priority, int due_in_seconds,
                    const std::string& hash = "hash-1") {
    return Sql(
        "INSERT INTO {s}.runs (workflow, definition_version, definition_hash, cursor, "
        "queue, priority, run_at) VALUES ('orders', 1, '" +
        hash + "', 'reserve', '" + queue + "', " + std::to_string(priority) + ", now() + " +
        std::to_string(due_in_seconds) +
        " * interval '1 second') "
        "RETURNING id");
  }

  std::vector<std::string> Claim(store::Connection& connection,
                                 const std::vector<std::string>& queues, int limit) {
    auto claims = connection.Transact([&](store::Tx& tx) {
      return store::ClaimRuns(tx, queues, {"hash-1"}, limit, "worker-1", 30s);
    });
    std::vector<std::string> ids;
    for (const auto& claim : claims) ids.push_back(claim.run.id);
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  std::vector<std::string> Claim(const std::vector<std::string>& queues, int limit) {
    return Claim(conn(), queues, limit);
  }
  static std::vector<std::string> Sorted(std::vector<std::string> ids) {
    std::sort(ids.begin(), ids.end());
    return ids;
  }
};

// Across the worker's queues the claim takes the most urgent due runs: by
// priority, then due time, whichever queue they are in, and no more than asked
// even when each queue alone has that many.
TEST_F(StoreClaim, TakesTheMostUrgentDueRunsAcrossQueues) {
  const std::string mail_high = Ready("mail", 5, -10);
  const std::string bulk_high = Ready("bulk", 5, -5);
  const std::string mail_low_older = Ready("mail", 0, -60);
  Ready("mail", 0, -30);
  Ready("bulk", 0, -20);
  Ready("mail", 9, 3600);  // the most urgent, but not due yet
  Ready("other", 9, -60);  // a queue the worker does not serve
  EXPECT_EQ(Claim({"mail", "bulk", "mail"}, 3), Sorted({mail_high, bulk_high, mail_low_older}));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'running'"), 3);
  EXPECT_EQ(Claim({"mail", "bulk"}, 10).size(), 2u);
  EXPECT_TRUE(Claim({"mail", "bulk"}, 10).empty());
}

// Runs of a definition the worker has not loaded are passed over, even when
// they come first in the queue's order.
TEST_F(StoreClaim, PassesOverRunsOfDefinitionsItDoesNotServe) {
  Ready("default", 9, -60, "hash-other");
  Ready("default", 9, -50, "hash-other");
  const std::string served = Ready("default", 0, -1);
  EXPECT_EQ(Claim({"default"}, 1), std::vector<std::string>{served});
}

// A run another claim holds locked is skipped, not waited for, and claimed
// once that claim let it go without taking it.
TEST_F(StoreClaim, SkipsRunsAnotherClaimHoldsLocked) {
  const std::string first = Ready("default", 0, -60);
  const std::string second = Ready("default", 0, -30);
  auto other = Open();
  std::promise<void> locked;
  std::promise<void> release;
  std::thread holder([&] {
    other->Transact([&](store::Tx& tx) {
      store::ClaimRuns(tx, {"default"}, {"hash-1"}, 1, "worker-2", 30s);
      locked.set_value();
      release.get_future().wait();
      tx.RollBackOnReturn();
    });
  });
  locked.get_future().wait();
  EXPECT_EQ(Claim({"default"}, 2), std::vector<std::string>{second});
  release.set_value();
  holder.join();
  EXPECT_EQ(Claim({"default"}, 2), std::vector<std::string>{first});
}

// A batch takes its runs in the order the claim returns them: the claim's
// own, by priority, then due time, whatever the plan (here the engine's
// generic one).
TEST_F(StoreClaim, ReturnsItsRunsInTheClaimsOrder) {
  const std::string low = Ready("default", 0, -60);
  const std::string high = Ready("default", 9, -1);
  const std::string middle_later = Ready("default", 5, -5);
  const std::string middle = Ready("default", 5, -30);
  auto engine = Open("cairn-test", true);
  for (int i = 0; i < 3; ++i) {
    const auto claims = engine->Transact([](store::Tx& tx) {
      tx.RollBackOnReturn();
      return store::ClaimRuns(tx, {"default"}, {"hash-1"}, 4, "worker-1", 30s);
    });
    std::vector<std::string> order;
    for (const auto& claim : claims) order.push_back(claim.run.id);
    EXPECT_EQ(order, (std::vector<std::string>{high, middle, middle_later, low}));
  }
}

// An engine session plans the claim once, without knowing how many runs it
// will ask for, and the planner then assumes a tenth of the due runs. When
// most of the table is ready and the due index has grown with the runs
// that went through it (every start adds an entry, every claim leaves one
// behind for vacuum), reading every run and sorting the ready ones looked
// cheaper than the index: every claim read the whole backlog (12 000 runs,
// 5 to 10 ms a claim; a daemon of 8 slots drained at a tenth of its rate).
// The claim reads the due index in order, a few rows a claim, whatever the
// statistics.
TEST_F(StoreClaim, ReadsAFewRunsWhenMostOfTheTableIsReady) {
  // The due index grown by runs gone through it: wide entries (a long
  // queue name) fill its pages as a long history of runs would.
  Sql("INSERT INTO {s}.runs (workflow, definition_version, definition_hash, cursor, queue) "
      "SELECT 'orders', 1, 'hash-1', 'reserve', "
      "(SELECT string_agg(md5(i::text || j), '') FROM generate_series(1, 30) j) "
      "FROM generate_series(1, 30000) i");
  Sql("DELETE FROM {s}.runs");
  Sql("VACUUM {s}.runs");
  Sql("INSERT INTO {s}.runs (workflow, definition_version, definition_hash, cursor, run_at) "
      "SELECT 'orders', 1, 'hash-1', 'reserve', now() - interval '1 hour' "
      "FROM generate_series(1, 8000)");
  Sql("INSERT INTO {s}.runs (workflow, definition_version, definition_hash, cursor, status, "
      "finished_at) SELECT 'orders', 1, 'hash-1', 'reserve', 'completed', now() "
      "FROM generate_series(1, 4000)");
  Sql("ANALYZE {s}.runs");
  auto engine = Open("cairn-test", true);
  for (int i = 0; i < 6; ++i) {
    engine->Transact([&](store::Tx& tx) {
      const int64_t read_before = RunRowsRead(tx);
      EXPECT_EQ(store::ClaimRuns(tx, {"default"}, {"hash-1"}, 1, "worker-1", 30s).size(), 1u);
      EXPECT_LE(RunRowsRead(tx) - read_before, 20);
    });
  }
}

// A session that leaves JIT on (the server's default: a session through a
// pooler that drops cairn's session settings, a tool calling the SQL API)
// does not have the claim compiled by LLVM. Planned with enable_sort off, the
// claim's plan costs its few remaining sorts as disabled, far past every
// JIT threshold, and LLVM compiled it at each call: 0.3 s a claim.
TEST_F(StoreClaim, CompilesNothingOnASessionThatLeavesJitOn) {
  PgSession session(url());
  if (session.Value("SELECT pg_jit_available()") != "t") GTEST_SKIP() << "the server has no JIT";
  Ready("default", 0, -1);
  session.Value("SET jit = on");
  session.Value("SET client_min_messages = debug1");
  // The control: a statement past jit_above_cost is compiled, and the
  // server says so.
  session.Value("SET jit_above_cost = 0");
  session.Value("SELECT sum(g) FROM generate_series(1, 10) g");
  EXPECT_THAT(session.TakeNotices(), testing::Contains(testing::HasSubstr("time to inline")));
  session.Value("RESET jit_above_cost");
  session.Value("BEGIN");
  EXPECT_EQ(session.Value(InSchema("SELECT count(*) FROM {s}.claim_runs(ARRAY['default'], "
                                   "ARRAY['hash-1'], 1, 'worker-1', 30000)")),
            "1");
  session.Value("ROLLBACK");
  EXPECT_THAT(session.TakeNotices(),
              testing::Not(testing::Contains(testing::HasSubstr("time to"))));
}

// The claim's transaction commits without waiting for a WAL flush; the
// session's next transaction (a checkpoint) waits for it again.
TEST_F(StoreClaim, CommitsWithoutWaitingForTheWalFlushAndOnlyItself) {
  Ready("default", 0, -1);
  const auto synchronous_commit = [](store::Tx& tx) {
    return store::ExecuteStepSql(tx, "SELECT current_setting('synchronous_commit') AS value",
                                 nullptr)[0]["value"]
        .get<std::string>();
  };
  EXPECT_EQ(conn().Transact([&](store::Tx& tx) {
    EXPECT_EQ(store::ClaimRuns(tx, {"default"}, {"hash-1"}, 1, "worker-1", 30s).size(), 1u);
    return synchronous_commit(tx);
  }),
            "off");
  EXPECT_EQ(conn().Transact(synchronous_commit), "on");
}

// As the worker claims: one statement, its own implicit transaction, after
// which the session's next commit (a slot's checkpoint) waits for the flush.
TEST_F(StoreClaim, OneStatementClaimLeavesTheSessionFlushingItsCommits) {
  Ready("default", 0, -1);
  EXPECT_EQ(conn()
                .Autocommit([&](store::Tx& tx) {
                  return store::ClaimRuns(tx, {"default"}, {"hash-1"}, 1, "worker-1", 30s);
                })
                .size(),
            1u);
  EXPECT_EQ(conn().Autocommit([](store::Tx& tx) {
    return store::ExecuteStepSql(tx, "SELECT current_setting('synchronous_commit') AS value",
                                 nullptr)[0]["value"]
        .get<std::string>();
  }),
            "on");
}

// ---------------------------------------------------------------- a checkpoint's claim

class StoreCheckpointClaim : public StoreClaim {
 protected:
  // A run a slot of worker-1 executes on conn(): running, its stack locked.
  cairn::Run Held() {
    cairn::Run run = CreateRunningRun();
    EXPECT_TRUE(conn().TryLockStack(run.id));
    return run;
  }

  // The checkpoint that ends `run`, claiming the slot's next run with it.
  // A run handed back ready (`status`) is due at once.
  store::CheckpointAndNextRun Finish(const cairn::Run& run, int64_t version,
                                     RunStatus status = RunStatus::kCompleted) {
    cairn::Checkpoint done;
    done.run_id = run.id;
    done.expected_version = version;
    done.cursor = run.cursor;
    done.status = status;
    if (status == RunStatus::kReady) done.run_at = "2000-01-01 00:00:00+00";
    return conn().Autocommit(
        [&](store::Tx& tx) { return store::SaveCheckpointAndClaim(tx, done, {}, Next()); });
  }

  static store::ClaimRequest Next() { return {{"default"}, {"hash-1"}, "worker-1", 30s}; }

  bool LockedElsewhere(const std::string& run_id) {
    auto other = Open();
    if (!other->TryLockStack(run_id)) return true;
    other->UnlockStack(run_id);
    return false;
  }
};

// The checkpoint that parks a slot's run claims the slot's next run in its
// own statement: the run is the slot's (leased, its stack lock on the
// slot's session) and read as the slot executes it, with the wait it
// resumes from, which a signal claimed before.
TEST_F(StoreCheckpointClaim, ClaimsTheNextRunTakesItsStackLockAndReadsIt) {
  const cairn::Run done = Held();
  const cairn::Run resumed = CreateRunningRun();
  SaveWait(resumed.id, "pay-7");
  CommitStatus(resumed.id, RunStatus::kWaiting);
  ASSERT_EQ(Sql("SELECT {s}.signal('pay-7', '{\"paid\": 7}')"), "delivered");

  const store::CheckpointAndNextRun saved = Finish(done, done.version);
  EXPECT_EQ(saved.checkpoint.status, RunStatus::kCompleted);
  EXPECT_EQ(RunColumn(done.id, "status"), "completed");
  EXPECT_FALSE(conn().HoldsStack(done.id));
  EXPECT_FALSE(LockedElsewhere(done.id));

  ASSERT_TRUE(saved.next.has_value());
  EXPECT_EQ(saved.next->run_id, resumed.id);
  EXPECT_FALSE(saved.next->step_tokens);
  EXPECT_TRUE(saved.next->opened.locked);
  EXPECT_TRUE(conn().HoldsStack(resumed.id));
  EXPECT_TRUE(LockedElsewhere(resumed.id));
  ASSERT_TRUE(saved.next->opened.run.has_value());
  const store::RunForExecution& next = *saved.next->opened.run;
  EXPECT_EQ(next.run.status, RunStatus::kRunning);
  EXPECT_EQ(next.run.lease_owner, std::optional<std::string>("worker-1"));
  EXPECT_EQ(next.run.version, std::stoll(RunColumn(resumed.id, "version")));
  EXPECT_EQ(RunColumn(resumed.id, "status"), "running");
  EXPECT_FALSE(next.past_deadline);
  ASSERT_TRUE(next.resume.has_value());
  EXPECT_EQ(next.resume->correlation_key, "pay-7");
  EXPECT_EQ(next.resume->payload, Json({{"paid", 7}}));
  conn().UnlockStack(resumed.id);
}

// A checkpoint that does not land claims nothing, and keeps its stack lock.
TEST_F(StoreCheckpointClaim, ClaimsNothingWhenItsCheckpointIsFenced) {
  const cairn::Run done = Held();
  const std::string due = Ready("default", 0, -1);
  EXPECT_THROW(Finish(done, done.version + 1), OccConflictError);
  EXPECT_EQ(RunColumn(due, "status"), "ready");
  EXPECT_EQ(RunColumn(due, "lease_owner"), "");
  EXPECT_FALSE(conn().HoldsStack(due));
  EXPECT_FALSE(LockedElsewhere(due));
  EXPECT_TRUE(conn().HoldsStack(done.id));
  EXPECT_TRUE(LockedElsewhere(done.id));
  conn().UnlockStack(done.id);
}

// A run the checkpoint hands back due at once is not claimed by that same
// checkpoint: its transaction holds the row, which SKIP LOCKED would not
// pass over, and the stack lock the statement lets go of.
TEST_F(StoreCheckpointClaim, NeverClaimsTheRunItParks) {
  const cairn::Run done = Held();
  const store::CheckpointAndNextRun saved = Finish(done, done.version, RunStatus::kReady);
  EXPECT_FALSE(saved.next.has_value());
  EXPECT_EQ(RunColumn(done.id, "status"), "ready");
  EXPECT_FALSE(conn().HoldsStack(done.id));
  EXPECT_FALSE(LockedElsewhere(done.id));
  // It is due: the next claim takes it.
  EXPECT_EQ(Claim({"default"}, 1), std::vector<std::string>{done.id});
}

// The claim rides on a checkpoint's commit, which must reach the disk: it
// does not turn the flush off as the poller's claim does for itself. (In a
// transaction of the test's, to read the setting the commit will see.)
TEST_F(StoreCheckpointClaim, CommitsWithTheCheckpointsFlush) {
  const cairn::Run done = Held();
  const std::string due = Ready("default", 0, -1);
  cairn::Checkpoint last;
  last.run_id = done.id;
  last.expected_version = done.version;
  last.status = RunStatus::kCompleted;
  const auto [claimed, synchronous_commit] = conn().Transact([&](store::Tx& tx) {
    const bool got = store::SaveCheckpointAndClaim(tx, last, {}, Next()).next.has_value();
    return std::make_pair(got, Setting(tx, "synchronous_commit"));
  });
  EXPECT_TRUE(claimed);
  EXPECT_EQ(synchronous_commit, "on");
  conn().UnlockStack(due);
}

// A checkpoint's claim leaves queues with limits to the other claims: their
// limit rows would stay locked through the checkpoint's flush.
TEST_F(StoreCheckpointClaim, LeavesQueuesWithLimitsToOtherClaims) {
  const cairn::Run done = Held();
  const std::string limited = Ready("limited", 9, -60);
  const std::string open = Ready("default", 0, -1);
  Sql("INSERT INTO {s}.queue_limits (queue, max_running) VALUES ('limited', 10)");
  cairn::Checkpoint last;
  last.run_id = done.id;
  last.expected_version = done.version;
  last.status = RunStatus::kCompleted;
  store::ClaimRequest both = Next();
  both.queues = {"limited", "default"};
  const store::CheckpointAndNextRun saved = conn().Autocommit(
      [&](store::Tx& tx) { return store::SaveCheckpointAndClaim(tx, last, {}, both); });
  ASSERT_TRUE(saved.next.has_value());
  EXPECT_EQ(saved.next->run_id, open);
  EXPECT_EQ(RunColumn(limited, "status"), "ready");
  conn().UnlockStack(open);
  // The poller's claim takes it.
  EXPECT_EQ(Claim({"limited"}, 1), std::vector<std::string>{limited});
}

// A statement that fails after its claim took the next run's stack lock
// (here a trigger at the end of the statement) rolls the claim back, but
// not the session's lock: the session lets go of the locks it does not
// count, and keeps the one it does.
TEST_F(StoreCheckpointClaim, LocksLeftByAFailedClaimAreLetGo) {
  const cairn::Run done = Held();
  const std::string due = Ready("default", 0, -1);
  Sql("CREATE FUNCTION {s}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "RAISE EXCEPTION 'refused after the claim'; END $$");
  Sql("CREATE TRIGGER refuse AFTER UPDATE OF status ON {s}.runs FOR EACH ROW WHEN "
      "(NEW.status = 'completed') EXECUTE FUNCTION {s}.refuse()");
  EXPECT_THROW(Finish(done, done.version), Error);
  EXPECT_EQ(RunColumn(due, "status"), "ready");
  EXPECT_FALSE(conn().HoldsStack(due));
  EXPECT_TRUE(LockedElsewhere(due)) << "the failed statement's lock was expected to outlive it";
  conn().ReleaseUncountedStackLocks();
  EXPECT_FALSE(LockedElsewhere(due));
  // The run whose checkpoint failed is still counted: its checkpoint goes
  // again, and lets it go when it lands.
  EXPECT_TRUE(conn().HoldsStack(done.id));
}

// Between runs, a slot claims its next run with the same function, in a
// statement of its own: the run's stack lock on its session, the run read
// with the wait it resumes from.
TEST_F(StoreCheckpointClaim, ASlotsOwnClaimTakesTheStackLockAndReadsTheRun) {
  const cairn::Run resumed = CreateRunningRun();
  SaveWait(resumed.id, "pay-8");
  CommitStatus(resumed.id, RunStatus::kWaiting);
  ASSERT_EQ(Sql("SELECT {s}.signal('pay-8', '{\"paid\": 8}')"), "delivered");
  const std::optional<store::ClaimedNextRun> claimed =
      conn().Autocommit([&](store::Tx& tx) { return store::ClaimRunForSlot(tx, Next()); });
  ASSERT_TRUE(claimed.has_value());
  EXPECT_EQ(claimed->run_id, resumed.id);
  EXPECT_TRUE(claimed->opened.locked);
  EXPECT_TRUE(conn().HoldsStack(resumed.id));
  EXPECT_TRUE(LockedElsewhere(resumed.id));
  ASSERT_TRUE(claimed->opened.run.has_value());
  EXPECT_EQ(claimed->opened.run->run.status, RunStatus::kRunning);
  ASSERT_TRUE(claimed->opened.run->resume.has_value());
  EXPECT_EQ(claimed->opened.run->resume->payload, Json({{"paid", 8}}));
  conn().UnlockStack(resumed.id);
  EXPECT_FALSE(conn()
                   .Autocommit([&](store::Tx& tx) { return store::ClaimRunForSlot(tx, Next()); })
                   .has_value());
}

// ---------------------------------------------------------------- session plans

class StoreSessionPlans : public StoreTest {
 protected:
  std::unique_ptr<store::Connection> OpenSession(bool generic_plans) const {
    return Open("cairn-test", generic_plans);
  }

  // The claim, run seven times on `connection`: its plans, generic and custom.
  static std::pair<int64_t, int64_t> ClaimPlans(store::Connection& connection) {
    for (int i = 0; i < 7; ++i) {
      connection.Transact(
          [](store::Tx& tx) { store::ClaimRuns(tx, {"default"}, {"hash-1"}, 1, "worker-1", 30s); });
    }
    return PreparedPlans(connection, "claim_runs");
  }

  static std::string PlanCacheMode(store::Tx& tx) { return Setting(tx, "plan_cache_mode"); }
};

// A session of the engine plans the claim once; any other session leaves it
// to PostgreSQL, which plans each of the first five executions anew.
TEST_F(StoreSessionPlans, AnEngineSessionPlansEachStatementOnce) {
  EXPECT_EQ(ClaimPlans(*OpenSession(true)), std::make_pair(int64_t{7}, int64_t{0}));
  EXPECT_GE(ClaimPlans(*OpenSession(false)).second, 5);
}

// A transactional step's own SQL is planned as the session would plan it
// without cairn; the engine's next statements are generic again.
TEST_F(StoreSessionPlans, AStepsOwnSqlIsPlannedAsWithoutCairn) {
  auto session = OpenSession(true);
  EXPECT_EQ(session->Transact([](store::Tx& tx) {
    store::ApplyStepTransactionSettings(tx, 5s);
    return PlanCacheMode(tx);
  }),
            "auto");
  EXPECT_EQ(session->Transact(PlanCacheMode), "force_generic_plan");
}

// Nor is anything of an engine session compiled with JIT: a generic plan's
// estimated cost passes jit_above_cost, and PostgreSQL compiled the claim at
// every execution (30 ms of LLVM for a 0.2 ms claim once its runs had many
// row versions). A step's own SQL gets the session's setting back, and an
// operator's own setting is kept.
TEST_F(StoreSessionPlans, AnEngineSessionCompilesNothingWithJitButAStepsSqlMay) {
  const auto jit = [](store::Tx& tx) { return Setting(tx, "jit"); };
  EXPECT_EQ(OpenSession(false)->Transact(jit), "on");
  auto session = OpenSession(true);
  EXPECT_EQ(session->Transact(jit), "off");
  EXPECT_EQ(session->Transact([&](store::Tx& tx) {
    store::ApplyStepTransactionSettings(tx, 5s);
    return jit(tx);
  }),
            "on");
  EXPECT_EQ(session->Transact(jit), "off");
  setenv("PGOPTIONS", "-c jit=on", 1);
  auto chosen = OpenSession(true);
  unsetenv("PGOPTIONS");
  EXPECT_EQ(chosen->Transact(jit), "on");
}

// An operator who chose a plan_cache_mode (here through PGOPTIONS, as the
// URL's options or the role's settings would) keeps it, for cairn's
// statements and for a step's SQL.
TEST_F(StoreSessionPlans, AnOperatorsOwnPlanCacheModeIsKept) {
  setenv("PGOPTIONS", "-c plan_cache_mode=force_custom_plan", 1);
  auto session = OpenSession(true);
  unsetenv("PGOPTIONS");
  EXPECT_EQ(session->Transact(PlanCacheMode), "force_custom_plan");
  EXPECT_EQ(session->Transact([](store::Tx& tx) {
    store::ApplyStepTransactionSettings(tx, 5s);
    return PlanCacheMode(tx);
  }),
            "force_custom_plan");
}

// ---------------------------------------------------------------- next due

class StoreNextDue : public StoreTest {
 protected:
  std::optional<int64_t> NextDue() {
    return conn().Transact(
        [&](store::Tx& tx) { return store::MillisUntilNextDue(tx, {"default"}, {"hash-1"}); });
  }
};

// An idle poller sleeps its poll interval when nothing is ready: "none" must
// not read as "due now", or it polls without pause.
TEST_F(StoreNextDue, IsNoneWithoutReadyRuns) {
  EXPECT_EQ(NextDue(), std::nullopt);
  Sql("INSERT INTO {s}.runs (workflow, definition_version, definition_hash, cursor, status) "
      "VALUES ('orders', 1, 'hash-1', 'reserve', 'waiting')");
  EXPECT_EQ(NextDue(), std::nullopt);
}

TEST_F(StoreNextDue, IsTheWaitUntilTheEarliestReadyRun) {
  Sql("INSERT INTO {s}.runs (workflow, definition_version, definition_hash, cursor, run_at) "
      "VALUES ('orders', 1, 'hash-1', 'reserve', now() + interval '1 hour')");
  const auto later = NextDue();
  ASSERT_TRUE(later.has_value());
  EXPECT_GT(*later, 3500 * 1000);
  EXPECT_LE(*later, 3600 * 1000);
  Sql("INSERT INTO {s}.runs (workflow, definition_version, definition_hash, cursor, run_at) "
      "VALUES ('orders', 1, 'hash-1', 'reserve', now() - interval '1 second')");
  EXPECT_EQ(NextDue(), 0);
}

// A poller asks after every claim that came back short, idle or not. With
// thousands of runs scheduled for later it reads a few runs per queue and
// priority, in an engine session that plans it once, not the whole backlog:
// before, each question read every ready run of its queues (0.2 s with
// 300 000 runs due tomorrow, at every poll). The answer is still the
// earliest run of a served definition in a queue without a limit.
TEST_F(StoreNextDue, ReadsAFewRunsHoweverManyAreScheduledLater) {
  Sql("INSERT INTO {s}.runs (workflow, definition_version, definition_hash, cursor, queue, "
      "priority, run_at) "
      "SELECT 'orders', 1, 'hash-1', 'reserve', q, p, now() + interval '1 hour' + i * "
      "interval '1 second' FROM unnest(ARRAY['default', 'mail']) q, generate_series(-1, 2) p, "
      "generate_series(1, 1000) i");
  Sql("INSERT INTO {s}.runs (workflow, definition_version, definition_hash, cursor, queue, "
      "priority, run_at) VALUES "
      "('orders', 1, 'hash-1', 'reserve', 'mail', 1, now() + interval '30 minutes'), "
      "('orders', 2, 'hash-2', 'reserve', 'default', 5, now() + interval '1 minute'), "
      "('orders', 1, 'hash-1', 'reserve', 'limited', 0, now() + interval '2 minutes')");
  Sql("INSERT INTO {s}.queue_limits (queue, max_running) VALUES ('limited', 1)");
  Sql("ANALYZE {s}.runs");
  auto session = Open("cairn-test poller", true);
  for (int i = 0; i < 7; ++i) {
    session->Transact([&](store::Tx& tx) {
      const int64_t read_before = RunRowsRead(tx);
      const auto due =
          store::MillisUntilNextDue(tx, {"default", "mail", "limited", "empty"}, {"hash-1"});
      ASSERT_TRUE(due.has_value());
      EXPECT_GT(*due, 29 * 60 * 1000);
      EXPECT_LE(*due, 30 * 60 * 1000);
      EXPECT_LE(RunRowsRead(tx) - read_before, 40);
    });
  }
}

// ---------------------------------------------------------------- retention

class StoreRetention : public StoreTest {
 protected:
  cairn::Run FinishedRun(bool old) {
    cairn::Run run = CreateRunningRun();
    SaveWait(run.id, "wait-" + run.id);
    RunEvent e;
    e.run_id = run.id;
    e.kind = "started";
    conn().Transact([&](store::Tx& tx) { store::AppendEvents(tx, {e, e}); });
    CommitStatus(run.id, RunStatus::kCompleted);
    if (old) Age("runs", "id = '" + run.id + "'");
    return run;
  }
  void Age(const std::string& table, const std::string& where) {
    Sql("UPDATE {s}." + table + " SET finished_at = now() - interval '48 hours' WHERE " + where);
  }
};

TEST_F(StoreRetention, DeletesOldFinishedRunsWithTheirHistoryAndWaits) {
  std::vector<cairn::Run> old;
  for (int i = 0; i < 3; ++i) old.push_back(FinishedRun(true));
  cairn::Run recent = FinishedRun(false);
  cairn::Run live = CreateRunningRun();
  SaveWait(live.id, "live-waiting");
  SaveWait(live.id, "live-old-cancelled");
  SaveWait(live.id, "live-new-cancelled");
  conn().Transact([&](store::Tx& tx) {
    store::CancelWait(tx, "live-old-cancelled");
    store::CancelWait(tx, "live-new-cancelled");
    RunEvent e;
    e.run_id = live.id;
    e.kind = "started";
    store::AppendEvents(tx, {e});
  });
  Age("wait_records", "correlation_key = 'live-old-cancelled'");
  cairn::Run ready = CreateRun();

  RetentionResult result = store::DeleteFinished(conn(), 24h);
  EXPECT_EQ(result.runs, 3);
  EXPECT_EQ(result.events, 6);
  EXPECT_EQ(result.waits, 4);  // one per old run, and the old finished wait of the live run

  EXPECT_EQ(Sql("SELECT string_agg(id::text, ',' ORDER BY id) FROM {s}.runs"),
            Sql("SELECT string_agg(id::text, ',' ORDER BY id) FROM unnest(ARRAY['" + recent.id +
                "', '" + live.id + "', '" + ready.id + "']::uuid[]) AS id"));
  for (const auto& run : old) {
    EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + run.id + "'"), 0);
    EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records WHERE run_id = '" + run.id + "'"), 0);
  }
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events"), 3);  // recent's two, live's one
  EXPECT_EQ(Sql("SELECT string_agg(correlation_key, ',' ORDER BY correlation_key)"
                " FROM {s}.wait_records WHERE run_id = '" +
                live.id + "'"),
            "live-new-cancelled,live-waiting");
  EXPECT_EQ(RunColumn(live.id, "status"), "running");

  RetentionResult again = store::DeleteFinished(conn(), 24h);
  EXPECT_EQ(again.runs, 0);
  EXPECT_EQ(again.events, 0);
  EXPECT_EQ(again.waits, 0);
}

TEST_F(StoreRetention, SmallBatchesStillDeleteEverything) {
  // 21 runs: three full batches of 7, so the last batch is exactly full.
  conn().Transact([&](store::Tx& tx) {
    for (int i = 0; i < 21; ++i) {
      cairn::Run run = store::CreateRun(tx, MakeRun("old")).run;
      NewWait wait{.correlation_key = "w-" + run.id,
                   .run_id = run.id,
                   .event = "e",
                   .continuation_step = "next"};
      store::SaveWait(tx, wait);
      RunEvent e;
      e.run_id = run.id;
      e.kind = "started";
      store::AppendEvents(tx, {e});
    }
  });
  cairn::Run live = CreateRunningRun();
  conn().Transact([&](store::Tx& tx) {
    for (int i = 0; i < 10; ++i) {
      NewWait wait{.correlation_key = "live-" + std::to_string(i),
                   .run_id = live.id,
                   .event = "e",
                   .continuation_step = "next"};
      store::SaveWait(tx, wait);
      store::CancelWait(tx, wait.correlation_key);
    }
  });
  Sql("UPDATE {s}.runs SET status = 'failed', finished_at = now() - interval '30 days'"
      " WHERE workflow = 'old'");
  Age("wait_records", "run_id = '" + live.id + "'");

  RetentionResult result = store::DeleteFinished(conn(), 24h, 7);
  EXPECT_EQ(result.runs, 21);
  EXPECT_EQ(result.events, 21);
  EXPECT_EQ(result.waits, 31);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 1);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records"), 0);
  EXPECT_EQ(RunColumn(live.id, "status"), "running");

  EXPECT_THROW(store::DeleteFinished(conn(), 24h, 0), InvalidArgumentError);
}

// ---------------------------------------------------------------- errors

class StoreErrors : public StoreTest {};

TEST_F(StoreErrors, TerminatedConnectionIsTransient) {
  cairn::Run run = CreateRun();
  auto victim = Open();
  victim->Transact([&](store::Tx& tx) { store::GetRun(tx, run.id); });
  TerminateBackend(victim->BackendPid());
  auto error =
      Catch<Error>([&] { victim->Transact([&](store::Tx& tx) { store::GetRun(tx, run.id); }); });
  EXPECT_EQ(error.kind(), ErrorKind::kTransient) << error.what();
  EXPECT_TRUE(error.transient());
}

TEST_F(StoreErrors, LockTimeoutIsTransientAndRetried) {
  cairn::Run run = CreateRunningRun();
  // A session that gives up waiting for a row lock after 100 ms.
  store::ConnectionOptions options;
  options.url = url() + (url().find('?') == std::string::npos ? "?" : "&") +
                "options=-c%20lock_timeout%3D100";
  options.schema = schema();
  store::Connection impatient(options);

  auto holder = Open();
  std::promise<void> locked, release;
  std::thread step([&] {
    try {
      holder->Transact([&](store::Tx& tx) {
        store::CancelRun(tx, run.id, "holder");
        locked.set_value();
        release.get_future().wait();
        throw std::runtime_error("roll back");
      });
    } catch (const std::exception&) {
    }
  });
  locked.get_future().wait();
  auto error = Catch<DatabaseError>([&] {
    impatient.Transact([&](store::Tx& tx) { store::CancelRun(tx, run.id, "impatient"); });
  });
  release.set_value();
  step.join();
  EXPECT_EQ(error.kind(), ErrorKind::kTransient) << error.what();
  EXPECT_EQ(error.sqlstate(), "55P03");

  // Once the holder is gone the same call succeeds through RetryTransient.
  auto result = store::RetryTransient([&] {
    return impatient.Transact(
        [&](store::Tx& tx) { return store::CancelRun(tx, run.id, "impatient"); });
  });
  EXPECT_EQ(result.outcome, CancelOutcome::kCancelled);
  EXPECT_EQ(RunColumn(run.id, "cancel_reason"), "impatient");
}

TEST_F(StoreErrors, ConstraintViolationIsPermanent) {
  NewRun bad = MakeRun("");  // runs_workflow_check
  auto error = Catch<DatabaseError>(
      [&] { conn().Transact([&](store::Tx& tx) { store::CreateRun(tx, bad); }); });
  EXPECT_EQ(error.kind(), ErrorKind::kPermanent);
  EXPECT_EQ(error.sqlstate(), "23514");
  EXPECT_THAT(error.what(), HasSubstr("runs_workflow_check"));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 0);

  // A transaction that failed is rolled back whole, and the session is usable.
  cairn::Run run = CreateRun();
  RunEvent no_field;
  no_field.run_id = run.id;
  no_field.kind = "context";  // run_events_field_check wants a field
  auto second = Catch<DatabaseError>([&] {
    conn().Transact([&](store::Tx& tx) {
      store::CreateRun(tx, MakeRun("rolled-back"));
      store::AppendEvents(tx, {no_field});
    });
  });
  EXPECT_EQ(second.kind(), ErrorKind::kPermanent);
  EXPECT_EQ(second.sqlstate(), "23514");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 1);
}

// Each rule of a run's row (migration 28 checks them in one function, through
// one constraint) refuses a write that breaks it alone, by the rule's old
// constraint name, and the run is left as it was. The ready run it starts
// from has a null final_status, for which runs_final_status_check's rule is
// null: a rule whose value is null holds, as in a CHECK.
TEST_F(StoreErrors, EachRuleOfARunsRowRefusesAWriteThatBreaksItByName) {
  EXPECT_EQ(SqlInt("SELECT count(*) FROM pg_constraint WHERE conrelid = '{s}.runs'::regclass "
                   "AND contype = 'c'"),
            1);
  const cairn::Run run = CreateRun();
  const std::string version = RunColumn(run.id, "version");
  const std::vector<std::pair<std::string, std::string>> broken = {
      {"status = 'paused'", "runs_status_check"},
      {"namespace = ''", "runs_namespace_check"},
      {"workflow = ''", "runs_workflow_check"},
      {"queue = ''", "runs_queue_check"},
      {"run_key = ''", "runs_key_check"},
      {"attempt = -1", "runs_attempt_check"},
      {"version = 0", "runs_version_check"},
      {"context = '[]'", "runs_context_check"},
      {"lease_owner = 'w', lease_expires_at = now()", "runs_lease_check"},
      {"finished_at = now()", "runs_finished_check"},
      {"compensations = '{}'", "runs_compensations_check"},
      {"final_status = 'completed'", "runs_final_status_check"},
      {"status = 'compensating'", "runs_compensating_check"},
      {"lease_expiries = -1", "runs_lease_expiries_check"},
      {"key_scope = 'sometimes'", "runs_key_scope_check"},
      // Two broken at once: the first by name, as PostgreSQL checks
      // constraints in the order of their names.
      {"status = 'compensating', finished_at = now()", "runs_compensating_check"},
  };
  for (const auto& rule : broken) {
    // Named copies: a lambda may not capture a structured binding (clang).
    const std::string& assignment = rule.first;
    const std::string& constraint = rule.second;
    auto error = Catch<DatabaseError>([&] {
      conn().Transact([&](store::Tx& tx) {
        store::ExecuteStepSql(
            tx,
            "UPDATE \"" + schema() + "\".runs SET " + assignment + " WHERE id = '" + run.id + "'",
            nullptr);
      });
    });
    EXPECT_EQ(error.sqlstate(), "23514") << assignment;
    EXPECT_EQ(error.kind(), ErrorKind::kPermanent) << assignment;
    EXPECT_THAT(error.what(), HasSubstr("violates check constraint \"" + constraint + "\""))
        << assignment;
  }
  EXPECT_EQ(RunColumn(run.id, "version"), version);
  EXPECT_EQ(RunColumn(run.id, "status"), "ready");
}

TEST_F(StoreErrors, MalformedInputIsInvalidArgument) {
  auto error = Catch<DatabaseError>(
      [&] { conn().Transact([&](store::Tx& tx) { store::GetRun(tx, "not-a-uuid"); }); });
  EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(error.sqlstate(), "22P02");
  EXPECT_THAT(error.what(), HasSubstr("not-a-uuid"));
}

TEST_F(StoreErrors, CallersOwnExceptionPassesThroughTransact) {
  struct CallerError {};
  EXPECT_THROW(conn().Transact([&](store::Tx&) { throw CallerError{}; }), CallerError);
  EXPECT_THROW(conn().Transact([&](store::Tx&) { throw std::logic_error("mine"); }),
               std::logic_error);
  // The session is still usable after the rollbacks.
  const std::string nil = "00000000-0000-0000-0000-000000000000";
  EXPECT_FALSE(conn().Transact([&](store::Tx& tx) { return store::GetRun(tx, nil); }));
}

TEST_F(StoreErrors, RetryTransientRetriesUntilSuccess) {
  int calls = 0;
  store::RetryPolicy policy{.max_attempts = 5, .initial_backoff = 1ms, .max_backoff = 2ms};
  int value = store::RetryTransient(
      [&] {
        if (++calls <= 2)
          throw DatabaseError(ErrorKind::kTransient, "op", "40001", "serialization");
        return 42;
      },
      policy);
  EXPECT_EQ(value, 42);
  EXPECT_EQ(calls, 3);
}

TEST_F(StoreErrors, RetryTransientRethrowsPermanentAndInDoubtAtOnce) {
  store::RetryPolicy policy{.max_attempts = 5, .initial_backoff = 1ms, .max_backoff = 2ms};
  for (ErrorKind kind : {ErrorKind::kPermanent, ErrorKind::kInDoubt, ErrorKind::kConflict}) {
    SCOPED_TRACE(ToString(kind));
    int calls = 0;
    EXPECT_THROW(store::RetryTransient(
                     [&]() -> int {
                       ++calls;
                       throw Error(kind, "no");
                     },
                     policy),
                 Error);
    EXPECT_EQ(calls, 1);
  }
  int calls = 0;
  EXPECT_THROW(store::RetryTransient(
                   [&]() -> int {
                     ++calls;
                     throw DatabaseError(ErrorKind::kTransient, "op", "40P01", "deadlock");
                   },
                   policy),
               DatabaseError);
  EXPECT_EQ(calls, 5);
}

TEST_F(StoreErrors, RetryTransientRecoversFromARealLostConnection) {
  cairn::Run run = CreateRun();
  auto victim = Open();
  TerminateBackend(victim->BackendPid());
  int calls = 0;
  store::RetryPolicy policy{.max_attempts = 3, .initial_backoff = 1ms, .max_backoff = 2ms};
  auto found = store::RetryTransient(
      [&] {
        ++calls;
        if (!victim->IsOpen() || calls > 1) victim = Open();
        return victim->Transact([&](store::Tx& tx) { return store::GetRun(tx, run.id); });
      },
      policy);
  EXPECT_TRUE(found.has_value());
  EXPECT_LE(calls, 2);
}

TEST_F(StoreErrors, InvalidSchemaNameIsRefusedBeforeConnecting) {
  for (const std::string& name : std::vector<std::string>{"bad-name", "1abc", "x;drop", "", "a b",
                                                          "\"quoted\"", std::string(64, 'a')}) {
    SCOPED_TRACE(name);
    store::ConnectionOptions options;
    // Nothing listens here: connecting would fail with a transient error.
    options.url = "postgresql://127.0.0.1:1/nowhere?connect_timeout=1";
    options.schema = name;
    auto error = Catch<InvalidArgumentError>([&] { store::Connection c(options); });
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    EXPECT_THAT(error.what(), HasSubstr("\"" + name + "\""));
  }
  // 63 characters is the limit, and fine.
  store::ConnectionOptions options;
  options.url = url();
  options.schema = std::string(63, 'a');
  EXPECT_NO_THROW(store::Connection c(options));
}

}  // namespace
}  // namespace cairn::test
