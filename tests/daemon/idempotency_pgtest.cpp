// The idempotency store end to end: real `cairn run` daemons whose steps make
// an effect outside the database (a line appended to a file) with ctx.once,
// in step processes and on threads, while daemons race on the same keys or
// are killed with kill -9 between the effect and the checkpoint; and the
// operator's `cairn idempotency show`. Workflows: tests/workflows/e2e.yaml
// (e2e_once, e2e_once_tx).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "daemon_process.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;
using ::testing::HasSubstr;

class IdempotencyE2E : public StoreTest {
 protected:
  DaemonOptions Options(const std::string& isolation, int concurrency = 4) const {
    DaemonOptions o = BuiltDaemonOptions(url(), schema(), "e2e.yaml", concurrency);
    o.isolation = isolation;
    o.lease = "2s";
    o.reaper_interval = "300ms";
    return o;
  }

  std::string StartRun(const std::string& workflow, const Json& input) {
    return Sql("SELECT {s}.start_run('" + workflow + "', '" + input.dump() + "'::jsonb)");
  }

  int64_t CountRuns(const std::string& status) const {
    return SqlInt("SELECT count(*) FROM {s}.runs WHERE status = '" + status + "'");
  }

  std::string StatusSummary() const {
    return Sql(
        "SELECT coalesce(string_agg(status || '=' || n, ', ' ORDER BY status), 'no runs') "
        "FROM (SELECT status, count(*) AS n FROM {s}.runs GROUP BY status) s");
  }

  // The effects file's lines, each split into its words (key, run, attempt,
  // clean or in_doubt).
  std::vector<std::vector<std::string>> Effects() const {
    std::vector<std::vector<std::string>> lines;
    std::ifstream in(effects_);
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::vector<std::string> fields;
      for (std::string word; words >> word;) fields.push_back(word);
      lines.push_back(fields);
    }
    return lines;
  }

  Json Context(const std::string& run_id) const {
    return Json::parse(Sql("SELECT context FROM {s}.runs WHERE id = '" + run_id + "'"));
  }

  TempDir dir_{"cairn-idempotency"};
  std::string effects_ = dir_.path().string() + "/effects";
};

// Two daemons, one running steps in step processes and one on threads, race
// 40 runs over 5 keys: each key's effect happens once, by the run that
// claimed it; every run ends with that run's stored result; the others
// retried while the key was in progress.
TEST_F(IdempotencyE2E, TwoDaemonsRacingOnTheSameKeysMakeEachEffectOnce) {
  auto a = std::make_unique<DaemonProcess>(Options("process"));
  auto b = std::make_unique<DaemonProcess>(Options("thread"));
  ASSERT_TRUE(a->StartAndWaitReady()) << a->Log();
  ASSERT_TRUE(b->StartAndWaitReady()) << b->Log();
  constexpr int kRuns = 40;
  constexpr int kKeys = 5;
  // All in one statement, so that they are due together and the runs of one
  // key overlap (one psql call a start would space them out by more than an
  // effect lasts on a loaded machine).
  std::vector<std::string> runs;
  std::istringstream ids(
      Sql("SELECT string_agg(id::text, ' ' ORDER BY n) FROM (SELECT n, {s}.start_run("
          "CASE WHEN n % 2 = 0 THEN 'e2e_once' ELSE 'e2e_once_tx' END, jsonb_build_object("
          "'key', 'charge-' || (n % " +
          std::to_string(kKeys) + "), 'effects_file', '" + effects_ +
          "', 'effect_ms', 200)) AS id FROM generate_series(0, " + std::to_string(kRuns - 1) +
          ") n) started"));
  for (std::string id; ids >> id;) runs.push_back(id);
  ASSERT_EQ(runs.size(), static_cast<size_t>(kRuns));
  ASSERT_TRUE(PollUntil([&] { return CountRuns("completed") == kRuns; }, 90s, 100ms))
      << StatusSummary();
  a->Terminate();
  b->Terminate();
  EXPECT_EQ(a->WaitExit(20s), 0);
  EXPECT_EQ(b->WaitExit(20s), 0);

  const auto effects = Effects();
  ASSERT_EQ(effects.size(), static_cast<size_t>(kKeys));
  std::map<std::string, std::string> maker;  // key -> run that made its effect
  for (const auto& effect : effects) {
    ASSERT_EQ(effect.size(), 4U);
    EXPECT_EQ(effect[3], "clean");
    EXPECT_TRUE(maker.emplace(effect[0], effect[1]).second) << effect[0] << " made twice";
  }
  for (int i = 0; i < kRuns; ++i) {
    SCOPED_TRACE(runs[i]);
    const std::string key = "charge-" + std::to_string(i % kKeys);
    const Json once = Context(runs[i]).at("once");
    EXPECT_EQ(once.at("result").at("charged_by"), maker[key]);
    EXPECT_EQ(once.at("made_effect").get<bool>(), maker[key] == runs[i]);
  }
  // Runs wait for a key in progress by failing the attempt and retrying.
  EXPECT_GT(SqlInt("SELECT count(*) FROM {s}.run_events WHERE kind = 'retried'"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.idempotency_keys WHERE namespace = 'default'"
                   " AND status = 'completed' AND claims = 1"),
            kKeys);
}

