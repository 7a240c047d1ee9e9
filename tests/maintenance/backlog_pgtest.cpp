// Tests of the fleet's backlog against the harness's PostgreSQL: the store's
// backlog and stranded-run counts, the backlog monitor's lock (one reader
// per fleet, taken over when the reader stops or its session ends) and the session
// observer that counts connections and database errors.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>

#include "backlog_monitor.hpp"
#include "metrics.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class BacklogTest : public StoreTest {
 protected:
  std::string CreateIn(const std::string& queue) {
    NewRun run = MakeRun();
    run.queue = queue;
    return CreateRun(run).id;
  }

  // Ready runs of "default" (one due a minute ago, one due in an hour), a
  // running and a waiting one, one awaiting an operator, and a ready run in
  // "mail".
  void CreateBacklog() {
    const std::string overdue = CreateIn("default");
    Sql("UPDATE {s}.runs SET run_at = now() - interval '60 seconds' WHERE id = '" + overdue + "'");
    const std::string later = CreateIn("default");
    Sql("UPDATE {s}.runs SET run_at = now() + interval '1 hour' WHERE id = '" + later + "'");
    CreateRunningRun();
    const std::string waiting = CreateIn("default");
    Sql("UPDATE {s}.runs SET status = 'waiting' WHERE id = '" + waiting + "'");
    const std::string broken = CreateIn("default");
    Sql("UPDATE {s}.runs SET status = 'compensation_failed', final_status = 'failed', "
        "finished_at = now() WHERE id = '" +
        broken + "'");
    const std::string done = CreateIn("default");
    CommitStatus(done, RunStatus::kCompleted);
    CreateIn("mail");
  }

  BacklogMonitorOptions MonitorOptions() const {
    BacklogMonitorOptions options;
    options.service.connection.url = url();
    options.service.connection.schema = schema();
    options.service.interval = 100ms;
    return options;
  }
};

// Whether one pass of the monitor read the backlog.
bool Reads(BacklogMonitor& monitor) { return monitor.RunOnce().Count("readings") == 1; }

TEST_F(BacklogTest, ReadBacklogCountsUnfinishedRunsPerQueueAndStateWithTheOldestDueAge) {
  CreateBacklog();
  auto rows = conn().Transact([](store::Tx& tx) { return store::ReadBacklog(tx); });
  std::map<std::pair<std::string, std::string>, int64_t> runs;
  std::map<std::string, double> oldest;
  for (const auto& row : rows) {
    runs[{row.queue, row.state}] = row.runs;
    if (row.oldest_due_age_seconds) {
      oldest[row.queue] = std::max(oldest[row.queue], *row.oldest_due_age_seconds);
    }
  }
  const std::map<std::pair<std::string, std::string>, int64_t> expected = {
      {{"default", "ready"}, 1},
      {{"default", "delayed"}, 1},
      {{"default", "running"}, 1},
      {{"default", "waiting"}, 1},
      {{"default", "compensation_failed"}, 1},
      {{"mail", "ready"}, 1}};
  EXPECT_EQ(runs, expected);
  EXPECT_GE(oldest["default"], 60.0);
  EXPECT_LT(oldest["default"], 120.0);
  EXPECT_GE(oldest["mail"], 0.0);
  EXPECT_LT(oldest["mail"], 60.0);
}

TEST_F(BacklogTest, CountStrandedRunsCountsPerQueueWhatStrandedRunsLists) {
  CreateBacklog();
  // No live worker serves "hash-1": every ready or waiting run is stranded.
  auto counts = conn().Transact(
      [](store::Tx& tx) { return store::CountStrandedRuns(tx, std::chrono::minutes(2)); });
  auto listed = conn().Transact(
      [](store::Tx& tx) { return store::StrandedRuns(tx, std::chrono::minutes(2)); });
  std::map<std::string, int64_t> by_queue;
  for (const auto& run : listed) ++by_queue[run.queue];
  EXPECT_EQ((std::map<std::string, int64_t>(counts.begin(), counts.end())), by_queue);
  EXPECT_EQ(by_queue["default"], 3);  // ready, delayed, waiting
  EXPECT_EQ(by_queue["mail"], 1);
  // A live worker that serves the definition and the queue strands nothing there.
  conn().Transact([](store::Tx& tx) {
    store::RegisterWorker(tx, {"w-1", "host", 1, {"default"}, {"hash-1"}});
  });
  counts = conn().Transact(
      [](store::Tx& tx) { return store::CountStrandedRuns(tx, std::chrono::minutes(2)); });
  EXPECT_EQ((std::map<std::string, int64_t>(counts.begin(), counts.end())),
            (std::map<std::string, int64_t>{{"mail", 1}}));
}

