// Contention on the store with real threads, each with its own Connection:
// compare-and-swap claims, OCC checkpoints, keyed starts and idempotency keys
// have exactly one winner, and the database agrees.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "errors.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

class StoreRace : public StoreTest {
 protected:
  // Opens `n` connections up front, then runs body(i, connection) on n
  // threads released together, and joins them.
  void RunTogether(int n, const std::function<void(int, store::Connection&)>& body) {
    std::vector<std::unique_ptr<store::Connection>> connections;
    for (int i = 0; i < n; ++i) connections.push_back(Open("cairn-race-" + std::to_string(i)));
    std::barrier start(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        body(i, *connections[i]);
      });
    }
    for (auto& t : threads) t.join();
  }
};

TEST_F(StoreRace, EightClaimantsOfOneWaitHaveExactlyOneWinner) {
  cairn::Run run = CreateRunningRun();
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(round);
    const std::string key = "pay-" + std::to_string(round);
    SaveWait(run.id, key);
    std::atomic<int> won{0}, already_claimed{0}, other{0};
    std::mutex mutex;
    std::string winner;
    RunTogether(8, [&](int i, store::Connection& c) {
      const std::string claimant = "worker-" + std::to_string(i);
      try {
        c.Transact([&](store::Tx& tx) {
          store::ClaimWait(tx, key, claimant, Json{{"from", claimant}});
        });
        ++won;
        std::lock_guard lock(mutex);
        winner = claimant;
      } catch (const WaitAlreadyClaimedError& e) {
        ++already_claimed;
      } catch (const std::exception& e) {
        ++other;
        ADD_FAILURE() << claimant << ": " << e.what();
      }
    });
    EXPECT_EQ(won, 1);
    EXPECT_EQ(already_claimed, 7);
    EXPECT_EQ(other, 0);
    EXPECT_EQ(Sql("SELECT status || ' ' || claimant || ' ' || (payload->>'from')"
                  " FROM {s}.wait_records WHERE correlation_key = '" +
                  key + "'"),
              "RESUMING " + winner + " " + winner);
  }
}

TEST_F(StoreRace, TwoWritersWithOneExpectedVersionHaveOneWinnerAndOneConflict) {
  cairn::Run run = CreateRunningRun();
  auto first = Open("writer-0");
  auto second = Open("writer-1");
  store::Connection* writers[2] = {first.get(), second.get()};
  int64_t version = run.version;
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(round);
    std::atomic<int> won{0}, conflicts{0};
    std::mutex mutex;
    std::vector<std::string> conflict_messages;
    int winner = -1;
    std::barrier start(2);
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([&, i] {
        cairn::Checkpoint c;
        c.run_id = run.id;
        c.expected_version = version;
        c.context = {{"writer", i}, {"round", round}};
        c.status = RunStatus::kRunning;
        c.lease_owner = "writer-" + std::to_string(i);
        start.arrive_and_wait();
        try {
          auto result =
              writers[i]->Transact([&](store::Tx& tx) { return store::SaveCheckpoint(tx, c); });
          EXPECT_EQ(result.version, version + 1);
          ++won;
          std::lock_guard lock(mutex);
          winner = i;
        } catch (const OccConflictError& e) {
          ++conflicts;
          EXPECT_EQ(e.run_id(), run.id);
          EXPECT_EQ(e.expected(), version);
          EXPECT_EQ(e.current(), version + 1);
          std::lock_guard lock(mutex);
          conflict_messages.push_back(e.what());
        } catch (const std::exception& e) {
          ADD_FAILURE() << "writer " << i << ": " << e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    ASSERT_EQ(won, 1);
    ASSERT_EQ(conflicts, 1);
    EXPECT_THAT(conflict_messages[0], HasSubstr("expected version " + std::to_string(version)));
    EXPECT_THAT(conflict_messages[0],
                HasSubstr("current version is " + std::to_string(version + 1)));
    ++version;
    EXPECT_EQ(Sql("SELECT version || ' ' || (context->>'writer') || ' ' || (context->>'round')"
                  " || ' ' || lease_owner FROM {s}.runs WHERE id = '" +
                  run.id + "'"),
              std::to_string(version) + " " + std::to_string(winner) + " " + std::to_string(round) +
                  " writer-" + std::to_string(winner));
  }
}

TEST_F(StoreRace, EightCreatorsWithOneKeyCreateOneRun) {
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    const std::string key = "order-" + std::to_string(round);
    std::atomic<int> created{0};
    std::mutex mutex;
    std::set<std::string> ids;
    RunTogether(8, [&](int i, store::Connection& c) {
      NewRun run = MakeRun("orders", key);
      run.input = {{"creator", i}};
      try {
        auto result = c.Transact([&](store::Tx& tx) { return store::CreateRun(tx, run); });
        if (result.created) ++created;
        std::lock_guard lock(mutex);
        ids.insert(result.run.id);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "creator " << i << ": " << e.what();
      }
    });
    EXPECT_EQ(created, 1);
    EXPECT_EQ(ids.size(), 1u);
    EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE run_key = '" + key + "'"), 1);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(Sql("SELECT id FROM {s}.runs WHERE run_key = '" + key + "'"), *ids.begin());
  }
}

TEST_F(StoreRace, EightClaimersOfOneIdempotencyKeyHaveOneClaim) {
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    const std::string key = "charge-" + std::to_string(round);
    std::atomic<int> claimed{0}, in_progress{0};
    std::mutex mutex;
    std::string winner;
    RunTogether(8, [&](int i, store::Connection& c) {
      const std::string owner = "owner-" + std::to_string(i);
      try {
        auto claim = c.Transact([&](store::Tx& tx) {
          return store::ClaimIdempotencyKey(tx, "default", key, owner, 60s);
        });
        if (claim.status == IdempotencyClaimStatus::kClaimed) {
          ++claimed;
          std::lock_guard lock(mutex);
          winner = owner;
        } else if (claim.status == IdempotencyClaimStatus::kInProgress) {
          ++in_progress;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << owner << ": " << e.what();
      }
    });
    EXPECT_EQ(claimed, 1);
    EXPECT_EQ(in_progress, 7);
    EXPECT_EQ(
        Sql("SELECT status || ' ' || owner FROM {s}.idempotency_keys WHERE key = '" + key + "'"),
        "in_progress " + winner);
  }
}

// Sixteen owners race through claim, effect and complete on the same keys,
// each in its own order: every key has exactly one owner, whose result every
// other owner is served once it completed; nobody ever claims a held key.
TEST_F(StoreRace, SixteenOwnersRacingOnTheSameKeysEachKeyHasOneOwnerAndOneResult) {
  constexpr int kKeys = 20;
  std::mutex mutex;
  std::map<std::string, std::vector<std::string>> owners_of;  // key -> who claimed it
  std::map<std::string, std::set<std::string>> results_seen;  // key -> results served
  RunTogether(16, [&](int i, store::Connection& c) {
    const std::string owner = "owner-" + std::to_string(i);
    std::vector<int> order(kKeys);
    for (int k = 0; k < kKeys; ++k) order[k] = (k * 7 + i) % kKeys;
    for (int k : order) {
      const std::string key = "charge-" + std::to_string(k);
      try {
        // Until the key is completed: claim; a winner makes its effect and
        // completes; a loser sees it in progress and asks again.
        for (int tries = 0; tries < 2000; ++tries) {
          auto claim = c.Transact([&](store::Tx& tx) {
            return store::ClaimIdempotencyKey(tx, "race", key, owner, 60s);
          });
          if (claim.status == IdempotencyClaimStatus::kClaimed) {
            {
              std::lock_guard lock(mutex);
              owners_of[key].push_back(owner);
            }
            const bool stored = c.Transact([&](store::Tx& tx) {
              return store::CompleteIdempotencyKey(tx, "race", key, owner,
                                                   Json{{"charged_by", owner}}, 1h);
            });
            EXPECT_TRUE(stored) << key << " " << owner;
            continue;
          }
          if (claim.status == IdempotencyClaimStatus::kCompleted) {
            std::lock_guard lock(mutex);
            results_seen[key].insert(claim.record.result->at("charged_by").get<std::string>());
            break;
          }
          std::this_thread::sleep_for(1ms);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << owner << " " << key << ": " << e.what();
      }
    }
  });
  ASSERT_EQ(owners_of.size(), static_cast<size_t>(kKeys));
  for (const auto& [key, owners] : owners_of) {
    SCOPED_TRACE(key);
    ASSERT_EQ(owners.size(), 1U);
    EXPECT_EQ(results_seen[key], std::set<std::string>{owners.front()});
  }
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.idempotency_keys WHERE namespace = 'race'"
                   " AND status = 'completed' AND claims = 1"
                   " AND result->>'charged_by' = owner"),
            kKeys);
}

