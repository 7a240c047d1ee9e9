// Recurring schedules against a real PostgreSQL: the schedule service on
// several threads and connections over simulated ticks (the claim takes a
// `now` override, so no test waits for wall time), the missed-tick policies
// after downtime, syncing the declared list, and two real `cairn run`
// daemons firing the same schedule.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon_process.hpp"
#include "schedule_service.hpp"
#include "store_fixture.hpp"
#include "store_schedules.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;

class ScheduleTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    RegisterWorkflow("report");
  }

  void RegisterWorkflow(const std::string& workflow) {
    store::DefinitionRecord d;
    d.workflow = workflow;
    d.version = 1;
    d.hash = "hash-" + workflow;
    d.first_step = "only";
    d.definition = {{"name", workflow}, {"version", 1}};
    conn().Transact([&](store::Tx& tx) { store::RegisterDefinition(tx, d); });
  }

  std::unique_ptr<ScheduleService> Service() const {
    ScheduleServiceOptions options;
    options.connection.url = url();
    options.connection.schema = schema();
    options.connection.application_name = "cairn-test-schedules";
    return std::make_unique<ScheduleService>(options);
  }

  // Inserts a schedule whose next fire time is next_fire_at (timestamptz text).
  void InsertSchedule(const std::string& name, const std::string& cron,
                      const std::string& next_fire_at, const std::string& policy = "skip",
                      int catch_up_limit = 1, const std::string& workflow = "report") {
    Sql("INSERT INTO {s}.schedules (name, workflow, cron, missed_policy, catch_up_limit, "
        "next_fire_at) VALUES ('" +
        name + "', '" + workflow + "', '" + cron + "', '" + policy + "', " +
        std::to_string(catch_up_limit) + ", " + next_fire_at + ")");
  }

  int64_t Runs(const std::string& schedule) const {
    return SqlInt("SELECT count(*) FROM {s}.runs WHERE run_key LIKE 'schedule:" + schedule + ":%'");
  }

  // The schedule's run keys in order, comma-separated.
  std::string Keys(const std::string& schedule) const {
    return Sql(
        "SELECT string_agg(run_key, ',' ORDER BY run_key) FROM {s}.runs "
        "WHERE run_key LIKE 'schedule:" +
        schedule + ":%'");
  }

  std::string NextFire(const std::string& schedule) const {
    return Sql(
        "SELECT to_char(next_fire_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') "
        "FROM {s}.schedules WHERE name = '" +
        schedule + "'");
  }

  std::string LastFire(const std::string& schedule) const {
    return Sql(
        "SELECT to_char(last_fire_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') "
        "FROM {s}.schedules WHERE name = '" +
        schedule + "'");
  }
};

// "2024-01-01T00:MM:00Z" for minute m after midnight.
std::string Minute(int m) {
  char text[32];
  std::snprintf(text, sizeof text, "2024-01-01T%02d:%02d:00Z", m / 60, m % 60);
  return text;
}

// The run key of a tick given as text.
std::string ScheduleRunKey(const std::string& schedule, const std::string& tick) {
  return "schedule:" + schedule + ":" + tick;
}