TEST_F(BacklogTest, OneMonitorOfTheFleetReadsAndAnotherTakesOverWhenItStops) {
  CreateBacklog();
  Metrics first_metrics;
  Metrics second_metrics;
  auto first = std::make_unique<BacklogMonitor>(MonitorOptions(), first_metrics);
  BacklogMonitor second(MonitorOptions(), second_metrics);
  EXPECT_TRUE(Reads(*first));
  EXPECT_FALSE(Reads(second));
  EXPECT_TRUE(Reads(*first));  // keeps the lock

  std::string text = first_metrics.Render();
  EXPECT_TRUE(Contains(text, "cairn_backlog_reader 1\n")) << text;
  EXPECT_TRUE(Contains(text, "cairn_queue_runs{queue=\"default\",state=\"ready\"} 1\n")) << text;
  EXPECT_TRUE(
      Contains(text, "cairn_queue_runs{queue=\"default\",state=\"compensation_failed\"} 1\n"))
      << text;
  EXPECT_TRUE(Contains(text, "cairn_queue_runs{queue=\"mail\",state=\"running\"} 0\n")) << text;
  EXPECT_TRUE(Contains(text, "cairn_stranded_runs{queue=\"default\"} 3\n")) << text;
  EXPECT_TRUE(Contains(text, "cairn_queue_oldest_due_age_seconds{queue=\"default\"} 6")) << text;
  text = second_metrics.Render();
  EXPECT_TRUE(Contains(text, "cairn_backlog_reader 0\n")) << text;
  EXPECT_FALSE(Contains(text, "cairn_queue_runs{")) << text;

  // The reader stops: it gives the lock up, and the other one takes over at
  // its next pass.
  first->Start();
  first->Stop();
  // Released by the reader itself, not later by the server's end of the session.
  EXPECT_EQ(Sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"), "0");
  EXPECT_TRUE(Contains(first_metrics.Render(), "cairn_backlog_reader 0\n"));
  EXPECT_TRUE(Reads(second));
  EXPECT_TRUE(Contains(second_metrics.Render(), "cairn_backlog_reader 1\n"));
  EXPECT_FALSE(Reads(*first));
}

TEST_F(BacklogTest, TheReaderThatLosesItsSessionGivesUpTheLeaseAndClearsItsGauges) {
  CreateBacklog();
  Metrics metrics;
  BacklogMonitor monitor(MonitorOptions(), metrics);
  ASSERT_TRUE(Reads(monitor));
  const std::string pid =
      Sql("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted LIMIT 1");
  ASSERT_FALSE(pid.empty());
  Sql("SELECT pg_terminate_backend(" + pid + ")");
  EXPECT_THROW(
      {
        for (int i = 0; i < 50; ++i) {
          monitor.RunOnce();
          std::this_thread::sleep_for(20ms);
        }
      },
      Error);
  EXPECT_TRUE(Contains(metrics.Render(), "cairn_backlog_reader 0\n"));
  EXPECT_TRUE(Reads(monitor));  // a new session takes the lock again
}

// Counts what a session observer is told.
class CountingObserver : public store::SessionObserver {
 public:
  void Opened() override { ++open; }
  void Closed() override { --open; }
  void Failed(ErrorKind kind) override { ++failed[kind]; }
  std::atomic<int> open{0};
  std::map<ErrorKind, int> failed;
};

TEST_F(BacklogTest, ASessionObserverIsToldOfSessionsAndOfEachErrorOnce) {
  auto observer = std::make_shared<CountingObserver>();
  store::ConnectionOptions options;
  options.url = url();
  options.schema = schema();
  options.observer = observer;
  {
    store::Connection connection(options);
    EXPECT_EQ(observer->open.load(), 1);
    {
      store::Connection another(options);
      EXPECT_EQ(observer->open.load(), 2);
    }
    EXPECT_EQ(observer->open.load(), 1);
    // A constraint violation: permanent, told once although two layers translate it.
    const std::string id = CreateRun().id;
    EXPECT_THROW(connection.Transact([&](store::Tx& tx) {
      store::RegisterWorker(tx, {"w-1", "host", 1, {"default"}, {"hash-1"}});
      store::RegisterDefinition(tx, {"h", "", 0, "", Json::object()});
    }),
                 Error);
    EXPECT_EQ(observer->failed[ErrorKind::kPermanent], 1);
    // A terminated session: transient.
    Sql("SELECT pg_terminate_backend(" + std::to_string(connection.BackendPid()) + ")");
    EXPECT_THROW(connection.Transact([&](store::Tx& tx) { store::GetRun(tx, id); }), Error);
    EXPECT_EQ(observer->failed[ErrorKind::kTransient], 1);
  }
  EXPECT_EQ(observer->open.load(), 0);
  // A connection that cannot be made is an error, not a session.
  options.url = "postgresql://postgres@127.0.0.1:1/postgres";
  EXPECT_THROW(store::Connection refused(options), Error);
  EXPECT_EQ(observer->open.load(), 0);
  EXPECT_EQ(observer->failed[ErrorKind::kTransient], 2);
}

}  // namespace
}  // namespace cairn::test
