// Fleet-wide queue limits in the claim, against a real PostgreSQL:
// max_running holds across concurrent claimers on their own sessions, the
// token bucket refills by database time (moved by rewriting refilled_at, not
// by sleeping), steps after a claim's first take tokens, and queues without
// a limit are claimed as before.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;

class QueueLimits : public StoreTest {
 protected:
  void CreateRuns(const std::string& queue, int count, int priority = 0) {
    for (int i = 0; i < count; ++i) {
      NewRun run = MakeRun();
      run.queue = queue;
      run.priority = priority;
      CreateRun(run);
    }
  }

  std::vector<store::ClaimedRun> Claim(store::Connection& connection,
                                       const std::vector<std::string>& queues, int limit) {
    return connection.Transact([&](store::Tx& tx) {
      return store::ClaimRuns(tx, queues, {"hash-1"}, limit, "worker-1", 30s);
    });
  }
  std::vector<store::ClaimedRun> Claim(const std::vector<std::string>& queues, int limit) {
    return Claim(conn(), queues, limit);
  }

  void SetLimit(const store::QueueLimit& limit) {
    conn().Transact([&](store::Tx& tx) { return store::SetQueueLimit(tx, limit); });
  }

  int64_t Running(const std::string& queue) const {
    return SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'running' AND queue = '" + queue +
                  "'");
  }

  // Moves the queue's bucket `seconds` into the past: as if that much
  // database time had passed since it was last refilled.
  void AgeBucket(const std::string& queue, double seconds) {
    Sql("UPDATE {s}.queue_limits SET refilled_at = refilled_at - " + std::to_string(seconds) +
        " * interval '1 second' WHERE queue = '" + queue + "'");
  }
};

// Eight claimers on their own sessions, claiming again and again, never hold
// more than max_running runs of the queue between them; runs leaving
// 'running' free their place.
TEST_F(QueueLimits, MaxRunningHoldsAcrossConcurrentClaimers) {
  SetLimit({"limited", 3, std::nullopt, std::nullopt});
  CreateRuns("limited", 60);
  constexpr int kClaimers = 8;
  std::atomic<int> claimed{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kClaimers; ++t) {
    threads.emplace_back([&, t] {
      auto connection = Open("claimer-" + std::to_string(t));
      while (!go.load()) std::this_thread::yield();
      for (int round = 0; round < 20; ++round) {
        claimed += static_cast<int>(Claim(*connection, {"limited"}, 2).size());
      }
    });
  }
  go = true;
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(claimed.load(), 3);
  EXPECT_EQ(Running("limited"), 3);

  // A run that parks (waiting) or finishes holds no place.
  const std::string parked = Sql(
      "SELECT id FROM {s}.runs WHERE status = 'running' AND queue = 'limited' ORDER BY id LIMIT 1");
  CommitStatus(parked, RunStatus::kWaiting);
  const std::string done = Sql(
      "SELECT id FROM {s}.runs WHERE status = 'running' AND queue = 'limited' ORDER BY id LIMIT 1");
  CommitStatus(done, RunStatus::kCompleted, Json::object(), Json::object());
  const auto more = Claim({"limited"}, 10);
  ASSERT_EQ(more.size(), 2u);
  EXPECT_FALSE(more[0].step_tokens);  // no rate on this queue
  EXPECT_EQ(Running("limited"), 3);
  EXPECT_TRUE(Claim({"limited"}, 10).empty());
}

