// The worker: a poller that claims due runs, a pool of executor slots that
// run them, a lease keeper that renews their leases (lease_keeper.hpp), the
// maintenance services every worker runs (the sweeper that takes over runs
// of dead workers and expires waits; retention, which one worker of the fleet
// runs at a time), and an optional LISTEN thread that wakes the poller. Start
// and Stop are called from one thread (the daemon's main thread); everything
// else runs on the worker's own threads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "definition.hpp"
#include "executor.hpp"
#include "health.hpp"
#include "lease_book.hpp"
#include "lease_keeper.hpp"
#include "retention.hpp"
#include "step.hpp"
#include "store.hpp"
#include "sweeper.hpp"

namespace cairn {

class Metrics;

struct WorkerOptions {
  store::ConnectionOptions connection;
  std::string worker_id;
  std::string version;  // cairn's, as the fleet view shows it
  std::vector<std::string> queues{"default"};
  int concurrency = 8;
  int claim_batch = 8;
  std::chrono::milliseconds poll_interval{1000};
  std::chrono::milliseconds lease{30000};
  std::chrono::milliseconds reaper_interval{5000};
  // A run whose lease expired this many times in a row without a commit
  // fails with code "crashed".
  int crash_limit = 3;
  // Finished runs older than this are deleted with their history, in bounded
  // passes, about once a minute; zero keeps them forever.
  std::chrono::milliseconds retention{0};
  std::chrono::milliseconds retention_interval{std::chrono::minutes(1)};
  std::chrono::milliseconds shutdown_grace{30000};
  bool listen = true;
  // A slot's connection idle this long is closed until the slot gets work.
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(1)};
  // The most connections the whole daemon holds; Start refuses a server
  // whose max_connections cannot hold that many. 0: not checked.
  int connection_budget = 0;
  Metrics* metrics = nullptr;  // null: record nothing
  HealthOptions health;
};

struct WorkerStats {
  int64_t claimed = 0;
  int64_t parked = 0;
  int64_t handed_back = 0;
  int64_t lost = 0;
};

class Worker {
 public:
  Worker(WorkerOptions options, const DefinitionSet& definitions, const StepCatalog& steps);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Registers the worker and its definitions, then starts every thread.
  // Throws when the database cannot be reached.
  void Start();

  // Graceful stop: stop claiming, let steps in flight finish and hand their
  // runs back, up to the grace period. Returns false when some step was still
  // running at the deadline (its run was released and is fenced; the caller
  // should exit without waiting for that thread).
  bool Stop();

  WorkerStats Stats() const;
  const std::string& id() const { return options_.worker_id; }
  // Liveness of its loops and readiness; see health.hpp.
  Health& health() { return health_; }

 private:
  void PollLoop();
  void SlotLoop(int slot);
  void ListenLoop();
  void StartMaintenance();
  // Refuses a server that cannot hold the daemon's connections; warns about
  // a superuser role and a server short of free connections.
  void CheckServer(store::Connection& connection) const;
  void Wake();
  std::unique_ptr<store::Connection> Connect(const std::string& role);

  WorkerOptions options_;
  const DefinitionSet& definitions_;
  const StepCatalog& steps_;
  std::vector<std::string> served_hashes_;
  LeaseBook leases_;
  Health health_;

  std::atomic<bool> stop_claiming_{false};
  std::atomic<bool> stop_runs_{false};

  std::mutex mutex_;
  std::condition_variable poller_cv_;  // wake-ups, freed slots, stop
  std::condition_variable slots_cv_;   // claimed runs queued, stop
  std::condition_variable idle_cv_;    // a slot finished a run, stop
  std::deque<Run> queue_;
  int busy_ = 0;
  bool wake_ = false;

  mutable std::mutex stats_mutex_;
  WorkerStats stats_;

  std::unique_ptr<LeaseKeeper> keeper_;
  std::unique_ptr<Sweeper> sweeper_;
  std::unique_ptr<Retention> retention_;
  std::thread poller_;
  std::thread listener_;
  std::vector<std::thread> slots_;
  bool started_ = false;
};

}  // namespace cairn
