// The worker in process against a real PostgreSQL: the real plugin loader
// with the built test plugins, definitions from YAML, runs started through
// the SQL API, and assertions on what the database holds (status, history
// order, database timestamps). Each test migrates a fresh schema; workers
// poll every 50 ms with a 2 s lease, so tests wait for conditions with a
// deadline instead of sleeping for time to pass.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "definition.hpp"
#include "history_sql.hpp"
#include "pg_session.hpp"
#include "plugin_registry.hpp"
#include "store_fixture.hpp"
#include "test_paths.hpp"
#include "worker.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Every workflow the tests run, served by the test_steps and noop plugins.
// Steps read their parameters from the run's input.
constexpr const char* kWorkflows = R"(workflows:
  - name: three
    version: 1
    steps:
      - name: s1
        run: set_fields
      - name: s2
        run: record_attempt
      - name: s3
        run: noop

  - name: slow
    version: 1
    steps:
      - name: slow
        run: sleep_a_bit
        timeout: 200ms
        retry:
          max_attempts: 2
          initial_backoff: 50ms
          max_backoff: 50ms
          jitter: 0
      - name: after
        run: noop

  - name: jump_sleep
    version: 1
    steps:
      - name: start
        run: jump_to
      - name: skipped
        run: record_attempt
      - name: nap
        run: sleep_for
      - name: wake
        run: record_attempt

  - name: two
    version: 1
    steps:
      - name: first
        run: sleep_a_bit
      - name: second
        run: record_attempt

  - name: one
    version: 1
    steps:
      - name: only
        run: noop

  - name: sql
    version: 1
    steps:
      - name: query
        run: sql_query
        transactional: true
        retry:
          max_attempts: 2
          initial_backoff: 10ms
          max_backoff: 10ms
          jitter: 0
      - name: after
        run: noop

  - name: insert
    version: 1
    steps:
      - name: insert
        run: tx_insert
        transactional: true
        retry:
          max_attempts: 2
          initial_backoff: 10ms
          max_backoff: 10ms
          jitter: 0
      - name: after
        run: noop

  - name: undo
    version: 1
    steps:
      - name: a
        run: record_attempt
        compensate: noop
      - name: b
        run: fail_permanent
)";

// The plugins live for the whole process and are never unloaded: a step
// abandoned after its timeout keeps running plugin code on its own thread.
const PluginRegistry& Plugins() {
  static const PluginRegistry* registry = [] {
    auto* plugins = new PluginRegistry;
    plugins->LoadDirectory(cairn::test::BuiltPluginDir());
    return plugins;
  }();
  return *registry;
}

struct Event {
  int64_t position = 0;
  std::string step;
  int attempt = 0;
  std::string kind;
  std::optional<std::string> field;
  Json value;
};

class WorkerTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (HasFatalFailure()) return;
    definitions_ = DefinitionSet(LoadDefinitionsFromString(kWorkflows, "worker_pgtest.yaml"));
    ValidateSteps(definitions_, [](const std::string&, const std::string& step) {
      return Plugins().Find(step) ? "" : "unknown plugin step " + step;
    });
  }

  void TearDown() override {
    for (auto& worker : workers_) worker->Stop();
    workers_.clear();
    StoreTest::TearDown();
  }

  WorkerOptions Options() {
    WorkerOptions options;
    options.connection.url = url();
    options.connection.schema = schema();
    options.worker_id = "worker-" + std::to_string(++worker_count_);
    options.concurrency = 2;
    options.claim_batch = 2;
    options.poll_interval = 50ms;
    options.lease = 2000ms;
    options.reaper_interval = 200ms;
    options.shutdown_grace = 5000ms;
    return options;
  }

  // Starts a worker (registering its definitions); stopped at TearDown
  // unless the test stops it first.
  Worker& StartWorker(std::optional<WorkerOptions> options = std::nullopt) {
    workers_.push_back(
        std::make_unique<Worker>(options ? *options : Options(), definitions_, Plugins()));
    workers_.back()->Start();
    return *workers_.back();
  }

  std::string StartRun(const std::string& workflow, Json input = Json::object(), int priority = 0,
                       std::optional<std::string> run_at = std::nullopt) {
    store::StartRequest request;
    request.workflow = workflow;
    request.input = std::move(input);
    request.priority = priority;
    request.run_at = std::move(run_at);
    return conn().Transact([&](store::Tx& tx) { return store::StartRun(tx, request).id; });
  }

  cairn::Run GetRun(const std::string& run_id) {
    auto run = conn().Transact([&](store::Tx& tx) { return store::GetRun(tx, run_id); });
    if (!run) throw std::runtime_error("no run " + run_id);
    return *run;
  }

  std::string Status(const std::string& run_id) { return RunColumn(run_id, "status"); }

  // Polls until condition holds; false at the deadline.
  static bool Eventually(const std::function<bool()>& condition,
                         std::chrono::milliseconds deadline = 10s) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    while (true) {
      if (condition()) return true;
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(20ms);
    }
  }

  bool EventuallyStatus(const std::string& run_id, const std::string& status,
                        std::chrono::milliseconds deadline = 10s) {
    return Eventually([&] { return Status(run_id) == status; }, deadline);
  }

  std::vector<Event> History(const std::string& run_id) {
    auto page = conn().Transact([&](store::Tx& tx) { return store::History(tx, run_id); });
    std::vector<Event> events;
    for (const auto& e : page.events) {
      events.push_back(
          {e.position, e.step.value_or(""), e.attempt, e.kind, e.field, e.value.value_or(Json())});
    }
    return events;
  }

  // The events of one kind, in history order.
  std::vector<Event> EventsOf(const std::string& run_id, const std::string& kind) {
    std::vector<Event> out;
    for (auto& e : History(run_id)) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }

  // The run's step commits (step_committed, or completed for the commit
  // that ended it), in history order.
  std::vector<Event> CommitsOf(const std::string& run_id) {
    std::vector<Event> out;
    for (auto& e : History(run_id)) {
      if (e.kind == "step_committed" || e.kind == "completed") out.push_back(e);
    }
    return out;
  }

  // The steps of the run's step commits, in history order.
  std::vector<std::string> CommittedSteps(const std::string& run_id) {
    std::vector<std::string> steps;
    for (const auto& e : CommitsOf(run_id)) steps.push_back(e.step);
    return steps;
  }

  // Lifecycle kinds in history order, without context mutations.
  std::vector<std::string> Lifecycle(const std::string& run_id) {
    std::vector<std::string> kinds;
    for (const auto& e : History(run_id)) {
      if (e.kind != "context") kinds.push_back(e.kind);
    }
    return kinds;
  }

  std::string Describe(const std::string& run_id) {
    std::string out = "run " + run_id + " status " + Status(run_id) + ", error " +
                      RunColumn(run_id, "error") + ", history:";
    for (const auto& e : History(run_id)) {
      out += "\n  " + std::to_string(e.position) + " " + e.step + "#" + std::to_string(e.attempt) +
             " " + e.kind + (e.field ? " " + *e.field : "") + " " + e.value.dump();
    }
    return out;
  }

  const WorkflowDefinition& Definition(const std::string& name) { return *definitions_.Find(name); }

  // What a worker's start registers, so that runs can start before one does.
  void RegisterDefinitions() {
    conn().Transact([&](store::Tx& tx) {
      for (const auto* d : definitions_.All()) {
        store::RegisterDefinition(tx, {d->hash, d->name, d->version, d->FirstStep(), ToJson(*d)});
      }
    });
  }

  // `count` runs of workflow two, sleeping `sleep_ms` in each step, started
  // in one transaction: one notification.
  std::vector<std::string> StartTogether(int count, int sleep_ms) {
    return conn().Transact([&](store::Tx& tx) {
      std::vector<std::string> started;
      for (int i = 0; i < count; ++i) {
        store::StartRequest request;
        request.workflow = "two";
        request.input = {{"sleep_ms", sleep_ms}};
        started.push_back(store::StartRun(tx, request).id);
      }
      return started;
    });
  }

  // Definitions registered, claims recorded (RecordClaimSessions), and a
  // worker of `slots` slots that claims on wake-ups only (it polls hourly).
  const Worker& StartWorkerOnWakeUps(int slots) {
    RegisterDefinitions();
    RecordClaimSessions();
    WorkerOptions options = Options();
    options.poll_interval = 1h;
    options.concurrency = slots;
    options.claim_batch = slots;
    return StartWorker(options);
  }

  // Whether a slot's session waits idle after the claim it plans as the
  // slot goes idle (its last statement).
  bool SlotHasPlannedItsClaim(const Worker& worker) {
    return SqlInt(
               "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'cairn slot _ " +
               worker.id() +
               "' AND state = 'idle' AND query LIKE '%The poller''s claim, and a slot''s%'") == 1;
  }

  // Whether the worker's listener holds the wake gates of its queues open
  // (migration 27), so that a start notifies.
  bool GatesOpen(const Worker& worker) {
    return OpenGateStripes("cairn listener " + worker.id()) > 0;
  }

  // Whether slot 0 waits idle with its session and the worker's gates are
  // open: a run started now wakes slot 0.
  bool SlotZeroWaitsForAWakeUp(const Worker& worker) {
    return worker.SlotForWakeUp() == 0 && GatesOpen(worker);
  }

  // Records in table claims the session (application_name) of each claim
  // of a run.
  void RecordClaimSessions() {
    Sql("CREATE TABLE {s}.claims (run_id uuid, session text)");
    Sql("CREATE FUNCTION {s}.see() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "INSERT INTO {s}.claims VALUES (NEW.id, current_setting('application_name')); "
        "RETURN NEW; END $$");
    Sql("CREATE TRIGGER see AFTER UPDATE OF status ON {s}.runs FOR EACH ROW WHEN "
        "(OLD.status = 'ready' AND NEW.status = 'running') EXECUTE FUNCTION {s}.see()");
  }

  DefinitionSet definitions_;

 private:
  std::vector<std::unique_ptr<Worker>> workers_;
  int worker_count_ = 0;
};