// Concurrent claimers racing for a queue whose runs finish in between: the
// running count, sampled by every claimer after each round, never passes
// max_running.
TEST_F(QueueLimits, MaxRunningHoldsWhileRunsFinishAndClaimersRace) {
  SetLimit({"limited", 2, std::nullopt, std::nullopt});
  CreateRuns("limited", 80);
  std::atomic<int> over{0};
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      auto connection = Open("racer-" + std::to_string(t));
      for (int round = 0; round < 15; ++round) {
        for (const auto& claim : Claim(*connection, {"limited"}, 3)) {
          connection->Transact([&](store::Tx& tx) {
            cairn::Checkpoint c;
            c.run_id = claim.run.id;
            c.expected_version = claim.run.version;
            c.context = Json::object();
            c.cursor = claim.run.cursor;
            c.status = RunStatus::kCompleted;
            c.lease_owner = "worker-1";
            c.output = Json::object();
            return store::SaveCheckpoint(tx, c).version;
          });
          ++finished;
        }
        const auto counts =
            connection->Autocommit([](store::Tx& tx) { return store::CountRuns(tx); });
        if (counts.count(RunStatus::kRunning) && counts.at(RunStatus::kRunning) > 2) ++over;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(over.load(), 0);
  EXPECT_GT(finished.load(), 2);
  EXPECT_EQ(Running("limited"), 0);
}

// The bucket starts full (burst), a claim spends one token per run, and it
// refills at rate_per_second by database time, up to burst. The rate is slow
// (one token a second) so that the real time the test itself takes, which a
// loaded machine stretches to tenths of a second, cannot add a token.
TEST_F(QueueLimits, TokensRefillByDatabaseTime) {
  SetLimit({"paced", std::nullopt, 1.0, 5});
  CreateRuns("paced", 50);
  const auto first = Claim({"paced"}, 100);
  ASSERT_EQ(first.size(), 5u);
  EXPECT_TRUE(first[0].step_tokens);
  EXPECT_TRUE(Claim({"paced"}, 100).empty());

  AgeBucket("paced", 3.5);  // 3.5 tokens: three runs
  EXPECT_EQ(Claim({"paced"}, 100).size(), 3u);
  AgeBucket("paced", 60);  // a minute's worth, capped at burst
  EXPECT_EQ(Claim({"paced"}, 100).size(), 5u);
  EXPECT_TRUE(Claim({"paced"}, 100).empty());
  // The batch still caps a claim.
  AgeBucket("paced", 60);
  EXPECT_EQ(Claim({"paced"}, 2).size(), 2u);
  EXPECT_EQ(Claim({"paced"}, 100).size(), 3u);
}

// A claim or a step token whose transaction began before another claimer
// took a token (and so waited for that claimer's lock on the bucket) is
// accounted at that claimer's time: the bucket's refill time never moves
// back, so the time between the two is not credited twice. One token a
// second; the early transaction began two seconds before the other's.
TEST_F(QueueLimits, AnEarlierTransactionCreditsNoTokenTwice) {
  SetLimit({"paced", std::nullopt, 1.0, 5});
  CreateRuns("paced", 5);
  auto tokens = [&] {
    return SqlInt(
        "SELECT floor({s}.queue_tokens(rate_per_second, burst, tokens, refilled_at))::bigint "
        "FROM {s}.queue_limits WHERE queue = 'paced'");
  };
  auto take_now = [&] {
    return conn().Autocommit([&](store::Tx& tx) { return store::TakeStepToken(tx, "paced"); });
  };
  auto early = Open("early");

  early->Transact([&](store::Tx& tx) {
    store::CountRuns(tx);  // the transaction's database time is now fixed
    std::this_thread::sleep_for(2s);
    EXPECT_EQ(take_now(), 0ms);  // 4 left
    EXPECT_EQ(store::TakeStepToken(tx, "paced"), 0ms);
    return 0;
  });
  EXPECT_EQ(tokens(), 3);  // not 5: the two seconds were not credited again

  early->Transact([&](store::Tx& tx) {
    store::CountRuns(tx);
    std::this_thread::sleep_for(2s);
    EXPECT_EQ(take_now(), 0ms);  // refilled to 5, 4 left
    return store::ClaimRuns(tx, {"paced"}, {"hash-1"}, 1, "worker-1", 30s).size();
  });
  EXPECT_EQ(tokens(), 3);
}

// A held run's further steps take tokens one at a time; an empty bucket says
// how long until the next token, by the rate.
TEST_F(QueueLimits, StepTokensComeFromTheSameBucket) {
  SetLimit({"paced", std::nullopt, 2.0, 2});
  auto take = [&](const std::string& queue) {
    return conn().Autocommit([&](store::Tx& tx) { return store::TakeStepToken(tx, queue); });
  };
  EXPECT_EQ(take("paced"), 0ms);
  EXPECT_EQ(take("paced"), 0ms);
  const auto wait = take("paced");
  EXPECT_GT(wait, 400ms);  // one token at 2 a second: about 500 ms away
  EXPECT_LE(wait, 500ms);
  AgeBucket("paced", 0.5);
  EXPECT_EQ(take("paced"), 0ms);
  CreateRuns("paced", 3);
  EXPECT_TRUE(Claim({"paced"}, 10).empty());  // the steps spent the bucket

  // A queue without a rate has nothing to take.
  EXPECT_EQ(take("default"), 0ms);
  SetLimit({"capped", 1, std::nullopt, std::nullopt});
  EXPECT_EQ(take("capped"), 0ms);
}

// Queues without a row are claimed as before beside a limited one: the
// batch fills from them, by priority, with no step tokens.
TEST_F(QueueLimits, UnlimitedQueuesAreUnaffected) {
  SetLimit({"limited", 1, std::nullopt, std::nullopt});
  CreateRuns("limited", 5, /*priority=*/10);
  CreateRuns("default", 20);
  const auto claimed = Claim({"default", "limited"}, 8);
  ASSERT_EQ(claimed.size(), 8u);
  EXPECT_EQ(claimed[0].run.queue, "limited");  // priority order across queues holds
  int limited = 0;
  for (const auto& claim : claimed) {
    limited += claim.run.queue == "limited" ? 1 : 0;
    EXPECT_FALSE(claim.step_tokens);
  }
  EXPECT_EQ(limited, 1);
  EXPECT_EQ(Claim({"default"}, 100).size(), 13u);
  EXPECT_EQ(Running("limited"), 1);
}

// Setting limits reports what changed; a changed bucket keeps its tokens up
// to the new burst; lifting a limit frees the queue at once.
TEST_F(QueueLimits, SettingAndLiftingLimits) {
  auto set = [&](const store::QueueLimit& limit) {
    return conn().Transact([&](store::Tx& tx) { return store::SetQueueLimit(tx, limit); });
  };
  EXPECT_EQ(set({"api", 4, 50.0, 100}).kind, store::QueueLimitChange::kInserted);
  EXPECT_EQ(set({"api", 4, 50.0, 100}).kind, store::QueueLimitChange::kUnchanged);
  const auto changed = set({"api", 2, 50.0, 10});
  EXPECT_EQ(changed.kind, store::QueueLimitChange::kUpdated);
  EXPECT_EQ(changed.before.max_running, 4);
  EXPECT_EQ(changed.before.burst, 100);
  EXPECT_EQ(set({"mail", std::nullopt, 1.0, 1}).kind, store::QueueLimitChange::kInserted);

  const auto limits = conn().Transact([&](store::Tx& tx) { return store::ListQueueLimits(tx); });
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(limits[0].queue, "api");
  EXPECT_EQ(limits[0].max_running, 2);
  EXPECT_DOUBLE_EQ(limits[0].tokens.value_or(-1), 10);  // full, cut to the new burst
  EXPECT_EQ(limits[1].queue, "mail");
  EXPECT_FALSE(limits[1].max_running);

  CreateRuns("api", 5);
  EXPECT_EQ(Claim({"api"}, 10).size(), 2u);
  const auto lifted =
      conn().Transact([&](store::Tx& tx) { return store::DeleteQueueLimitsExcept(tx, {"mail"}); });
  EXPECT_EQ(lifted, std::vector<std::string>{"api"});
  EXPECT_EQ(Claim({"api"}, 10).size(), 3u);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.queue_limits"), 1);
}

}  // namespace
}  // namespace cairn::test