// kill -9 after the effect and after its key completed, before the step's
// checkpoint: the run is taken over, its retry finds the key completed and
// carries on with the stored result, without making the effect again. Under
// both isolations.
TEST_F(IdempotencyE2E, KillNineAfterTheEffectLeavesARetryThatSeesCompleted) {
  for (const std::string isolation : {"process", "thread"}) {
    SCOPED_TRACE(isolation);
    const std::string key = "charge-" + isolation;
    auto victim = std::make_unique<DaemonProcess>(Options(isolation, 1));
    ASSERT_TRUE(victim->StartAndWaitReady()) << victim->Log();
    const std::string run = StartRun(
        "e2e_once", {{"key", key}, {"effects_file", effects_}, {"hang_after_effect", true}});
    ASSERT_TRUE(PollUntil(
        [&] {
          return SqlInt("SELECT count(*) FROM {s}.idempotency_keys WHERE key = '" + key +
                        "' AND status = 'completed'") == 1;
        },
        20s, 20ms))
        << victim->Log();
    victim->Kill();
    ASSERT_EQ(victim->WaitExit(10s), 128 + SIGKILL);
    ASSERT_EQ(
        Sql("SELECT status || ' ' || coalesce(cursor, '') FROM {s}.runs WHERE id = '" + run + "'"),
        "running charge");

    auto rescuer = std::make_unique<DaemonProcess>(Options(isolation, 1));
    ASSERT_TRUE(rescuer->StartAndWaitReady()) << rescuer->Log();
    ASSERT_TRUE(PollUntil(
        [&] { return Sql("SELECT status FROM {s}.runs WHERE id = '" + run + "'") == "completed"; },
        30s, 50ms))
        << StatusSummary() << rescuer->Log();
    rescuer->Terminate();
    EXPECT_EQ(rescuer->WaitExit(20s), 0);

    const Json once = Context(run).at("once");
    EXPECT_EQ(once.at("result"), (Json{{"charged_by", run}, {"key", key}}));
    EXPECT_FALSE(once.at("made_effect").get<bool>());  // the retry saw "completed"
    int made = 0;
    for (const auto& effect : Effects()) made += effect.at(0) == key ? 1 : 0;
    EXPECT_EQ(made, 1);
    EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + run +
                     "' AND kind = 'lease_expired'"),
              1);
  }
}

