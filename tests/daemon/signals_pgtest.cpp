// Signals, wait expiry, cancel and retry against the harness's real
// PostgreSQL server, with real `cairn run` daemons and the `cairn` CLI.
// Assertions are on counts in the database. Workflows:
// tests/workflows/signals.yaml.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "daemon_fixture.hpp"
#include "history_sql.hpp"
#include "pg_session.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

using Session = cairn::test::PgSession;

class Signals : public DaemonTest {
 protected:
  Signals() : DaemonTest("tests/workflows/signals.yaml") {}

  void StartRuns(const std::string& workflow, int count, const Json& input = Json::object()) {
    Sql("SELECT count({s}.start_run('" + workflow + "', '" + input.dump() +
        "'::jsonb)) FROM generate_series(1, " + std::to_string(count) + ")");
  }

  // The SQL API, as an application calls it.
  std::string SqlSignal(const std::string& key, const Json& payload = Json::object()) {
    return Sql("SELECT {s}.signal('" + key + "', '" + payload.dump() + "'::jsonb)");
  }

  CommandResult CliSignal(const std::string& key, const Json& payload = Json::object()) const {
    return Cli({"signal", key, "--payload", payload.dump()});
  }

  int64_t CountWaits(const std::string& status) const {
    return SqlInt("SELECT count(*) FROM {s}.wait_records WHERE status = '" + status + "'");
  }

  std::string StatusSummary() const {
    return Sql("SELECT coalesce(string_agg(status || '=' || n, ', ' ORDER BY status), 'no runs') "
               "FROM (SELECT status, count(*) AS n FROM {s}.runs GROUP BY status) s") +
           "; waits: " +
           Sql("SELECT coalesce(string_agg(status || '=' || n, ', ' ORDER BY status), 'none') "
               "FROM (SELECT status, count(*) AS n FROM {s}.wait_records GROUP BY status) s");
  }

  // Everything a late signal must not change: runs, waits, history, inbox.
  std::string Fingerprint() const {
    return Sql(
        "SELECT md5(coalesce((SELECT string_agg(id || status || version || context::text || "
        "coalesce(cursor, '') || coalesce(error, ''), ',' ORDER BY id) FROM {s}.runs), '') || "
        "coalesce((SELECT string_agg(correlation_key || status || coalesce(payload::text, ''), "
        "',' ORDER BY correlation_key) FROM {s}.wait_records), '') || "
        "(SELECT count(*) FROM {s}.run_events)::text || "
        "(SELECT count(*) FROM {s}.signal_inbox)::text)");
  }
};

