// Whole-run deadlines with real `cairn run` daemons and the `cairn` CLI: a
// run past its deadline fails with code deadline_exceeded whether it waits,
// sleeps, backs off or runs a step, and unwinds its committed steps; a run
// that finishes in time is unaffected. Workflows: tests/workflows/deadlines.yaml.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "daemon_fixture.hpp"
#include "http_get.hpp"
#include "pg_harness.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using Json = nlohmann::json;

class Deadlines : public DaemonTest {
 protected:
  Deadlines() : DaemonTest("tests/workflows/deadlines.yaml") {}

  void SetUp() override {
    DaemonTest::SetUp();
    Sql("CREATE TABLE {s}.journal (id bigserial PRIMARY KEY, run_id text NOT NULL, "
        "step text NOT NULL, attempt int NOT NULL)");
    Sql("CREATE TABLE {s}.writes (run_id text NOT NULL, attempt int NOT NULL)");
  }

  Json Input(Json extra = Json::object()) const {
    Json input = {{"journal", schema() + ".journal"}, {"table", schema() + ".writes"}};
    input.update(extra);
    return input;
  }

  // Starts a run through the SQL API with the start's own deadline.
  std::string StartWithDeadline(const std::string& workflow, const std::string& deadline,
                                const Json& input) {
    return Sql("SELECT {s}.start_run('" + workflow + "', '" + Quoted(input.dump()) +
               "'::jsonb, p_deadline => '" + deadline + "')");
  }

  // The steps and compensations that committed a journal row, in order.
  std::string Journal(const std::string& id) const {
    return Sql(
        "SELECT coalesce(string_agg(step, ' ' ORDER BY id), '') FROM {s}.journal "
        "WHERE run_id = '" +
        id + "'");
  }

  // The run's lifecycle events (no context events), in order.
  std::string Lifecycle(const std::string& id) const {
    return Sql(
        "SELECT string_agg(kind || coalesce('(' || step || ')', ''), ' ' ORDER BY position) "
        "FROM {s}.run_events WHERE run_id = '" +
        id + "' AND kind <> 'context'");
  }

  int64_t DeadlineFailures(const std::string& id) const {
    return SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + id +
                  "' AND kind = 'failed' AND value->>'code' = 'deadline_exceeded'");
  }

  // The run failed at its deadline and unwound.
  void ExpectFailedAtItsDeadline(const std::string& id) const {
    EXPECT_EQ(DeadlineFailures(id), 1) << Lifecycle(id);
    EXPECT_EQ(RunColumn(id, "final_status"), "failed");
    EXPECT_THAT(RunColumn(id, "error"), HasSubstr("the run passed its deadline of"));
    EXPECT_EQ(RunEventCount(id, "compensations_done"), 1) << Lifecycle(id);
    EXPECT_NE(RunColumn(id, "finished_at"), "");
    auto show = Cli({"show", id, "--json"});
    ASSERT_EQ(show.exit_code, 0) << show.err;
    EXPECT_EQ(Json::parse(show.out)["error_code"], "deadline_exceeded") << show.out;
  }

  // For a run the sweeper failed: not before its deadline.
  void ExpectNotFailedEarly(const std::string& id) const {
    EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events e JOIN {s}.runs r ON r.id = e.run_id "
                     "WHERE e.run_id = '" +
                     id + "' AND e.kind = 'failed' AND e.created_at < r.deadline_at"),
              0)
        << "failed before its deadline";
  }
};

// The workflow's `deadline:` ends a run that waits for a signal with no
// timeout of its own; its wait is closed and a late signal changes nothing.
TEST_F(Deadlines, AWaitingRunFailsAtTheWorkflowsDeadlineAndCompensates) {
  auto daemon = StartDaemon(2);
  const std::string id = StartRun("dl_wait", Input());
  EXPECT_EQ(RunColumn(id, "deadline_at - created_at"), "00:00:01.5");
  ASSERT_TRUE(WaitForStatus(id, "waiting")) << Lifecycle(id) << daemon->Log();
  ASSERT_TRUE(WaitForStatus(id, "failed")) << Lifecycle(id) << daemon->Log();
  ExpectFailedAtItsDeadline(id);
  ExpectNotFailedEarly(id);
  EXPECT_EQ(Journal(id), "a undo_a");
  EXPECT_EQ(Lifecycle(id),
            "step_committed(a) step_committed(wait) waiting(wait) failed(after) "
            "compensating(after) compensated(undo_a) compensations_done(undo_a)");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records WHERE run_id = '" + id +
                   "' AND status = 'CANCELLED'"),
            1);

  EXPECT_THAT(daemon->Log(), HasSubstr("passed while it was not running"));

  auto late = Cli({"signal", "go:" + id, "--payload", "{}"});
  EXPECT_THAT(late.out + late.err, HasSubstr("cancelled")) << late.exit_code;
  EXPECT_EQ(RunColumn(id, "status"), "failed");
  EXPECT_EQ(Journal(id), "a undo_a");

  auto history = Cli({"history", id});
  ASSERT_EQ(history.exit_code, 0) << history.err;
  EXPECT_THAT(history.out, HasSubstr("deadline_exceeded"));
  Stop(*daemon);
}