// Two services on two threads and connections race over ten simulated ticks
// of ten every-minute schedules: every tick of every schedule starts exactly
// one run, and the runs the services report add up to exactly that.
TEST_F(ScheduleTest, TwoServicesStartExactlyOneRunPerTick) {
  constexpr int kSchedules = 10;
  constexpr int kTicks = 10;
  for (int i = 0; i < kSchedules; ++i) {
    InsertSchedule("s" + std::to_string(i), "* * * * *", "'" + Minute(0) + "'");
  }
  auto a = Service();
  auto b = Service();
  std::atomic<int64_t> started{0};
  std::barrier sync(2);
  auto race = [&](ScheduleService& service) {
    for (int tick = 0; tick < kTicks; ++tick) {
      // 30 s into minute `tick`: exactly that minute's tick is due.
      char now[32];
      std::snprintf(now, sizeof now, "2024-01-01 00:%02d:30+00", tick);
      sync.arrive_and_wait();
      // Both race for the same due schedules; repeat to also hit the
      // already-advanced state.
      started += service.RunOnce(now);
      started += service.RunOnce(now);
      sync.arrive_and_wait();
    }
  };
  std::thread ta([&] { race(*a); });
  std::thread tb([&] { race(*b); });
  ta.join();
  tb.join();

  EXPECT_EQ(started.load(), kSchedules * kTicks);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), kSchedules * kTicks);
  EXPECT_EQ(SqlInt("SELECT count(DISTINCT run_key) FROM {s}.runs"), kSchedules * kTicks);
  for (int i = 0; i < kSchedules; ++i) {
    const std::string name = "s" + std::to_string(i);
    std::string expected;
    for (int tick = 0; tick < kTicks; ++tick) {
      expected += (tick ? "," : "") + ScheduleRunKey(name, Minute(tick));
    }
    EXPECT_EQ(Keys(name), expected);
    EXPECT_EQ(NextFire(name), Minute(kTicks));
    EXPECT_EQ(LastFire(name), Minute(kTicks - 1));
  }
  // The runs are ordinary ready runs of the workflow, with the schedule's input.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE workflow = 'report' AND status = 'ready' "
                   "AND namespace = 'default' AND input = '{}'::jsonb"),
            kSchedules * kTicks);
}

// After hours of downtime, `skip` starts only the latest due tick.
TEST_F(ScheduleTest, SkipStartsOnlyTheLatestMissedTick) {
  InsertSchedule("skipper", "*/10 * * * *", "'2024-01-01T00:00:00Z'");
  auto service = Service();
  EXPECT_EQ(service->RunOnce("2024-01-01 03:05:00+00"), 1);
  EXPECT_EQ(Keys("skipper"), "schedule:skipper:2024-01-01T03:00:00Z");
  EXPECT_EQ(NextFire("skipper"), "2024-01-01T03:10:00Z");
  EXPECT_EQ(LastFire("skipper"), "2024-01-01T03:00:00Z");
  // Nothing more is due until 03:10.
  EXPECT_EQ(service->RunOnce("2024-01-01 03:09:59+00"), 0);
  EXPECT_EQ(service->RunOnce("2024-01-01 03:10:00+00"), 1);
  EXPECT_EQ(Runs("skipper"), 2);
}

// `catch_up` starts the latest catch_up_limit missed ticks, oldest first,
// and no more.
TEST_F(ScheduleTest, CatchUpStartsABoundedNumberOfMissedTicks) {
  InsertSchedule("catcher", "*/10 * * * *", "'2024-01-01T00:00:00Z'", "catch_up", 5);
  InsertSchedule("few", "0 * * * *", "'2024-01-01T01:00:00Z'", "catch_up", 5);
  auto service = Service();
  EXPECT_EQ(service->RunOnce("2024-01-01 03:05:00+00"), 5 + 3);
  EXPECT_EQ(Keys("catcher"),
            "schedule:catcher:2024-01-01T02:20:00Z,schedule:catcher:2024-01-01T02:30:00Z,"
            "schedule:catcher:2024-01-01T02:40:00Z,schedule:catcher:2024-01-01T02:50:00Z,"
            "schedule:catcher:2024-01-01T03:00:00Z");
  // Each run is due at its tick, so workers claim the oldest first.
  EXPECT_EQ(Sql("SELECT string_agg(right(run_key, 9), ',' ORDER BY run_at) FROM {s}.runs "
                "WHERE run_key LIKE 'schedule:few:%'"),
            "01:00:00Z,02:00:00Z,03:00:00Z");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE run_at <> right(run_key, 20)::timestamptz "
                   "AND run_key LIKE 'schedule:few:%'"),
            0);
  EXPECT_EQ(NextFire("catcher"), "2024-01-01T03:10:00Z");
  EXPECT_EQ(NextFire("few"), "2024-01-01T04:00:00Z");
}

