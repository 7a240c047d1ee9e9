// The caps of the limits table against a real PostgreSQL: input, signal
// payload, inbox retention, keys, context at a checkpoint, and transitions
// per run. A cap exceeded through the API is a clear error (SQLSTATE 54000,
// naming the limit and the size) that changes nothing; a run past its
// transitions fails with code history_limit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <stdexcept>
#include <string>

#include "errors.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using ::testing::HasSubstr;

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

class Limits : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (HasFatalFailure()) return;
    Sql("INSERT INTO {s}.workflow_definitions (hash, workflow, version, first_step, definition) "
        "VALUES ('h1', 'wf', 1, 's1', '{}')");
  }

  void SetLimit(const std::string& name, int64_t value) {
    Sql("UPDATE {s}.limits SET value = " + std::to_string(value) + " WHERE name = '" + name + "'");
  }

  std::string Start(const store::StartRequest& request) {
    return conn().Transact([&](store::Tx& tx) { return store::StartRun(tx, request).id; });
  }

  DatabaseError StartError(const store::StartRequest& request) {
    return Catch<DatabaseError>([&] { Start(request); });
  }

  store::SignalOutcome SendSignal(const std::string& key, const Json& payload,
                                  std::chrono::milliseconds retention = std::chrono::hours(24)) {
    return conn().Transact(
        [&](store::Tx& tx) { return store::Signal(tx, key, payload, retention); });
  }

  // A checkpoint of the run at its current version, going on at `cursor`.
  Checkpoint Next(const std::string& run_id, RunStatus status, Json context = Json::object()) {
    cairn::Run run = *conn().Transact([&](store::Tx& tx) { return store::GetRun(tx, run_id); });
    Checkpoint c;
    c.run_id = run_id;
    c.expected_version = run.version;
    c.context = std::move(context);
    c.cursor = "s2";
    c.status = status;
    c.lease_owner = "worker-1";
    c.lease_ms = 30000;
    c.compensations = run.compensations;
    return c;
  }

  CheckpointResult Save(const Checkpoint& c, const std::vector<RunEvent>& events = {}) {
    return conn().Transact([&](store::Tx& tx) { return store::SaveCheckpoint(tx, c, events); });
  }

  static Json Blob(size_t bytes) { return Json{{"blob", std::string(bytes, 'x')}}; }
};

TEST_F(Limits, StartRunRefusesA20MegabyteInputNamingTheLimitAndTheSize) {
  store::StartRequest request;
  request.workflow = "wf";
  request.input = Blob(20 * 1024 * 1024);
  const DatabaseError error = StartError(request);
  EXPECT_EQ(error.sqlstate(), "54000");
  EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
  EXPECT_THAT(error.what(), HasSubstr("the run's input is 20971532 bytes"));
  EXPECT_THAT(error.what(), HasSubstr("over the limit of 1048576 bytes (max_input_bytes in"));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 0);
  // Through SQL as well: the function refuses, whoever calls it.
  try {
    Sql("SELECT {s}.start_run('wf', jsonb_build_object('blob', repeat('x', 20 * 1024 * 1024)))");
    ADD_FAILURE() << "start_run accepted a 20 MB input";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("max_input_bytes"));
  }
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 0);
}

TEST_F(Limits, TheOwnerChangesALimitInTheLimitsTable) {
  SetLimit("max_input_bytes", 100);
  store::StartRequest request;
  request.workflow = "wf";
  request.input = Blob(200);
  EXPECT_THAT(StartError(request).what(), HasSubstr("over the limit of 100 bytes"));
  Sql("DELETE FROM {s}.limits WHERE name = 'max_input_bytes'");  // no cap at all
  EXPECT_EQ(Start(request).size(), 36u);
}

TEST_F(Limits, ChildRunsAreHeldToTheInputLimitToo) {
  const std::string parent = Start({"wf"});
  SetLimit("max_input_bytes", 100);
  const auto error = Catch<DatabaseError>([&] {
    conn().Transact([&](store::Tx& tx) {
      return store::StartChildRun(tx, parent, std::nullopt, ChildStart{"wf", Blob(200), {}});
    });
  });
  EXPECT_EQ(error.sqlstate(), "54000");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 1);
}

TEST_F(Limits, SignalRefusesA10MegabytePayload) {
  const auto error = Catch<DatabaseError>([&] { SendSignal("payment:1", Blob(10 * 1024 * 1024)); });
  EXPECT_EQ(error.sqlstate(), "54000");
  EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
  EXPECT_THAT(error.what(), HasSubstr("the signal's payload is 10485772 bytes"));
  EXPECT_THAT(error.what(), HasSubstr("max_signal_payload_bytes"));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 0);
}