// A run in cairn's durable sleep fails at the deadline its start gave, long
// before it would have woken.
TEST_F(Deadlines, ASleepingRunFailsAtTheStartsDeadlineAndCompensates) {
  auto daemon = StartDaemon(2);
  const std::string id =
      StartWithDeadline("dl_sleep", "1500 milliseconds", Input({{"sleep_ms", 60000}}));
  ASSERT_TRUE(WaitForStatus(id, "failed")) << Lifecycle(id) << daemon->Log();
  ExpectFailedAtItsDeadline(id);
  ExpectNotFailedEarly(id);
  EXPECT_EQ(Journal(id), "a undo_a");
  EXPECT_EQ(RunEventCount(id, "sleeping"), 1);
  Stop(*daemon);
}

// A run that becomes due after its deadline passed, with no sweeper pass in
// between, fails when a worker claims it, without running the step.
TEST_F(Deadlines, ARunClaimedAfterItsDeadlineFailsWithoutRunningItsStep) {
  DaemonOptions options = Options(2);
  options.reaper_interval = "1h";  // one pass at start, before the run exists
  auto daemon = std::make_unique<DaemonProcess>(options);
  ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log();
  const std::string id = StartWithDeadline("dl_sleep", "1 second", Input({{"sleep_ms", 2000}}));
  ASSERT_TRUE(WaitForStatus(id, "failed")) << Lifecycle(id) << daemon->Log();
  ExpectFailedAtItsDeadline(id);
  ExpectNotFailedEarly(id);
  EXPECT_EQ(Journal(id), "a undo_a") << "the step after the sleep never ran";
  EXPECT_EQ(Lifecycle(id),
            "step_committed(a) step_committed(nap) sleeping(nap) failed(after) "
            "compensating(after) compensated(undo_a) compensations_done(undo_a)");
  EXPECT_THAT(daemon->Log(), HasSubstr("claimed after its deadline")) << "not the sweeper's doing";
  Stop(*daemon);
}

// A run whose step backs off before its next attempt fails at its deadline.
TEST_F(Deadlines, ARunBackingOffFailsAtItsDeadlineAndCompensates) {
  auto daemon = StartDaemon(2);
  const std::string id = StartWithDeadline("dl_backoff", "1500 milliseconds", Input());
  ASSERT_TRUE(WaitForStatus(id, "failed")) << Lifecycle(id) << daemon->Log();
  ExpectFailedAtItsDeadline(id);
  ExpectNotFailedEarly(id);
  EXPECT_EQ(Journal(id), "a undo_a");
  EXPECT_EQ(RunEventCount(id, "retried"), 1) << Lifecycle(id);
  Stop(*daemon);
}

// A step still running when the deadline passes is not killed: its
// checkpoint lands (its row, its place on the compensation stack) and ends
// the run there, so no further step commits and the step is undone.
TEST_F(Deadlines, ARunningRunFailsAtItsNextCheckpointWithoutCommittingAnotherStep) {
  auto daemon = StartDaemon(2);
  const std::string id = StartWithDeadline("dl_slow", "1 second", Input({{"sleep_ms", 2500}}));
  ASSERT_TRUE(WaitForStatus(id, "failed", 30s)) << Lifecycle(id) << daemon->Log();
  ExpectFailedAtItsDeadline(id);
  EXPECT_EQ(Journal(id), "a undo_b undo_a");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.writes"), 1) << "b's checkpoint landed";
  EXPECT_THAT(daemon->Log(), HasSubstr("ended the run (deadline_exceeded)"));
  EXPECT_EQ(Lifecycle(id),
            "step_committed(a) step_committed(b) failed(c) compensating(c) "
            "compensated(undo_b) compensated(undo_a) compensations_done(undo_a)");
  Stop(*daemon);
}