// ---------------------------------------------------------------- steps

TEST_F(WorkerTest, ThreeStepWorkflowCompletesWithEachStepCommittedOnceInOrder) {
  StartWorker();
  const std::string id = StartRun("three", {{"fields", {{"a", 1}, {"b", "x"}}}});

  ASSERT_TRUE(EventuallyStatus(id, "completed")) << Describe(id);
  EXPECT_THAT(CommittedSteps(id), ElementsAre("s1", "s2", "s3")) << Describe(id);

  cairn::Run run = GetRun(id);
  const Json expected = {{"a", 1}, {"b", "x"}, {"attempts", {1}}, {"last_attempt", 1}};
  EXPECT_EQ(run.context, expected);
  EXPECT_EQ(run.output, std::optional<Json>(expected));
  EXPECT_FALSE(run.lease_owner.has_value());
  EXPECT_FALSE(run.error.has_value());
  EXPECT_TRUE(run.finished_at.has_value());
  EXPECT_EQ(run.attempt, 0);

  // One context event per field the steps set, from the step that set it.
  std::vector<std::string> fields;
  for (const auto& e : EventsOf(id, "context")) fields.push_back(e.step + "." + *e.field);
  EXPECT_THAT(fields, ElementsAre("s1.a", "s1.b", "s2.attempts", "s2.last_attempt"));
  auto history = History(id);
  ASSERT_FALSE(history.empty());
  EXPECT_EQ(history.back().kind, "completed");
  EXPECT_EQ(history.back().step, "s3");
  for (const auto& e : CommitsOf(id)) EXPECT_EQ(e.attempt, 1);
}

TEST_F(WorkerTest, StepOverrunningItsTimeoutIsAbandonedAndRetriedByPolicy) {
  StartWorker();
  const std::string id = StartRun("slow", {{"sleep_ms", 700}});

  ASSERT_TRUE(EventuallyStatus(id, "failed")) << Describe(id);
  EXPECT_THAT(Lifecycle(id), ElementsAre("retried", "failed")) << Describe(id);
  auto retried = EventsOf(id, "retried");
  auto failed = EventsOf(id, "failed");
  ASSERT_EQ(retried.size(), 1u);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(retried[0].step, "slow");
  EXPECT_EQ(retried[0].attempt, 1);
  EXPECT_EQ(retried[0].value["code"], "timeout");
  EXPECT_EQ(retried[0].value["retry_in_ms"], 50);
  EXPECT_EQ(failed[0].attempt, 2);
  EXPECT_EQ(failed[0].value["code"], "timeout");
  EXPECT_THAT(failed[0].value["error"].get<std::string>(), HasSubstr("timeout of 200ms"));
  EXPECT_THAT(RunColumn(id, "error"), HasSubstr("exceeded its timeout"));

  // The abandoned steps finish on their own threads; nothing of theirs lands.
  std::this_thread::sleep_for(800ms);
  EXPECT_EQ(Status(id), "failed");
  EXPECT_TRUE(CommittedSteps(id).empty()) << Describe(id);
  EXPECT_FALSE(GetRun(id).context.contains("slept_ms"));
}