TEST_F(Limits, SignalRefusesToKeepAnInboxEntryForAThousandYears) {
  using years = std::chrono::duration<int64_t, std::ratio<31556952>>;
  const auto error = Catch<DatabaseError>([&] {
    SendSignal("payment:1", Json::object(),
               std::chrono::duration_cast<std::chrono::milliseconds>(years(1000)));
  });
  EXPECT_EQ(error.sqlstate(), "54000");
  EXPECT_THAT(error.what(), HasSubstr("max_inbox_retention_seconds"));
  EXPECT_THAT(error.what(), HasSubstr("the inbox retention is 31556952000 seconds, over the "
                                      "limit of 2592000 seconds"));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 0);
  const auto negative = Catch<DatabaseError>(
      [&] { SendSignal("payment:1", Json::object(), std::chrono::milliseconds(-1)); });
  EXPECT_EQ(negative.sqlstate(), "22023");
  // 30 days is the default cap, and allowed.
  EXPECT_EQ(SendSignal("payment:1", Json::object(), std::chrono::hours(24 * 30)),
            store::SignalOutcome::kStored);
}

TEST_F(Limits, EmptyAndOversizedKeysAreRefusedBeforeAndInSql) {
  store::StartRequest request;
  request.workflow = "wf";
  request.key = "";
  EXPECT_THROW(Start(request), InvalidArgumentError);
  request.key = std::string(10000, 'k');
  try {
    Start(request);
    ADD_FAILURE() << "accepted a 10,000-byte key";
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the run key is 10000 bytes, over the limit of 512 bytes"));
  }
  EXPECT_THROW(SendSignal("", Json::object()), InvalidArgumentError);
  EXPECT_THROW(SendSignal(std::string(10000, 'k'), Json::object()), InvalidArgumentError);
  // The SQL API applies the same rule, with SQLSTATE 22023.
  for (const std::string sql : {"SELECT {s}.start_run('wf', '{}'::jsonb, '')",
                                "SELECT {s}.start_run('wf', '{}'::jsonb, repeat('k', 10000))",
                                "SELECT {s}.signal('')", "SELECT {s}.signal(repeat('k', 10000))"}) {
    try {
      Sql(sql);
      ADD_FAILURE() << "accepted: " << sql;
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), ::testing::AnyOf(HasSubstr("is empty"),
                                             HasSubstr("10000 bytes, over the limit of 512")))
          << sql;
    }
  }
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 0);
  // 512 bytes is allowed.
  request.key = std::string(512, 'k');
  EXPECT_EQ(Start(request).size(), 36u);
}

// jsonb holds numbers of any size, and cairn reads JSON numbers as doubles: a
// run whose input held a number past the largest double (or one that rounds
// up past it) would be claimed by a worker that cannot read it. Every entry
// of the SQL API that takes JSON refuses such a number, naming where it is,
// and changes nothing; every number a double holds still passes.
TEST_F(Limits, NumbersBeyondADoubleAreRefusedWhereverTheSqlApiTakesJson) {
  const std::string rounds_past_the_largest = "(2::numeric ^ 1024 - 2::numeric ^ 970)";
  const auto refusal = [&](const std::string& sql) -> std::string {
    try {
      Sql(sql);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    ADD_FAILURE() << "accepted: " << sql;
    return "";
  };
  EXPECT_THAT(refusal("SELECT {s}.start_run('wf', '{\"amount\": 1e400}')"),
              HasSubstr("the run's input holds a number of 401 digits (100000000000..."));
  EXPECT_THAT(refusal("SELECT {s}.start_run('wf', jsonb_build_object('a', jsonb_build_array(-" +
                      rounds_past_the_largest + ")))"),
              HasSubstr("the run's input holds a number of 309 digits (-17976931348"));
  EXPECT_THAT(refusal("SELECT count(*) FROM {s}.start_runs('wf', '[{}, {\"x\": [1e309]}]')"),
              HasSubstr("the input of run 2 holds a number of 310 digits"));
  EXPECT_THAT(refusal("SELECT {s}.signal('payment:1', '{\"cents\": 1e400}')"),
              HasSubstr("the signal's payload holds a number of 401 digits"));
  Sql("SELECT {s}.idempotency_claim('charge-1', 'checkout-7', interval '1 hour')");
  EXPECT_THAT(refusal("SELECT {s}.idempotency_complete('charge-1', 'checkout-7', '[1e400]', "
                      "interval '1 hour')"),
              HasSubstr("the idempotency result holds a number of 401 digits"));
  EXPECT_THAT(refusal("SELECT {s}.signal('payment:1', '{\"cents\": 1e400}')"),
              HasSubstr("beyond the largest number a double holds (1.7976931348623157e308)"));
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 0);
  EXPECT_EQ(Sql("SELECT status FROM {s}.idempotency_keys"), "in_progress");

  const std::string run_id =
      Sql("SELECT {s}.start_run('wf', jsonb_build_object('largest', " + rounds_past_the_largest +
          " - 1, 'tiny', 1e-400, 'padding', repeat('x', 400)))");
  const auto run = conn().Transact([&](store::Tx& tx) { return store::GetRun(tx, run_id); });
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->input["largest"].get<double>(), std::numeric_limits<double>::max());
  EXPECT_EQ(run->input["tiny"].get<double>(), 0.0);
  EXPECT_EQ(Sql("SELECT count(*) FROM {s}.start_runs('wf', '[{\"n\": 1e308}, {\"n\": -1e-308}]')"),
            "2");
  EXPECT_EQ(Sql("SELECT {s}.signal('payment:1', '{\"cents\": 1.5e300}')"), "stored");
}