// 500 waiting runs, 16 signallers on their own connections each sending
// every signal twice, two daemons: each run resumes exactly once with the
// payload in its context, and exactly 500 calls reported 'delivered'.
TEST_F(Signals, ConcurrentDuplicateSignalsResumeEveryRunExactlyOnce) {
  constexpr int kRuns = 500;
  constexpr int kSignallers = 16;
  auto a = StartDaemon(4);
  auto b = StartDaemon(4);
  ASSERT_TRUE(a->Running() && b->Running());

  StartRuns("sig_wait", kRuns);
  ASSERT_TRUE(WaitFor("SELECT count(*) FROM {s}.runs WHERE status = 'waiting'", kRuns, 30s))
      << StatusSummary();
  ASSERT_EQ(CountWaits("WAITING"), kRuns);

  std::vector<std::string> keys;
  {
    Session admin(url());
    const std::string all =
        admin.Value("SELECT string_agg(correlation_key, ',' ORDER BY correlation_key) FROM \"" +
                        schema() + "\".wait_records",
                    {});
    size_t start = 0;
    while (start < all.size()) {
      size_t comma = all.find(',', start);
      if (comma == std::string::npos) comma = all.size();
      keys.push_back(all.substr(start, comma - start));
      start = comma + 1;
    }
  }
  ASSERT_EQ(keys.size(), static_cast<size_t>(kRuns));

  const std::string statement = "SELECT \"" + schema() + "\".signal($1, $2::jsonb)";
  std::mutex mutex;
  std::map<std::string, int64_t> outcomes;
  std::vector<std::string> errors;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kSignallers; ++t) {
    threads.emplace_back([&, t] {
      std::map<std::string, int64_t> mine;
      try {
        Session session(url());
        // Every key twice, in an order of this thread's own.
        std::vector<size_t> order;
        for (size_t i = 0; i < keys.size(); ++i) order.insert(order.end(), {i, i});
        std::mt19937 random(1000 + t);
        std::shuffle(order.begin(), order.end(), random);
        ready.fetch_add(1);
        while (!go.load()) std::this_thread::yield();
        for (size_t i : order) {
          const Json payload = {{"key", keys[i]}, {"n", static_cast<int64_t>(i)}};
          ++mine[session.Value(statement, {keys[i], payload.dump()})];
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        errors.push_back(e.what());
      }
      std::lock_guard lock(mutex);
      for (const auto& [outcome, n] : mine) outcomes[outcome] += n;
    });
  }
  while (ready.load() < kSignallers && errors.empty()) std::this_thread::sleep_for(1ms);
  go.store(true);
  for (auto& thread : threads) thread.join();
  ASSERT_TRUE(errors.empty()) << errors.front();

  EXPECT_EQ(outcomes["delivered"], kRuns);
  EXPECT_EQ(outcomes["already_delivered"], int64_t{kSignallers} * 2 * kRuns - kRuns);
  EXPECT_EQ(outcomes.size(), 2u) << "unexpected outcomes";

  ASSERT_TRUE(WaitFor("SELECT count(*) FROM {s}.runs WHERE status = 'completed'", kRuns, 40s))
      << StatusSummary();
  Stop(*a);
  Stop(*b);

  EXPECT_EQ(EventCount("signalled"), kRuns);
  EXPECT_EQ(EventCount("resumed"), kRuns);
  EXPECT_EQ(SqlInt("SELECT count(DISTINCT run_id) FROM {s}.run_events WHERE kind = 'resumed'"),
            kRuns);
  EXPECT_EQ(EventCount("completed"), kRuns);
  EXPECT_EQ(CountWaits("RESUMED"), kRuns);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 0);
  // Each run's context holds its own signal's payload under the event's name.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs r JOIN {s}.wait_records w ON w.run_id = r.id "
                   "WHERE r.context->'go'->>'key' = w.correlation_key "
                   "AND r.context->'go' ? 'n' AND w.payload = r.context->'go'"),
            kRuns);
  // The step after the wait ran once per run.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE " + kStepCommits +
                   " "
                   "AND step = 'after'"),
            kRuns);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM (SELECT run_id, step FROM {s}.run_events "
                   "WHERE " +
                   kStepCommits + " GROUP BY run_id, step HAVING count(*) > 1) d"),
            0);
  // Both daemons served the load.
  EXPECT_GT(a->ClaimedAtStop(), 0) << a->Log();
  EXPECT_GT(b->ClaimedAtStop(), 0) << b->Log();
}

// A signal that arrives before its wait exists waits in the inbox; the run
// continues as soon as it waits. A second early signal is a duplicate.
TEST_F(Signals, EarlySignalWaitsInTheInboxAndResumesTheRunWhenItWaits) {
  const std::string key = "early-order-42";
  const auto first = conn().Transact([&](store::Tx& tx) {
    return store::Signal(tx, key, Json{{"paid", 1}});
  });
  EXPECT_EQ(first, store::SignalOutcome::kStored);
  const auto second = conn().Transact([&](store::Tx& tx) {
    return store::Signal(tx, key, Json{{"paid", 2}});
  });
  EXPECT_EQ(second, store::SignalOutcome::kAlreadyDelivered);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 1);
  EXPECT_EQ(Sql("SELECT payload->>'paid' FROM {s}.signal_inbox"), "1");

  auto daemon = StartDaemon(2);
  const std::string id = StartRun("sig_wait", {{"key", key}});
  ASSERT_TRUE(WaitForStatus(id, "completed")) << StatusSummary() << daemon->Log();

  EXPECT_EQ(RunEventCount(id, "waiting"), 1);
  EXPECT_EQ(RunEventCount(id, "resumed"), 1);
  EXPECT_EQ(Sql("SELECT status FROM {s}.wait_records WHERE correlation_key = '" + key + "'"),
            "RESUMED");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 0);
  // The first payload, not the duplicate's.
  EXPECT_EQ(RunColumn(id, "context->'go'->>'paid'"), "1");
  EXPECT_EQ(RunColumn(id, "output->'context'->'go'->>'paid'"), "1");

  // Once consumed, the key is delivered for good.
  EXPECT_EQ(SqlSignal(key, {{"paid", 3}}), "already_delivered");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 0);
  Stop(*daemon);
  EXPECT_EQ(RunEventCount(id, "resumed"), 1);
}