TEST_F(WorkerTest, JumpAndSleepOutcomesRunStepsInTheirOrder) {
  StartWorker();
  const std::string id = StartRun("jump_sleep", {{"target", "nap"}, {"sleep_ms", 500}});

  ASSERT_TRUE(EventuallyStatus(id, "completed")) << Describe(id);
  EXPECT_THAT(CommittedSteps(id), ElementsAre("start", "nap", "wake")) << Describe(id);
  EXPECT_THAT(Lifecycle(id),
              ElementsAre("step_committed", "jumped", "step_committed", "sleeping", "completed"))
      << Describe(id);
  EXPECT_EQ(EventsOf(id, "jumped").at(0).value, (Json{{"to", "nap"}}));
  EXPECT_EQ(EventsOf(id, "sleeping").at(0).value, (Json{{"ms", 500}}));

  // The step after the sleep committed at least 500 ms later, by database time.
  const int64_t gap_ms = SqlInt(
      "SELECT (extract(epoch FROM w.created_at - s.created_at) * 1000)::bigint"
      " FROM {s}.run_events s JOIN {s}.run_events w ON w.run_id = s.run_id"
      " WHERE s.run_id = '" +
      id +
      "' AND s.kind = 'sleeping'"
      " AND w." +
      kStepCommits + " AND w.step = 'wake'");
  EXPECT_GE(gap_ms, 500);
  EXPECT_LT(gap_ms, 5000);
  EXPECT_EQ(GetRun(id).output, std::optional<Json>(Json{{"attempts", {1}}, {"last_attempt", 1}}));
}

// ---------------------------------------------------------------- definitions

TEST_F(WorkerTest, RunPinnedToAnUnservedDefinitionIsStrandedUntilRepinned) {
  Worker& worker = StartWorker();
  NewRun pinned;
  pinned.workflow = "one";
  pinned.definition_version = 1;
  pinned.definition_hash = "0000unknown-definition-hash";
  pinned.cursor = "only";
  const std::string id = CreateRun(pinned).id;
  const std::string served = StartRun("one");

  // The worker serves "one", but not this pinning of it.
  ASSERT_TRUE(EventuallyStatus(served, "completed")) << Describe(served);
  std::this_thread::sleep_for(400ms);  // eight polls
  EXPECT_EQ(Status(id), "ready");
  EXPECT_EQ(RunColumn(id, "version"), "1");
  EXPECT_EQ(RunColumn(id, "lease_owner"), "");
  EXPECT_TRUE(History(id).empty());

  auto stranded = conn().Transact([&](store::Tx& tx) { return store::StrandedRuns(tx, 10s); });
  ASSERT_EQ(stranded.size(), 1u);
  EXPECT_EQ(stranded[0].id, id);

  const std::string& hash = Definition("one").hash;
  auto repinned = conn().Transact(
      [&](store::Tx& tx) { return store::RepinRuns(tx, pinned.definition_hash, hash); });
  EXPECT_THAT(repinned, ElementsAre(id));

  ASSERT_TRUE(EventuallyStatus(id, "completed")) << Describe(id);
  EXPECT_EQ(RunColumn(id, "definition_hash"), hash);
  EXPECT_THAT(CommittedSteps(id), ElementsAre("only"));
  EXPECT_TRUE(conn().Transact([&](store::Tx& tx) { return store::StrandedRuns(tx, 10s); }).empty());
  EXPECT_EQ(worker.Stats().lost, 0);
}

// ---------------------------------------------------------------- shutdown

TEST_F(WorkerTest, GracefulStopLetsTheStepFinishAndHandsTheRunBack) {
  WorkerOptions options = Options();
  auto first = std::make_unique<Worker>(options, definitions_, Plugins());
  first->Start();
  const std::string id = StartRun("two", {{"sleep_ms", 500}});
  ASSERT_TRUE(Eventually([&] { return RunColumn(id, "lease_owner") == options.worker_id; }))
      << Describe(id);
  std::this_thread::sleep_for(150ms);  // the step "first" is in flight

  const auto stop_started = std::chrono::steady_clock::now();
  EXPECT_TRUE(first->Stop());
  const auto stop_took = std::chrono::steady_clock::now() - stop_started;
  EXPECT_LT(stop_took, 4s);

  // The step in flight committed; the run waits, unleased, at the next step.
  EXPECT_EQ(Status(id), "ready") << Describe(id);
  EXPECT_THAT(CommittedSteps(id), ElementsAre("first")) << Describe(id);
  cairn::Run run = GetRun(id);
  EXPECT_EQ(run.cursor, std::optional<std::string>("second"));
  EXPECT_EQ(run.attempt, 0);
  EXPECT_FALSE(run.lease_owner.has_value());
  EXPECT_FALSE(run.lease_expires_at.has_value());
  EXPECT_EQ(run.context["slept_ms"], 500);
  EXPECT_EQ(first->Stats().handed_back, 1);
  EXPECT_TRUE(SqlBool("SELECT stopped_at IS NOT NULL FROM {s}.workers WHERE id = '" +
                      options.worker_id + "'"));
  first.reset();

  StartWorker();
  ASSERT_TRUE(EventuallyStatus(id, "completed")) << Describe(id);
  EXPECT_THAT(CommittedSteps(id), ElementsAre("first", "second")) << Describe(id);
  EXPECT_EQ(GetRun(id).context["attempts"], Json::array({1}));
}

// ---------------------------------------------------------------- stack lock

TEST_F(WorkerTest, RunWhoseStackLockIsHeldElsewhereIsHandedBackUntilReleased) {
  Worker& worker = StartWorker();
  std::string due =
      conn().Transact([](store::Tx& tx) { return store::DatabaseNowPlus(tx, 500ms); });
  const std::string id = StartRun("three", {{"fields", {{"a", 1}}}}, 0, due);
  auto zombie = Open("zombie");
  ASSERT_TRUE(zombie->TryLockStack(id));

  ASSERT_TRUE(Eventually([&] { return worker.Stats().handed_back >= 1; })) << Describe(id);
  EXPECT_TRUE(History(id).empty()) << Describe(id);
  EXPECT_EQ(RunColumn(id, "attempt"), "0");
  EXPECT_NE(Status(id), "completed");
  // Handed back, not executed: ready again after the stack-busy delay.
  EXPECT_TRUE(Eventually([&] { return Status(id) == "ready"; }, 2s)) << Describe(id);

  zombie->UnlockStack(id);
  ASSERT_TRUE(EventuallyStatus(id, "completed")) << Describe(id);
  EXPECT_THAT(CommittedSteps(id), ElementsAre("s1", "s2", "s3")) << Describe(id);
  EXPECT_EQ(RunColumn(id, "attempt"), "0");
}