// kill -9 after the effect but before its key completed: the effect is in
// doubt. The run's retry takes its own claim back at once (the run is the
// owner on every attempt) and is told so; the effect is made again, marked
// in doubt: at least once, never silently.
TEST_F(IdempotencyE2E, KillNineBeforeTheKeyCompletedLeavesARetryInDoubt) {
  auto victim = std::make_unique<DaemonProcess>(Options("process", 1));
  ASSERT_TRUE(victim->StartAndWaitReady()) << victim->Log();
  const std::string run = StartRun(
      "e2e_once", {{"key", "charge-doubt"}, {"effects_file", effects_}, {"hang_in_effect", true}});
  ASSERT_TRUE(PollUntil([&] { return Effects().size() == 1; }, 20s, 20ms)) << victim->Log();
  victim->Kill();
  ASSERT_EQ(victim->WaitExit(10s), 128 + SIGKILL);
  EXPECT_EQ(Sql("SELECT status || ' ' || owner FROM {s}.idempotency_keys"),
            "in_progress run:" + run);

  auto rescuer = std::make_unique<DaemonProcess>(Options("process", 1));
  ASSERT_TRUE(rescuer->StartAndWaitReady()) << rescuer->Log();
  ASSERT_TRUE(PollUntil(
      [&] { return Sql("SELECT status FROM {s}.runs WHERE id = '" + run + "'") == "completed"; },
      30s, 50ms))
      << StatusSummary() << rescuer->Log();
  rescuer->Terminate();
  EXPECT_EQ(rescuer->WaitExit(20s), 0);

  const auto effects = Effects();
  ASSERT_EQ(effects.size(), 2U);
  EXPECT_EQ(effects[0].at(3), "clean");
  EXPECT_EQ(effects[1].at(3), "in_doubt");
  EXPECT_TRUE(Context(run).at("once").at("in_doubt").get<bool>());
  EXPECT_EQ(Sql("SELECT status || ' ' || claims FROM {s}.idempotency_keys"), "completed 2");
}

// `cairn idempotency show`: a key's record for people and as JSON, in its
// namespace; an unknown key is not found (exit 3) and says so.
TEST_F(IdempotencyE2E, ShowPrintsAKeysRecordAndAnUnknownKeyIsNotFound) {
  Sql("SELECT {s}.idempotency_claim('charge-1', 'checkout-7', interval '1 hour', 'shop')");
  Sql("SELECT {s}.idempotency_complete('charge-1', 'checkout-7', '{\"charge_id\": \"ch_1\"}',"
      " interval '1 day', 'shop')");
  const std::vector<std::string> connection = {"--database-url", url(), "--schema", schema()};
  auto cairn = [&](std::vector<std::string> args) {
    args.insert(args.end(), connection.begin(), connection.end());
    return RunCommand(CairnBinary(), args);
  };

  const CommandResult json =
      cairn({"idempotency", "show", "charge-1", "--namespace", "shop", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json record = Json::parse(json.out);
  EXPECT_EQ(record.at("status"), "completed");
  EXPECT_EQ(record.at("owner"), "checkout-7");
  EXPECT_EQ(record.at("namespace"), "shop");
  EXPECT_EQ(record.at("result"), (Json{{"charge_id", "ch_1"}}));
  EXPECT_EQ(record.at("claims"), 1);
  EXPECT_FALSE(record.at("expired").get<bool>());

  const CommandResult text = cairn({"idempotency", "show", "charge-1", "--namespace", "shop"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("completed"));
  EXPECT_THAT(text.out, HasSubstr("ch_1"));

  const CommandResult other_namespace = cairn({"idempotency", "show", "charge-1"});
  EXPECT_EQ(other_namespace.exit_code, 3);
  EXPECT_THAT(other_namespace.err,
              HasSubstr("no idempotency key \"charge-1\" in namespace \"default\""));
  EXPECT_EQ(other_namespace.out, "");

  const CommandResult bad_action = cairn({"idempotency", "drop", "charge-1"});
  EXPECT_EQ(bad_action.exit_code, 2);
  EXPECT_THAT(bad_action.err, HasSubstr("unknown action \"drop\""));
  const CommandResult too_long = cairn({"idempotency", "show", std::string(600, 'k')});
  EXPECT_EQ(too_long.exit_code, 2);
  EXPECT_THAT(too_long.err, HasSubstr("over the limit of 512 bytes"));
}

}  // namespace
}  // namespace cairn::test