// Downtime judged by the database's real clock: next_fire_at hours in the
// past, no override.
TEST_F(ScheduleTest, MissedTicksAgainstDatabaseTime) {
  InsertSchedule("real_skip", "0 * * * *", "now() - interval '10 hours'");
  InsertSchedule("real_catch", "0 * * * *", "now() - interval '10 hours'", "catch_up", 4);
  auto service = Service();
  const int64_t started = service->RunOnce();
  EXPECT_EQ(started, 1 + 4);
  EXPECT_EQ(Runs("real_skip"), 1);
  EXPECT_EQ(Runs("real_catch"), 4);
  EXPECT_TRUE(
      SqlBool("SELECT bool_and(next_fire_at > now() AND next_fire_at <= now() + "
              "interval '1 hour') FROM {s}.schedules"));
  // The latest tick fired is the current hour (or the one before, when an
  // hour boundary passed during the test).
  EXPECT_TRUE(
      SqlBool("SELECT last_fire_at >= date_trunc('hour', now()) - interval '1 hour' "
              "FROM {s}.schedules WHERE name = 'real_skip'"));
  EXPECT_EQ(service->RunOnce(), 0);
}

// A schedule of a workflow nobody registered skips its tick with a warning;
// a schedule with a bad cron expression is parked; others still fire.
TEST_F(ScheduleTest, BrokenSchedulesDoNotBlockOthers) {
  InsertSchedule("ghost", "* * * * *", "'2024-01-01T00:00:00Z'", "skip", 1, "no_such_workflow");
  InsertSchedule("bad_cron", "61 * * * *", "'2024-01-01T00:00:00Z'");
  InsertSchedule("fine", "* * * * *", "'2024-01-01T00:00:00Z'");
  Sql("INSERT INTO {s}.schedules (name, workflow, cron, input, next_fire_at) "
      "VALUES ('bad_input', 'report', '* * * * *', '[1]', '2024-01-01T00:00:00Z')");
  auto service = Service();
  EXPECT_EQ(service->RunOnce("2024-01-01 00:00:30+00"), 1);
  EXPECT_EQ(Runs("fine"), 1);
  EXPECT_EQ(Runs("ghost"), 0);
  EXPECT_EQ(NextFire("ghost"), "2024-01-01T00:01:00Z");
  EXPECT_EQ(LastFire("ghost"), "");
  EXPECT_EQ(NextFire("bad_cron"), "");  // parked
  // A start that fails rolls back that schedule only; it is retried later.
  EXPECT_EQ(NextFire("bad_input"), "2024-01-01T00:00:00Z");
  EXPECT_EQ(Runs("bad_input"), 0);
}

// A keyed start is idempotent: a tick whose run already exists (someone
// started it by hand, or a commit was in doubt) is not started twice.
TEST_F(ScheduleTest, ExistingTickRunIsNotStartedAgain) {
  InsertSchedule("dup", "* * * * *", "'2024-01-01T00:00:00Z'");
  const std::string id =
      Sql("SELECT {s}.start_run('report', '{}'::jsonb, 'schedule:dup:2024-01-01T00:00:00Z')");
  auto service = Service();
  EXPECT_EQ(service->RunOnce("2024-01-01 00:00:30+00"), 0);
  EXPECT_EQ(Runs("dup"), 1);
  EXPECT_EQ(NextFire("dup"), "2024-01-01T00:01:00Z");
  EXPECT_EQ(LastFire("dup"), "2024-01-01T00:00:00Z");
  EXPECT_EQ(Sql("SELECT id FROM {s}.runs WHERE run_key LIKE 'schedule:dup:%'"), id);
}

ScheduleDefinition Declared(const std::string& name, const std::string& cron) {
  ScheduleDefinition d;
  d.name = name;
  d.workflow = "report";
  d.cron = cron;
  return d;
}