// ---------------------------------------------------------------- priority

TEST_F(WorkerTest, HigherPriorityRunsFirst) {
  WorkerOptions options = Options();
  options.concurrency = 1;
  options.claim_batch = 1;
  StartWorker(options);
  // Started lowest priority first in one transaction: all three become
  // visible at once, due at the same database instant (its now()).
  std::string low, high, mid;
  conn().Transact([&](store::Tx& tx) {
    auto start = [&](int priority) {
      store::StartRequest request;
      request.workflow = "one";
      request.priority = priority;
      return store::StartRun(tx, request).id;
    };
    low = start(0);
    high = start(10);
    mid = start(5);
  });
  EXPECT_EQ(SqlInt("SELECT count(DISTINCT run_at) FROM {s}.runs"), 1);

  for (const auto& id : {low, high, mid}) {
    ASSERT_TRUE(EventuallyStatus(id, "completed")) << Describe(id);
  }
  auto completed_at = [&](const std::string& id) {
    return EventsOf(id, "completed").at(0).position;
  };
  EXPECT_LT(completed_at(high), completed_at(mid));
  EXPECT_LT(completed_at(mid), completed_at(low));
  // One run at a time: each one finished before the next one's step committed.
  EXPECT_LT(completed_at(high), CommitsOf(mid).at(0).position);
  EXPECT_LT(completed_at(mid), CommitsOf(low).at(0).position);
}

// ---------------------------------------------------------------- claims

TEST_F(WorkerTest, ASlotThatFinishesARunUnderABacklogClaimsTheNextOneItself) {
  RegisterDefinitions();
  for (int i = 0; i < 5; ++i) StartRun("one");
  WorkerOptions options = Options();
  options.concurrency = 1;
  options.claim_batch = 1;
  Worker& worker = StartWorker(options);

  const std::string completed = "SELECT count(*) FROM {s}.runs WHERE status = 'completed'";
  ASSERT_TRUE(Eventually([&] { return SqlInt(completed) == 5; }));
  // The poller's claim came back full: the slot took each next run on its
  // own session, and its sixth claim, which found none, handed claiming back.
  EXPECT_EQ(worker.Stats().claimed, 5);
  EXPECT_EQ(worker.Stats().claimed_by_slots, 4);
  EXPECT_EQ(worker.Stats().lost, 0);
}

// Under a backlog every busy slot claims its next run in the commit that
// ends its run, so that a claim costs no transaction of its own. A trigger
// records the transaction of each claim and each completion.
TEST_F(WorkerTest, SlotsClaimTheirNextRunsInTheCommitsThatEndTheirRuns) {
  RegisterDefinitions();
  Sql("CREATE TABLE {s}.seen (run_id uuid, status text, xact xid8)");
  Sql("CREATE FUNCTION {s}.see() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "INSERT INTO {s}.seen VALUES (NEW.id, NEW.status, pg_current_xact_id()); RETURN NEW; "
      "END $$");
  Sql("CREATE TRIGGER see AFTER UPDATE OF status ON {s}.runs FOR EACH ROW WHEN "
      "((OLD.status = 'ready' AND NEW.status = 'running') OR NEW.status = 'completed') "
      "EXECUTE FUNCTION {s}.see()");
  for (int i = 0; i < 12; ++i) StartRun("one");
  WorkerOptions options = Options();
  options.concurrency = 3;
  options.claim_batch = 3;
  Worker& worker = StartWorker(options);

  ASSERT_TRUE(Eventually(
      [&] { return SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'completed'") == 12; }));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.seen WHERE status = 'running'"), 12);
  // The poller claimed the first three, one for each slot. Every claim of a
  // slot committed with the completion of another run; most claims were
  // (a slot that finds a run the poller claimed waiting leaves claiming to
  // the poller).
  const int64_t with_completions = SqlInt(
      "SELECT count(*) FROM {s}.seen c WHERE c.status = 'running' AND EXISTS ("
      "SELECT FROM {s}.seen d WHERE d.status = 'completed' AND d.xact = c.xact "
      "AND d.run_id <> c.run_id)");
  EXPECT_EQ(with_completions, worker.Stats().claimed_by_slots);
  EXPECT_GE(with_completions, 6);
  EXPECT_EQ(worker.Stats().claimed, 12);
  EXPECT_EQ(worker.Stats().lost, 0);
}

// A claim that fails in a run's last checkpoint costs the run nothing: the
// checkpoint commits again without it, and the poller claims later. A
// trigger refuses the claims of the second run, and counts them in a
// sequence (which a rollback does not take back).
TEST_F(WorkerTest, AClaimThatFailsInTheLastCheckpointCostsTheRunNothing) {
  RegisterDefinitions();
  const std::string first = StartRun("two", {{"sleep_ms", 100}}, 1);
  const std::string second = StartRun("two");
  Sql("CREATE SEQUENCE {s}.refusals");
  Sql("CREATE TABLE {s}.refuse_claims ()");
  Sql("INSERT INTO {s}.refuse_claims DEFAULT VALUES");
  Sql("CREATE FUNCTION {s}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "IF EXISTS (SELECT FROM {s}.refuse_claims) THEN PERFORM nextval('{s}.refusals'); "
      "RAISE EXCEPTION 'claims refused'; END IF; RETURN NEW; END $$");
  Sql("CREATE TRIGGER refuse BEFORE UPDATE OF status ON {s}.runs FOR EACH ROW WHEN "
      "(OLD.status = 'ready' AND NEW.status = 'running' AND OLD.id = '" +
      second + "') EXECUTE FUNCTION {s}.refuse()");
  WorkerOptions options = Options();
  options.concurrency = 1;
  options.claim_batch = 1;
  StartWorker(options);

  ASSERT_TRUE(EventuallyStatus(first, "completed")) << Describe(first);
  EXPECT_THAT(CommittedSteps(first), ElementsAre("first", "second"));
  // Its last checkpoint did try to claim the second run.
  EXPECT_GE(SqlInt("SELECT last_value FROM {s}.refusals"), 1);
  EXPECT_EQ(Status(second), "ready");
  Sql("DELETE FROM {s}.refuse_claims");
  ASSERT_TRUE(EventuallyStatus(second, "completed")) << Describe(second);
  EXPECT_THAT(CommittedSteps(second), ElementsAre("first", "second"));
}

// A checkpoint whose statement fails after its claim took the next run's
// stack lock (a trigger on the run it ends, which fires at the end of the
// statement) leaves no lock behind: session locks outlive a rollback, and
// the slot lets go of the one it does not count.
TEST_F(WorkerTest, ACheckpointThatFailsAfterItsClaimLeavesNoStackLockBehind) {
  RegisterDefinitions();
  const std::string first = StartRun("two", {{"sleep_ms", 100}}, 1);
  const std::string second = StartRun("one");
  Sql("CREATE FUNCTION {s}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "IF EXISTS (SELECT FROM {s}.runs WHERE id = '" +
      second +
      "' AND status = 'running') "
      "THEN RAISE EXCEPTION 'refused after the claim'; END IF; RETURN NULL; END $$");
  Sql("CREATE TRIGGER refuse AFTER UPDATE OF status ON {s}.runs FOR EACH ROW WHEN "
      "(NEW.status = 'completed' AND OLD.id = '" +
      first + "') EXECUTE FUNCTION {s}.refuse()");
  WorkerOptions options = Options();
  options.concurrency = 1;
  options.claim_batch = 1;
  StartWorker(options);

  ASSERT_TRUE(EventuallyStatus(first, "completed")) << Describe(first);
  ASSERT_TRUE(EventuallyStatus(second, "completed")) << Describe(second);
  EXPECT_THAT(CommittedSteps(first), ElementsAre("first", "second"));
  // The slot's session is still open (idle_timeout), holding no lock.
  EXPECT_TRUE(Eventually([&] {
    return SqlInt(
               "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid IN ("
               "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'cairn slot %')") == 0;
  }));
  EXPECT_TRUE(SqlBool("SELECT pg_try_advisory_lock(hashtextextended('" + schema() +
                      ":stack:" + second + "', 0))"));
}

TEST_F(WorkerTest, ARunTheWorkerCannotReadCostsTheRunsClaimedWithItNothing) {
  RegisterDefinitions();
  // jsonb holds the number; the daemon's JSON (doubles) cannot. The SQL API
  // refuses it (migration 22), so it comes in as a write to the table.
  const std::string unreadable = Sql("SELECT {s}.start_run('one', p_priority => 1)");
  Sql("UPDATE {s}.runs SET input = '{\"x\": 1e400}' WHERE id = '" + unreadable + "'");
  const std::string id = StartRun("one");
  WorkerOptions options = Options();
  options.crash_limit = 1;
  StartWorker(options);

  // Claimed together: the other run goes on well within its lease.
  EXPECT_TRUE(EventuallyStatus(id, "completed", 1500ms)) << Describe(id);
  // The unreadable one is left to its lease, then failed by the crash limit.
  ASSERT_TRUE(EventuallyStatus(unreadable, "failed", 20s)) << Describe(unreadable);
  EXPECT_THAT(RunColumn(unreadable, "error"), HasSubstr("crashed"));
}

TEST_F(WorkerTest, AStopWhileSlotsClaimTheirOwnRunsLeavesNoRunClaimed) {
  RegisterDefinitions();
  std::vector<std::string> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(StartRun("two", {{"sleep_ms", 30}}));
  WorkerOptions options = Options();
  options.concurrency = 1;
  options.claim_batch = 1;
  Worker& worker = StartWorker(options);
  ASSERT_TRUE(Eventually([&] { return worker.Stats().claimed_by_slots >= 2; }));

  EXPECT_TRUE(worker.Stop());
  // Every run is done, or due again with its lease let go, never stranded
  // on the stopped worker.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE lease_owner IS NOT NULL OR status NOT IN "
                   "('ready', 'completed')"),
            0);
  EXPECT_LT(worker.Stats().claimed, 40);

  StartWorker();
  for (const auto& id : ids) {
    ASSERT_TRUE(EventuallyStatus(id, "completed")) << Describe(id);
    EXPECT_THAT(CommittedSteps(id), ElementsAre("first", "second")) << Describe(id);
  }
}