// cairn_deadlines_exceeded_total counts the runs the daemon failed at their
// deadline, by its sweeper (a sleeping run) and at a checkpoint (a running
// one), and not a run that finished in time.
TEST_F(Deadlines, TheMetricCountsDeadlineFailuresOfTheSweeperAndTheCheckpoint) {
  const auto port = static_cast<uint16_t>(FindFreePort());
  DaemonOptions options = Options(2);
  options.metrics_listen = "127.0.0.1:" + std::to_string(port);
  auto daemon = std::make_unique<DaemonProcess>(options);
  ASSERT_TRUE(daemon->StartAndWaitReady()) << daemon->Log();
  const std::string swept =
      StartWithDeadline("dl_sleep", "1500 milliseconds", Input({{"sleep_ms", 60000}}));
  const std::string running = StartWithDeadline("dl_slow", "1 second", Input({{"sleep_ms", 2500}}));
  const std::string quick = StartRun("dl_quick", Input());
  ASSERT_TRUE(WaitForStatus(swept, "failed", 30s)) << Lifecycle(swept) << daemon->Log();
  ASSERT_TRUE(WaitForStatus(running, "failed", 30s)) << Lifecycle(running) << daemon->Log();
  ASSERT_TRUE(WaitForStatus(quick, "completed")) << Lifecycle(quick) << daemon->Log();
  EXPECT_EQ(DeadlineFailures(swept) + DeadlineFailures(running), 2);
  const HttpResult metrics = HttpGet(port, "/metrics");
  ASSERT_EQ(metrics.status, 200) << metrics.body;
  EXPECT_THAT(metrics.body, HasSubstr("\ncairn_deadlines_exceeded_total 2\n"));
  Stop(*daemon);
}

// A run that finishes within its deadline is unaffected, and `cairn start
// --deadline` sets it; a bad value is refused before anything starts.
TEST_F(Deadlines, TheCliSetsAndShowsTheDeadlineAndARunInTimeIsUnaffected) {
  auto daemon = StartDaemon(2);
  for (const char* bad : {"soon", "0", "-5m", "1.5h"}) {
    auto refused = Cli({"start", "dl_quick", "--deadline", bad, "--input", Input().dump()});
    EXPECT_EQ(refused.exit_code, 2) << bad << ": " << refused.out << refused.err;
    EXPECT_THAT(refused.err, HasSubstr("--deadline")) << bad;
    EXPECT_THAT(refused.err, HasSubstr(bad)) << bad;
  }
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 0) << "nothing started";

  auto started = Cli({"start", "dl_quick", "--deadline", "5m", "--input", Input().dump()});
  ASSERT_EQ(started.exit_code, 0) << started.out << started.err;
  const std::string id = started.out.substr(0, started.out.find('\n'));
  EXPECT_EQ(RunColumn(id, "deadline_at - created_at"), "00:05:00");
  ASSERT_TRUE(WaitForStatus(id, "completed")) << Lifecycle(id) << daemon->Log();
  EXPECT_EQ(Journal(id), "a b");
  EXPECT_EQ(RunEventCount(id, "failed"), 0);

  auto show = Cli({"show", id});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  auto json = Cli({"show", id, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const std::string deadline_at = Json::parse(json.out).at("deadline_at").get<std::string>();
  EXPECT_EQ(RunColumn(id, "deadline_at = '" + deadline_at + "'::timestamptz"), "t");
  EXPECT_THAT(show.out, HasSubstr("deadline_at"));
  EXPECT_THAT(show.out, HasSubstr(deadline_at));

  // Without --deadline the workflow's own applies.
  auto plain = Cli({"start", "dl_quick", "--input", Input().dump()});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const std::string other = plain.out.substr(0, plain.out.find('\n'));
  EXPECT_EQ(RunColumn(other, "deadline_at - created_at"), "00:01:00");
  ASSERT_TRUE(WaitForStatus(other, "completed")) << Lifecycle(other) << daemon->Log();
  Stop(*daemon);
}

}  // namespace
}  // namespace cairn::test