// Syncing the declared list: new schedules start at the next tick after
// database now, unchanged ones keep their position, changed timing is
// recomputed, undeclared ones are disabled and re-enabling skips the pause.
TEST_F(ScheduleTest, SyncMakesTheTableMatchTheDeclaredList) {
  auto service = Service();
  ScheduleDefinition hourly = Declared("hourly", "0 * * * *");
  hourly.queue = "reports";
  hourly.input = {{"kind", "hourly"}};
  hourly.missed = MissedPolicy::kCatchUp;
  hourly.catch_up_limit = 3;
  ScheduleSyncResult r = service->Sync({hourly, Declared("daily", "@daily")});
  EXPECT_EQ(r.inserted, 2);
  EXPECT_TRUE(
      SqlBool("SELECT next_fire_at = date_trunc('hour', now()) + interval '1 hour' "
              "FROM {s}.schedules WHERE name = 'hourly'"));
  EXPECT_EQ(Sql("SELECT queue || ' ' || input::text || ' ' || missed_policy || ' ' || "
                "catch_up_limit || ' ' || timezone FROM {s}.schedules WHERE name = 'hourly'"),
            "reports {\"kind\": \"hourly\"} catch_up 3 UTC");

  // Unchanged: nothing written, the position is kept.
  Sql("UPDATE {s}.schedules SET next_fire_at = '2030-01-01T00:00:00Z'");
  r = service->Sync({hourly, Declared("daily", "@daily")});
  EXPECT_EQ(r.unchanged, 2);
  EXPECT_EQ(r.inserted + r.updated, 0);
  EXPECT_EQ(NextFire("hourly"), "2030-01-01T00:00:00Z");

  // A new input keeps the position; a new cron recomputes it; "daily" is gone.
  hourly.input = {{"kind", "changed"}};
  ScheduleDefinition yearly = Declared("yearly", "0 0 1 1 *");
  r = service->Sync({hourly, yearly});
  EXPECT_EQ(r.inserted, 1);
  EXPECT_EQ(r.updated, 1);
  EXPECT_EQ(r.disabled, std::vector<std::string>{"daily"});
  EXPECT_EQ(NextFire("hourly"), "2030-01-01T00:00:00Z");
  EXPECT_FALSE(SqlBool("SELECT enabled FROM {s}.schedules WHERE name = 'daily'"));
  hourly.cron = "30 4 * * *";
  r = service->Sync({hourly, yearly});
  EXPECT_EQ(r.updated, 1);
  EXPECT_TRUE(
      SqlBool("SELECT next_fire_at > now() AND next_fire_at <= now() + interval '1 day' "
              "AND to_char(next_fire_at AT TIME ZONE 'UTC', 'HH24:MI') = '04:30' "
              "FROM {s}.schedules WHERE name = 'hourly'"));

  // A disabled schedule is never due; re-enabled, it starts after now.
  Sql("UPDATE {s}.schedules SET next_fire_at = now() - interval '1 day' WHERE name = 'daily'");
  EXPECT_EQ(service->RunOnce(), 0);
  r = service->Sync({hourly, yearly, Declared("daily", "@daily")});
  EXPECT_EQ(r.updated, 1);
  EXPECT_TRUE(
      SqlBool("SELECT enabled AND next_fire_at = date_trunc('day', now()) + "
              "interval '1 day' FROM {s}.schedules WHERE name = 'daily'"));
  EXPECT_EQ(service->RunOnce(), 0);

  // Listing.
  auto listed = conn().Transact([](store::Tx& tx) { return store::ListSchedules(tx); });
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed[0].name, "daily");
  EXPECT_EQ(listed[1].name, "hourly");
  EXPECT_EQ(listed[1].cron, "30 4 * * *");
  EXPECT_TRUE(listed[1].next_fire_at.has_value());
  EXPECT_FALSE(listed[1].last_fire_at.has_value());

  // An empty declared list disables everything.
  r = service->Sync({});
  EXPECT_EQ(r.disabled.size(), 3u);
}

// Start and Stop are idempotent; the thread fires due schedules on its own.
TEST_F(ScheduleTest, ServiceThreadFiresDueSchedules) {
  InsertSchedule("threaded", "0 0 1 1 *", "now() - interval '400 days'");
  ScheduleServiceOptions options;
  options.connection.url = url();
  options.connection.schema = schema();
  options.interval = 50ms;
  ScheduleService service(options);
  service.Start();
  service.Start();
  EXPECT_TRUE(PollUntil([&] { return Runs("threaded") == 1; }, 10s));
  service.Stop();
  service.Stop();
  EXPECT_EQ(service.started_total(), 1);
}