// ---------------------------------------------------------------- transactional steps

TEST_F(WorkerTest, TransactionalStepWithFailingSqlRollsBackAndRetries) {
  StartWorker();
  const std::string bad = StartRun("sql", {{"sql", "SELEC nonsense FROM nowhere"}});
  const std::string good = StartRun("sql", {{"sql", "SELECT $1::int + 1 AS n"}, {"params", {41}}});

  ASSERT_TRUE(EventuallyStatus(bad, "failed")) << Describe(bad);
  EXPECT_THAT(Lifecycle(bad), ElementsAre("retried", "failed")) << Describe(bad);
  for (const auto& e : History(bad)) {
    EXPECT_EQ(e.value["code"], "sql") << Describe(bad);
    EXPECT_THAT(e.value["error"].get<std::string>(), HasSubstr("syntax error")) << Describe(bad);
  }
  EXPECT_THAT(RunColumn(bad, "error"), HasSubstr("syntax error"));
  EXPECT_FALSE(GetRun(bad).context.contains("rows"));

  ASSERT_TRUE(EventuallyStatus(good, "completed")) << Describe(good);
  EXPECT_EQ(GetRun(good).context["rows"], (Json::array({{{"n", 42}}})));
}

TEST_F(WorkerTest, TransactionalStepsWritesRollBackWhenTheStepFails) {
  Sql("CREATE TABLE {s}.sink (run_id text, attempt integer)");
  StartWorker();
  const std::string table = schema() + ".sink";
  const std::string failing = StartRun("insert", {{"table", table}, {"fail_after_insert", true}});
  const std::string passing = StartRun("insert", {{"table", table}});

  ASSERT_TRUE(EventuallyStatus(failing, "failed")) << Describe(failing);
  EXPECT_THAT(Lifecycle(failing), ElementsAre("retried", "failed")) << Describe(failing);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.sink WHERE run_id = '" + failing + "'"), 0);

  ASSERT_TRUE(EventuallyStatus(passing, "completed")) << Describe(passing);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.sink WHERE run_id = '" + passing + "'"), 1);
}

TEST_F(WorkerTest, TransactionControlFromAStepIsRefused) {
  StartWorker();
  const std::string id = StartRun("sql", {{"sql", "COMMIT"}});

  ASSERT_TRUE(EventuallyStatus(id, "failed")) << Describe(id);
  // Refused before it reached the server: a permanent failure, no retry.
  EXPECT_THAT(Lifecycle(id), ElementsAre("failed")) << Describe(id);
  auto failed = EventsOf(id, "failed").at(0);
  EXPECT_EQ(failed.attempt, 1);
  EXPECT_EQ(failed.value["code"], "sql_refused");
  EXPECT_THAT(failed.value["error"].get<std::string>(), HasSubstr("transaction control"));
  EXPECT_THAT(RunColumn(id, "error"), HasSubstr("refused"));
}

// ---------------------------------------------------------------- leases