// Short wait timeouts with two daemons: each wait expires once, its run takes
// the timeout step or fails; late signals report 'expired' and change nothing.
TEST_F(Signals, ExpiredWaitsTakeTheTimeoutPathOnceAndLateSignalsChangeNothing) {
  constexpr int kEach = 40;
  auto a = StartDaemon(4);
  auto b = StartDaemon(4);
  StartRuns("sig_timeout_next", kEach, {{"timeout_ms", 300}});
  StartRuns("sig_timeout_fail", kEach, {{"timeout_ms", 300}});

  ASSERT_TRUE(
      WaitFor("SELECT count(*) FROM {s}.runs WHERE (workflow = 'sig_timeout_next' AND "
              "status = 'completed') OR (workflow = 'sig_timeout_fail' AND "
              "status = 'failed')",
              2 * kEach, 30s))
      << StatusSummary();
  // Give a second expiry pass (either daemon) the chance to double up.
  std::this_thread::sleep_for(600ms);

  EXPECT_EQ(CountWaits("EXPIRED"), 2 * kEach);
  EXPECT_EQ(EventCount("wait_expired"), 2 * kEach);
  EXPECT_EQ(SqlInt("SELECT count(DISTINCT run_id) FROM {s}.run_events WHERE kind = 'wait_expired'"),
            2 * kEach);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events e JOIN {s}.runs r ON r.id = e.run_id "
                   "WHERE e.kind = 'wait_expired' AND e.value->>'then' = "
                   "CASE r.workflow WHEN 'sig_timeout_next' THEN 'ready' ELSE 'failed' END"),
            2 * kEach);
  EXPECT_EQ(EventCount("resumed"), 0);
  // The timeout step ran once per continuing run; the step after the wait never did.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE " + kStepCommits +
                   " "
                   "AND step = 'timed_out'"),
            kEach);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE " + kStepCommits +
                   " "
                   "AND step = 'after'"),
            0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE workflow = 'sig_timeout_next' "
                   "AND output = '{\"done\": true}'::jsonb"),
            kEach);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE workflow = 'sig_timeout_fail' "
                   "AND error LIKE '%timed out%'"),
            kEach);

  // Late signals: every one 'expired', and nothing moves.
  const std::string before = Fingerprint();
  const std::string keys =
      Sql("SELECT string_agg(correlation_key, ',' ORDER BY correlation_key) FROM {s}.wait_records");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records w "
                   "WHERE {s}.signal(w.correlation_key, '{\"late\": true}'::jsonb) = 'expired'"),
            2 * kEach);
  const std::string one_key = keys.substr(0, keys.find(','));
  auto late = CliSignal(one_key, {{"late", true}});
  EXPECT_EQ(late.exit_code, 6) << late.out << late.err;
  EXPECT_NE(late.err.find("expired"), std::string::npos) << late.err;
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(Fingerprint(), before);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 0);
  EXPECT_EQ(EventCount("signalled"), 0);

  Stop(*a);
  Stop(*b);
}

// `cairn retry` restarts a failed run at its failed step with its context
// intact and it completes; a completed run is not retried (exit 4).
TEST_F(Signals, RetryRestartsAFailedRunAtItsFailedStepWithItsCheckpoint) {
  Sql("CREATE TABLE {s}.flag (ok int NOT NULL); INSERT INTO {s}.flag VALUES (0)");
  auto daemon = StartDaemon(2);
  const Json input = {{"fields", {{"kept", "yes"}}},
                      {"sql", "SELECT 10 / ok AS v FROM \"" + schema() + "\".flag"},
                      {"params", Json::array()}};
  const std::string id = StartRun("sig_retry", input);
  ASSERT_TRUE(WaitForStatus(id, "failed")) << StatusSummary() << daemon->Log();
  EXPECT_EQ(RunColumn(id, "cursor"), "flaky");
  EXPECT_EQ(RunColumn(id, "context->>'kept'"), "yes");
  const std::string failed_version = RunColumn(id, "version");

  // Not yet fixed: a retry fails again at the same step.
  auto first = Cli({"retry", id});
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  ASSERT_TRUE(PollUntil([&] { return RunEventCount(id, "failed") == 2; }, 15s))
      << StatusSummary() << daemon->Log();
  ASSERT_TRUE(WaitForStatus(id, "failed"));
  EXPECT_GT(std::stoll(RunColumn(id, "version")), std::stoll(failed_version));

  // Fixed: the retry completes the run from the failed step.
  Sql("UPDATE {s}.flag SET ok = 2");
  auto second = Cli({"retry", id});
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  ASSERT_TRUE(WaitForStatus(id, "completed")) << StatusSummary() << daemon->Log();

  EXPECT_EQ(RunEventCount(id, "retry_requested"), 2);
  EXPECT_EQ(RunColumn(id, "context->>'kept'"), "yes");
  EXPECT_EQ(RunColumn(id, "context->'rows'->0->>'v'"), "5");
  EXPECT_EQ(RunColumn(id, "output->'context'->>'kept'"), "yes");
  // The step before the failed one is not run again.
  auto committed = [&](const std::string& step) {
    return SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + id + "' AND " +
                  kStepCommits + " AND step = '" + step + "'");
  };
  EXPECT_EQ(committed("prepare"), 1);
  EXPECT_EQ(committed("flaky"), 1);
  EXPECT_EQ(RunEventCount(id, "completed"), 1);

  auto again = Cli({"retry", id});
  EXPECT_EQ(again.exit_code, 4) << again.out << again.err;
  EXPECT_EQ(RunColumn(id, "status"), "completed");
  auto unknown = Cli({"retry", "00000000-0000-0000-0000-000000000001"});
  EXPECT_EQ(unknown.exit_code, 3) << unknown.out << unknown.err;
  Stop(*daemon);
}