// The test: a cron schedule with two real daemons over several ticks
// starts exactly one run per tick. Both daemons declare the schedule in their
// YAML (and sync it at start, concurrently). Ticks are simulated by moving
// next_fire_at into the past while both run; catch_up makes every moved-back
// tick due again, so each round both daemons race for ticks that may already
// have runs.
TEST_F(ScheduleTest, TwoDaemonsStartExactlyOneRunPerTick) {
  auto options = [&] {
    DaemonOptions o = BuiltDaemonOptions(url(), schema(), "e2e.yaml", 2);
    o.poll_interval = "50ms";
    return o;
  };
  const std::string section =
      "schedules:\n"
      "  - name: ticker\n"
      "    workflow: e2e_one\n"
      "    cron: \"* * * * *\"\n"
      "    missed: catch_up\n"
      "    catch_up_limit: 100\n";
  std::vector<std::unique_ptr<DaemonProcess>> daemons;
  for (int i = 0; i < 2; ++i) {
    daemons.push_back(std::make_unique<DaemonProcess>(options()));
    std::ofstream(daemons.back()->config_path(), std::ios::app) << section;
  }
  for (auto& d : daemons) d->Start();
  for (auto& d : daemons) ASSERT_TRUE(d->WaitReady()) << d->Log();
  ASSERT_TRUE(PollUntil([&] { return SqlInt("SELECT count(*) FROM {s}.schedules") == 1; }, 10s));

  constexpr int kRounds = 6;
  for (int round = 1; round <= kRounds; ++round) {
    // Make the ticks of the last `round` minutes due again (they were
    // already started in earlier rounds, except the oldest).
    Sql("UPDATE {s}.schedules SET next_fire_at = date_trunc('minute', now()) - " +
        std::to_string(round) + " * interval '1 minute'");
    ASSERT_TRUE(
        PollUntil([&] { return SqlBool("SELECT next_fire_at > now() FROM {s}.schedules"); }, 10s))
        << "round " << round << ": the schedule was not handled";
  }
  // Every minute from the oldest tick to the latest handled one has exactly
  // one run (a minute boundary passing during the test only adds ticks).
  const int64_t runs = Runs("ticker");
  EXPECT_EQ(SqlInt("SELECT count(DISTINCT run_key) FROM {s}.runs"), runs);
  EXPECT_GE(runs, kRounds + 1);
  EXPECT_LE(runs, kRounds + 3);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM (SELECT generate_series(min(t), max(t), "
                   "interval '1 minute') AS t FROM (SELECT substr(run_key, 17)::timestamptz AS t "
                   "FROM {s}.runs) k) g"),
            runs);
  // The runs are executed like any other.
  EXPECT_TRUE(PollUntil(
      [&] { return SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'completed'") == runs; },
      20s));

  // The daemons stop first: one that fires at a minute boundary between two
  // readings below would move the next fire time under the comparison.
  for (auto& d : daemons) d->Terminate();
  for (auto& d : daemons) EXPECT_EQ(d->WaitExit(20s), 0) << d->Log();

  // `cairn schedules --json` lists the next fire time from the database.
  const CommandResult listed = RunCommand(
      CairnBinary(), {"schedules", "--json", "--database-url", url(), "--schema", schema()});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const Json list = Json::parse(listed.out);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["name"], "ticker");
  EXPECT_EQ(list[0]["missed"], "catch_up");
  EXPECT_EQ(list[0]["next_fire_at"], NextFire("ticker"));
  EXPECT_EQ(list[0]["last_fire_at"], LastFire("ticker"));
  const CommandResult table =
      RunCommand(CairnBinary(), {"schedules", "--database-url", url(), "--schema", schema()});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("ticker"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(NextFire("ticker")), std::string::npos) << table.out;
}

}  // namespace
}  // namespace cairn::test