TEST_F(WorkerTest, ALockedRunRowDoesNotCostTheOtherRunsTheirLeases) {
  // Eight runs sleep in their first step for longer than the lease, so only
  // renewals keep them. A second worker (claiming another queue) reaps any
  // lease that lapses.
  WorkerOptions options = Options();
  options.concurrency = 8;
  options.claim_batch = 8;
  options.lease = 1000ms;
  StartWorker(options);
  WorkerOptions reaper = Options();
  reaper.queues = {"elsewhere"};
  StartWorker(reaper);
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(StartRun("two", {{"sleep_ms", 4000}}));
  ASSERT_TRUE(Eventually(
      [&] { return SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'running'") == 8; }));

  // An operator holds one run's row for three leases.
  {
    PgSession operator_session(url());
    operator_session.Value("BEGIN");
    operator_session.Value(InSchema("SELECT 1 FROM {s}.runs WHERE id = $1 FOR UPDATE"), {ids[0]});
    std::this_thread::sleep_for(3000ms);
    operator_session.Value("COMMIT");
  }

  for (const auto& id : ids) ASSERT_TRUE(EventuallyStatus(id, "completed", 20s)) << Describe(id);
  for (size_t i = 1; i < ids.size(); ++i) {
    EXPECT_TRUE(EventsOf(ids[i], "lease_expired").empty()) << Describe(ids[i]);
    EXPECT_THAT(CommittedSteps(ids[i]), ElementsAre("first", "second")) << Describe(ids[i]);
  }
}

TEST_F(WorkerTest, ALargeRetentionBacklogCostsNoRunItsLease) {
  // 100,000 runs finished two months ago, each with a history event.
  Sql("INSERT INTO {s}.runs (workflow, definition_version, definition_hash, status, "
      "finished_at, created_at) SELECT 'old', 1, 'h', 'completed', now() - interval '60 days', "
      "now() - interval '61 days' FROM generate_series(1, 100000)");
  Sql("INSERT INTO {s}.run_events (run_id, kind) SELECT id, 'completed' FROM {s}.runs "
      "WHERE workflow = 'old'");
  // A busy worker with a short lease deletes them while its steps run; a
  // second worker takes over any lease that lapses.
  WorkerOptions options = Options();
  options.concurrency = 4;
  options.claim_batch = 4;
  options.lease = 1000ms;
  options.retention = std::chrono::hours(1);
  options.retention_interval = 100ms;
  StartWorker(options);
  WorkerOptions reaper = Options();
  reaper.queues = {"elsewhere"};
  StartWorker(reaper);
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(StartRun("two", {{"sleep_ms", 1500}}));
  for (const auto& id : ids) ASSERT_TRUE(EventuallyStatus(id, "completed", 30s)) << Describe(id);
  for (const auto& id : ids) {
    EXPECT_TRUE(EventsOf(id, "lease_expired").empty()) << Describe(id);
    EXPECT_THAT(CommittedSteps(id), ElementsAre("first", "second")) << Describe(id);
  }
  EXPECT_TRUE(Eventually(
      [&] { return SqlInt("SELECT count(*) FROM {s}.runs WHERE workflow = 'old'") == 0; }, 60s));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events e WHERE NOT EXISTS "
                   "(SELECT 1 FROM {s}.runs r WHERE r.id = e.run_id)"),
            0);
}

TEST_F(WorkerTest, IdleSlotsGiveTheirConnectionsBack) {
  WorkerOptions options = Options();
  options.concurrency = 3;
  options.claim_batch = 3;
  options.idle_timeout = 300ms;
  const Worker& worker = StartWorker(options);
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(StartRun("two", {{"sleep_ms", 200}}));
  const std::string slots =
      "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'cairn slot % " +
      worker.id() + "'";
  ASSERT_TRUE(Eventually([&] { return SqlInt(slots) == 3; }));
  for (const auto& id : ids) ASSERT_TRUE(EventuallyStatus(id, "completed")) << Describe(id);
  EXPECT_TRUE(Eventually([&] { return SqlInt(slots) == 0; }, 5s));
  // Work opens them again.
  const std::string later = StartRun("one");
  EXPECT_TRUE(EventuallyStatus(later, "completed")) << Describe(later);
}

// The idle slot finds out that its session died when it claims on the
// next run's wake-up; the wake-up then goes to the poller, and the run
// starts at once (the worker polls hourly: a wake-up must start it).
TEST_F(WorkerTest, ASlotWhoseConnectionDiedWhileIdleRunsTheNextRunAtOnce) {
  WorkerOptions options = Options();
  options.poll_interval = 1h;
  options.concurrency = 1;
  options.claim_batch = 1;
  options.lease = 30s;  // a lost claim would sit out its lease
  const Worker& worker = StartWorker(options);
  const std::string first = StartRun("one");
  ASSERT_TRUE(EventuallyStatus(first, "completed")) << Describe(first);
  // The slot's session is terminated while it waits for work.
  ASSERT_EQ(SqlInt("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                   "application_name = 'cairn slot 0 " +
                   worker.id() + "'"),
            1);
  const std::string next = StartRun("one");
  EXPECT_TRUE(EventuallyStatus(next, "completed", 5s)) << Describe(next);
  EXPECT_TRUE(EventsOf(next, "lease_expired").empty()) << Describe(next);
  EXPECT_EQ(worker.Stats().claimed_by_slots, 0);
}

// ---------------------------------------------------------------- wake-ups
// In these tests the poller would not claim again for an hour: what runs,
// runs because a notification woke a slot or the poller.

// A run made due while a slot waits with its session open is claimed by
// that slot on that session (its stack lock taken and its row read in the
// same statement), not by the poller, which would hand it over.
TEST_F(WorkerTest, AWakeUpGoesToAnIdleSlotWithItsSessionOpen) {
  RegisterDefinitions();
  WorkerOptions options = Options();
  options.poll_interval = 1h;
  const Worker& worker = StartWorker(options);
  // No slot has a session yet: the poller claims the first run.
  const std::string first = StartRun("one");
  ASSERT_TRUE(EventuallyStatus(first, "completed")) << Describe(first);
  ASSERT_EQ(worker.Stats().claimed_by_slots, 0);
  // The slot has gone idle: it has planned its claim, which it does first.
  ASSERT_TRUE(Eventually([&] { return SlotHasPlannedItsClaim(worker); }));

  const std::string second = StartRun("one");
  ASSERT_TRUE(EventuallyStatus(second, "completed")) << Describe(second);
  EXPECT_EQ(worker.Stats().claimed, 2);
  EXPECT_EQ(worker.Stats().claimed_by_slots, 1);
  EXPECT_EQ(worker.Stats().lost, 0);
}

// One notification may stand for many runs: a transaction's starts on one
// queue notify once. The slot that takes it, finding more due after its
// run, wakes the poller, which claims the rest for the other slots. A
// trigger records the session of each claim.
TEST_F(WorkerTest, AWakeUpForManyRunsBringsInThePollerForTheOtherSlots) {
  const Worker& worker = StartWorkerOnWakeUps(3);
  const std::string first = StartRun("one");
  ASSERT_TRUE(EventuallyStatus(first, "completed")) << Describe(first);
  Sql("DELETE FROM {s}.claims");

  const std::vector<std::string> ids = StartTogether(6, 100);
  for (const auto& id : ids) ASSERT_TRUE(EventuallyStatus(id, "completed")) << Describe(id);
  const std::string poller = "'cairn poller " + worker.id() + "'";
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.claims"), 6);
  EXPECT_GE(SqlInt("SELECT count(*) FROM {s}.claims WHERE session = " + poller), 1);
  EXPECT_GE(SqlInt("SELECT count(*) FROM {s}.claims WHERE session LIKE 'cairn slot %'"), 1);
  EXPECT_EQ(worker.Stats().lost, 0);
}

// Wake-ups go to the lowest-numbered idle slot, whose session has planned
// the claim already, and not to whichever slot wakes first: the others may
// give their sessions back when idle.
TEST_F(WorkerTest, WakeUpsGoToTheLowestIdleSlot) {
  const Worker& worker = StartWorkerOnWakeUps(4);
  // Every slot runs one of these, and keeps its session open afterwards.
  const std::vector<std::string> ids = StartTogether(4, 300);
  for (const auto& id : ids) ASSERT_TRUE(EventuallyStatus(id, "completed")) << Describe(id);
  ASSERT_EQ(SqlInt("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'cairn slot "
                   "_ " +
                   worker.id() + "'"),
            4);
  Sql("DELETE FROM {s}.claims");

  for (int i = 0; i < 6; ++i) {
    // The claim that follows the gates' opening is a wake-up too: it goes
    // to slot 1 while slot 0 is still finishing the run before.
    ASSERT_TRUE(Eventually([&] { return SlotZeroWaitsForAWakeUp(worker); }));
    const std::string id = StartRun("one");
    ASSERT_TRUE(EventuallyStatus(id, "completed")) << Describe(id);
  }
  EXPECT_EQ(
      SqlInt("SELECT count(*) FROM {s}.claims WHERE session = 'cairn slot 0 " + worker.id() + "'"),
      6);
  EXPECT_EQ(worker.Stats().lost, 0);
}

// A worker whose every slot is busy needs no hint: it claims as a slot
// frees. The first hint that finds it so closes its gates, so the next
// start does not notify, and that run starts when the slot is free (not at
// the hourly poll).
TEST_F(WorkerTest, ARunStartedWhileEverySlotIsBusySendsNoHintAndStartsWhenOneIsFree) {
  const Worker& worker = StartWorkerOnWakeUps(1);
  ASSERT_TRUE(Eventually([&] { return GatesOpen(worker); }));
  const std::string busy = StartRun("two", {{"sleep_ms", 3000}});
  ASSERT_TRUE(Eventually([&] { return worker.Busy().first == 1; }));
  const std::string first = StartRun("one");
  ASSERT_TRUE(Eventually([&] { return !GatesOpen(worker); }));

  store::ConnectionOptions listening;
  listening.url = url();
  listening.schema = schema();
  store::WakeListener listener(listening);
  const std::string second = StartRun("one");
  EXPECT_FALSE(listener.Wait(300ms));
  EXPECT_NE(Status(busy), "completed");
  for (const auto& id : {busy, first, second}) {
    EXPECT_TRUE(EventuallyStatus(id, "completed", 10s)) << Describe(id);
  }
  EXPECT_EQ(worker.Stats().lost, 0);
}

// With a slot still idle, the gates open again once the wake-up is taken:
// the next start wakes the idle slot while the first run goes on.
TEST_F(WorkerTest, ARunStartedWhileASlotIsIdleWakesItAtOnce) {
  const Worker& worker = StartWorkerOnWakeUps(2);
  ASSERT_TRUE(Eventually([&] { return GatesOpen(worker); }));
  const std::string slow = StartRun("two", {{"sleep_ms", 3000}});
  ASSERT_TRUE(Eventually([&] { return worker.Busy().first == 1 && GatesOpen(worker); }));
  const std::string quick = StartRun("one");
  EXPECT_TRUE(EventuallyStatus(quick, "completed", 2s)) << Describe(quick);
  EXPECT_NE(Status(slow), "completed");
  EXPECT_TRUE(EventuallyStatus(slow, "completed")) << Describe(slow);
}

// A slot plans the claim a wake-up makes as it goes idle, off the path of
// that wake-up: its session's last statement is the claim.
TEST_F(WorkerTest, AnIdleSlotHasPlannedItsClaimOnItsSession) {
  WorkerOptions options = Options();
  options.concurrency = 1;
  options.claim_batch = 4;  // a claim of one run is not full: no claim follows the run
  const Worker& worker = StartWorker(options);
  const std::string id = StartRun("one");
  ASSERT_TRUE(EventuallyStatus(id, "completed")) << Describe(id);
  EXPECT_TRUE(Eventually([&] { return SlotHasPlannedItsClaim(worker); }));
}

TEST_F(WorkerTest, RetentionDeletesOldFinishedRunsAndKeepsTheRest) {
  WorkerOptions options = Options();
  options.retention = std::chrono::hours(1);
  Worker& first = StartWorker(options);
  const std::string old_run = StartRun("one");
  const std::string recent_run = StartRun("one");
  ASSERT_TRUE(EventuallyStatus(old_run, "completed")) << Describe(old_run);
  ASSERT_TRUE(EventuallyStatus(recent_run, "completed")) << Describe(recent_run);
  // Finished two hours ago, by the database's clock.
  Sql("UPDATE {s}.runs SET finished_at = now() - interval '2 hours' WHERE id = '" + old_run + "'");
  // The first retention pass comes one reaper interval after a worker starts.
  ASSERT_TRUE(first.Stop());
  StartWorker(options);
  ASSERT_TRUE(Eventually(
      [&] { return SqlInt("SELECT count(*) FROM {s}.runs WHERE id = '" + old_run + "'") == 0; }));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + old_run + "'"), 0);
  EXPECT_EQ(Status(recent_run), "completed");
  EXPECT_GT(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + recent_run + "'"), 0);
}