// A cancel that queues behind a step's commit (the step parks the run on a
// new wait record) must see that commit: the run and the new wait both end
// cancelled, never a cancelled run with a live wait.
TEST_F(StoreRace, CancelQueuedBehindACheckpointCancelsTheWaitItCommitted) {
  cairn::Run run = CreateRunningRun();
  auto writer = Open("writer");
  auto canceller = Open("canceller");
  const int canceller_pid = canceller->BackendPid();
  std::promise<void> written, release;
  std::shared_future<void> released = release.get_future().share();
  std::thread step([&] {
    writer->Transact([&](store::Tx& tx) {
      cairn::Checkpoint c;
      c.run_id = run.id;
      c.expected_version = run.version;
      c.status = RunStatus::kWaiting;
      c.cursor = "ship";
      store::SaveCheckpoint(tx, c);
      store::SaveWait(tx, NewWait{.correlation_key = "pay-1",
                                  .run_id = run.id,
                                  .event = "payment",
                                  .continuation_step = "ship"});
      written.set_value();
      released.wait();
    });
  });
  written.get_future().wait();
  std::optional<CancelResult> cancelled;
  std::string cancel_error;
  std::thread cancel([&] {
    try {
      cancelled = canceller->Transact(
          [&](store::Tx& tx) { return store::CancelRun(tx, run.id, "operator"); });
    } catch (const std::exception& e) {
      cancel_error = e.what();
    }
  });
  // Let the step commit only once the cancel is queued on the run's row lock.
  bool queued = false;
  for (int i = 0; i < 500 && !queued; ++i) {
    queued = RunPsql("SELECT count(*) FROM pg_stat_activity WHERE pid = " +
                     std::to_string(canceller_pid) + " AND wait_event_type = 'Lock'") == "1";
    if (!queued) std::this_thread::sleep_for(10ms);
  }
  release.set_value();
  step.join();
  cancel.join();
  ASSERT_TRUE(queued) << "the cancel never waited for the step's row lock";
  ASSERT_EQ(cancel_error, "");
  ASSERT_TRUE(cancelled.has_value());
  EXPECT_EQ(cancelled->outcome, CancelOutcome::kCancelled);
  EXPECT_EQ(cancelled->version, run.version + 2);
  EXPECT_EQ(cancelled->waits_cancelled, 1);
  EXPECT_EQ(RunColumn(run.id, "status"), "cancelled");
  EXPECT_EQ(Sql("SELECT status FROM {s}.wait_records WHERE correlation_key = 'pay-1'"),
            "CANCELLED");
}

}  // namespace
}  // namespace cairn::test