// Cancelling a waiting run cancels its wait with it; a later signal reports
// 'cancelled' (CLI exit 4) and is not kept in the inbox.
TEST_F(Signals, CancelOfAWaitingRunCancelsItsWaitAndLaterSignalsAreRefused) {
  auto daemon = StartDaemon(2);
  const std::string id = StartRun("sig_wait");
  ASSERT_TRUE(WaitForStatus(id, "waiting")) << StatusSummary() << daemon->Log();
  const std::string key = "go:" + id;
  ASSERT_EQ(Sql("SELECT status FROM {s}.wait_records WHERE correlation_key = '" + key + "'"),
            "WAITING");

  EXPECT_EQ(
      Sql("SELECT outcome || '/' || waits_cancelled FROM {s}.cancel_run('" + id + "', 'test')"),
      "cancelled/1");
  EXPECT_EQ(RunColumn(id, "status"), "cancelled");
  EXPECT_EQ(Sql("SELECT status FROM {s}.wait_records WHERE correlation_key = '" + key + "'"),
            "CANCELLED");

  EXPECT_EQ(SqlSignal(key, {{"x", 1}}), "cancelled");
  auto cli = CliSignal(key, {{"x", 2}});
  EXPECT_EQ(cli.exit_code, 4) << cli.out << cli.err;
  EXPECT_NE(cli.err.find("cancelled"), std::string::npos) << cli.err;
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 0);

  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(RunColumn(id, "status"), "cancelled");
  EXPECT_EQ(RunEventCount(id, "resumed"), 0);
  EXPECT_EQ(RunEventCount(id, "signalled"), 0);
  EXPECT_EQ(RunColumn(id, "context ? 'go'"), "f");
  // Cancelling again changes nothing.
  EXPECT_EQ(Sql("SELECT outcome FROM {s}.cancel_run('" + id + "')"), "already_finished");
  Stop(*daemon);
}

// `cairn signal` as a user sees it: delivered (0), duplicate (5), unknown key
// (3, kept in the inbox).
TEST_F(Signals, SignalCliExitCodes) {
  auto daemon = StartDaemon(2);
  const std::string id = StartRun("sig_wait", {{"key", "invoice-7"}});
  ASSERT_TRUE(WaitForStatus(id, "waiting")) << StatusSummary() << daemon->Log();

  auto delivered = CliSignal("invoice-7", {{"amount", 5}});
  EXPECT_EQ(delivered.exit_code, 0) << delivered.out << delivered.err;
  EXPECT_NE(delivered.out.find("delivered"), std::string::npos) << delivered.out;

  auto duplicate = CliSignal("invoice-7", {{"amount", 6}});
  EXPECT_EQ(duplicate.exit_code, 5) << duplicate.out << duplicate.err;
  EXPECT_NE(duplicate.out.find("already delivered"), std::string::npos) << duplicate.out;

  auto unknown = CliSignal("nobody-waits-yet", {{"amount", 7}});
  EXPECT_EQ(unknown.exit_code, 3) << unknown.out << unknown.err;
  EXPECT_NE(unknown.err.find("nobody-waits-yet"), std::string::npos) << unknown.err;
  EXPECT_EQ(Sql("SELECT payload->>'amount' FROM {s}.signal_inbox "
                "WHERE correlation_key = 'nobody-waits-yet'"),
            "7");

  ASSERT_TRUE(WaitForStatus(id, "completed")) << StatusSummary() << daemon->Log();
  EXPECT_EQ(RunColumn(id, "context->'go'->>'amount'"), "5");
  EXPECT_EQ(RunEventCount(id, "resumed"), 1);

  // Bad input: a usage error that changes nothing.
  const std::string before = Fingerprint();
  auto bad = Cli({"signal", "invoice-7", "--payload", "{not json"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_EQ(Fingerprint(), before);
  Stop(*daemon);
}

}  // namespace
}  // namespace cairn::test