// ---------------------------------------------------------------- batch mode

class BatchModeTest : public WorkerTest {
 protected:
  // Runs can start before a worker does, so that one claim takes them all.
  void SetUp() override {
    WorkerTest::SetUp();
    if (HasFatalFailure()) return;
    RegisterDefinitions();
  }

  // One slot, so that one batch holds every run started before it.
  WorkerOptions BatchOptions(int batch_size) {
    WorkerOptions options = Options();
    options.concurrency = 1;
    options.batch_size = batch_size;
    return options;
  }

  static std::string IdList(const std::vector<std::string>& run_ids) {
    std::string ids;
    for (const auto& id : run_ids) ids += (ids.empty() ? "'" : ",'") + id + "'";
    return ids;
  }

  // Transactions that committed the runs' step commits: rows one
  // transaction inserted share its xmin.
  int64_t CommitTransactions(const std::vector<std::string>& run_ids) {
    return SqlInt("SELECT count(DISTINCT xmin::text) FROM {s}.run_events WHERE " + kStepCommits +
                  " AND run_id IN (" + IdList(run_ids) + ")");
  }

  // Stack locks of these runs that some session holds (the key of
  // stack_try_lock, as pg_locks splits it).
  int64_t StackLocksHeld(const std::vector<std::string>& run_ids) {
    return SqlInt("SELECT count(*) FROM pg_locks l, unnest(ARRAY[" + IdList(run_ids) +
                  "]) id WHERE l.locktype = 'advisory' AND l.granted AND "
                  "((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended('" +
                  schema() + ":stack:' || id, 0)");
  }
};