TEST_F(Limits, ACheckpointWithAContextOverTheLimitIsRefusedAndChangesNothing) {
  const std::string run = Start({"wf"});
  SetLimit("max_context_bytes", 1000);
  const int64_t version = SqlInt("SELECT version FROM {s}.runs WHERE id = '" + run + "'");
  const auto error =
      Catch<DatabaseError>([&] { Save(Next(run, RunStatus::kRunning, Blob(2000))); });
  EXPECT_EQ(error.sqlstate(), "54000");
  EXPECT_THAT(error.what(), HasSubstr("the run's context is 2011 bytes"));
  EXPECT_THAT(error.what(), HasSubstr("max_context_bytes"));
  EXPECT_EQ(SqlInt("SELECT version FROM {s}.runs WHERE id = '" + run + "'"), version);

  // An output over it is refused too.
  Checkpoint completing = Next(run, RunStatus::kCompleted);
  completing.output = Blob(2000);
  EXPECT_EQ(Catch<DatabaseError>([&] { Save(completing); }).sqlstate(), "54000");

  // The failure that records it lands, whatever its context.
  Checkpoint failing = Next(run, RunStatus::kFailed, Blob(2000));
  failing.error = "too big";
  EXPECT_EQ(Save(failing).status, RunStatus::kFailed);
}

TEST_F(Limits, ARunPastItsTransitionsFailsWithHistoryLimit) {
  SetLimit("max_transitions_per_run", 3);
  const std::string run = Start({"wf"});
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Save(Next(run, RunStatus::kRunning, {{"i", i}})).status, RunStatus::kRunning);
  }
  RunEvent step;
  step.run_id = run;
  step.step = "s1";
  step.kind = "step_committed";
  const CheckpointResult fourth = Save(Next(run, RunStatus::kRunning, {{"i", 3}}), {step});
  EXPECT_EQ(fourth.status, RunStatus::kFailed);
  EXPECT_EQ(RunColumn(run, "transitions"), "4");
  EXPECT_THAT(RunColumn(run, "error"), HasSubstr("max_transitions_per_run"));
  EXPECT_EQ(RunColumn(run, "lease_owner"), "");
  EXPECT_EQ(RunColumn(run, "finished_at IS NOT NULL"), "t");
  EXPECT_EQ(RunColumn(run, "context->>'i'"), "3");  // the step itself committed
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + run +
                   "' AND kind = 'failed' AND value->>'code' = 'history_limit'"),
            1);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + run +
                   "' AND kind = 'step_committed'"),
            1);
}

TEST_F(Limits, HistoryLimitUnwindsARunWithCompensationsAndCancelsItsWaits) {
  SetLimit("max_transitions_per_run", 1);
  const std::string run = Start({"wf"});
  Checkpoint first = Next(run, RunStatus::kRunning);
  first.compensations = Json::array({"s1"});
  Save(first);
  SaveWait(run, "payment:" + run);
  Checkpoint waiting = Next(run, RunStatus::kWaiting);
  const CheckpointResult result = Save(waiting);
  EXPECT_EQ(result.status, RunStatus::kCompensating);
  EXPECT_EQ(RunColumn(run, "final_status"), "failed");
  EXPECT_EQ(RunColumn(run, "finished_at IS NULL"), "t");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records WHERE run_id = '" + run +
                   "' AND status = 'CANCELLED'"),
            1);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + run +
                   "' AND kind = 'compensating'"),
            1);
  // The compensations themselves are not held to the limit.
  Checkpoint compensated = Next(run, RunStatus::kRunning);
  compensated.final_status = RunStatus::kFailed;
  compensated.compensations = Json::array();
  EXPECT_EQ(Save(compensated).status, RunStatus::kRunning);
}

TEST_F(Limits, ARunMayCompleteAtItsLimit) {
  SetLimit("max_transitions_per_run", 1);
  const std::string run = Start({"wf"});
  Save(Next(run, RunStatus::kRunning));
  Checkpoint done = Next(run, RunStatus::kCompleted);
  done.output = Json{{"ok", true}};
  EXPECT_EQ(Save(done).status, RunStatus::kCompleted);
}

}  // namespace
}  // namespace cairn::test