TEST_F(BatchModeTest, ARoundOfStepsOfManyRunsCommitsInOneTransaction) {
  std::vector<std::string> runs;
  for (int i = 0; i < 8; ++i) runs.push_back(StartRun("three", {{"fields", {{"i", i}}}}));
  Worker& worker = StartWorker(BatchOptions(8));

  for (const auto& id : runs) {
    ASSERT_TRUE(EventuallyStatus(id, "completed")) << Describe(id);
    EXPECT_THAT(CommittedSteps(id), ElementsAre("s1", "s2", "s3")) << Describe(id);
    EXPECT_EQ(EventsOf(id, "completed").size(), 1u) << Describe(id);
  }
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(GetRun(runs[i]).output.value_or(Json())["i"], i) << Describe(runs[i]);
  }
  // 24 steps; one run at a time would take 24 transactions. One claim of
  // all 8 takes 3 rounds; a claim that found only some of them started
  // takes a few more.
  EXPECT_LE(CommitTransactions(runs), 6);
  EXPECT_EQ(worker.Stats().lost, 0);
  // Every stack lock was let go, and the test's key matches the store's.
  EXPECT_EQ(StackLocksHeld(runs), 0);
  auto holder = Open();
  ASSERT_TRUE(holder->TryLockStack(runs[0]));
  EXPECT_EQ(StackLocksHeld(runs), 1);
  holder->UnlockStack(runs[0]);
}

// A cancel that lands while the round's first step runs bumps that run's
// version: the round's transaction conflicts and rolls back, each checkpoint
// then commits alone, and only the cancelled run loses its step.
TEST_F(BatchModeTest, ARunCancelledDuringARoundCostsTheOtherRunsNothing) {
  std::vector<std::string> runs;
  for (int i = 0; i < 4; ++i) runs.push_back(StartRun("two", {{"sleep_ms", 500}}));
  Worker& worker = StartWorker(BatchOptions(4));
  // Claimed, locked and read at once; the round's four sleeps take 2 s, the
  // first run's first.
  ASSERT_TRUE(Eventually([&] { return Status(runs[0]) == "running"; })) << Describe(runs[0]);
  std::this_thread::sleep_for(250ms);
  const CancelResult cancel =
      conn().Transact([&](store::Tx& tx) { return store::CancelRun(tx, runs[0], "test"); });
  ASSERT_EQ(cancel.outcome, CancelOutcome::kCancelled);

  for (int i = 1; i < 4; ++i) {
    ASSERT_TRUE(EventuallyStatus(runs[i], "completed")) << Describe(runs[i]);
    EXPECT_THAT(CommittedSteps(runs[i]), ElementsAre("first", "second")) << Describe(runs[i]);
  }
  EXPECT_EQ(Status(runs[0]), "cancelled");
  EXPECT_TRUE(CommittedSteps(runs[0]).empty()) << Describe(runs[0]);
  ASSERT_TRUE(Eventually([&] { return worker.Stats().parked == 3; }));
  EXPECT_EQ(worker.Stats().lost, 1) << "only the cancelled run's step is lost";
  // The others' first steps committed one by one, their second ones together.
  EXPECT_EQ(CommitTransactions({runs[1], runs[2], runs[3]}), 4);
}

// A transactional step commits its own writes with its checkpoint, alone;
// the other runs of its round commit together.
TEST_F(BatchModeTest, TransactionalStepsCommitTheirWritesOnceBesideTheRound) {
  Sql("CREATE TABLE {s}.sink (run_id text, attempt integer)");
  const std::string table = schema() + ".sink";
  std::vector<std::string> inserts;
  std::vector<std::string> plain;
  for (int i = 0; i < 3; ++i) {
    inserts.push_back(StartRun("insert", {{"table", table}}));
    plain.push_back(StartRun("three"));
  }
  StartWorker(BatchOptions(6));

  for (const auto& id : inserts) {
    ASSERT_TRUE(EventuallyStatus(id, "completed")) << Describe(id);
    EXPECT_THAT(CommittedSteps(id), ElementsAre("insert", "after")) << Describe(id);
    EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.sink WHERE run_id = '" + id + "'"), 1);
  }
  for (const auto& id : plain) {
    ASSERT_TRUE(EventuallyStatus(id, "completed")) << Describe(id);
    EXPECT_THAT(CommittedSteps(id), ElementsAre("s1", "s2", "s3")) << Describe(id);
  }
}

// A step that fails for good unwinds its run through its compensation, in
// the batch as alone.
TEST_F(BatchModeTest, FailingRunsCompensateTheirCommittedSteps) {
  std::vector<std::string> runs;
  for (int i = 0; i < 4; ++i) runs.push_back(StartRun("undo"));
  StartWorker(BatchOptions(4));

  for (const auto& id : runs) {
    ASSERT_TRUE(EventuallyStatus(id, "failed")) << Describe(id);
    EXPECT_THAT(Lifecycle(id), ElementsAre("step_committed", "failed", "compensating",
                                           "compensated", "compensations_done"))
        << Describe(id);
  }
}

}  // namespace
}  // namespace cairn::test
