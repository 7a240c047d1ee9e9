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
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "definition.hpp"
#include "event_signal.hpp"
#include "executor.hpp"
#include "health.hpp"
#include "idempotency_session.hpp"
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
  // Batch mode above 1: a slot executes up to this many runs together
  // (Executor::ExecuteBatch); the poller then claims up to this many per
  // free slot.
  int batch_size = 1;
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

// What SIGHUP may change while runs are in flight.
struct WorkerServing {
  std::vector<std::string> queues;
  int concurrency = 8;
  int claim_batch = 8;
  int batch_size = 1;
  DefinitionSet definitions;
};

struct WorkerStats {
  int64_t claimed = 0;
  // Of those, claimed by a slot for itself as it finished a run.
  int64_t claimed_by_slots = 0;
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

  // The session Start registers the worker on: the pooler check
  // (store::CheckSessionPooling) and a connection, opened at once. Apart
  // from Start so that the daemon can open it while its step process loads
  // the plugins: each is a new process, tens of milliseconds on some hosts.
  // Throws when the database cannot be reached or a pooler is in the way.
  static std::unique_ptr<store::Connection> OpenStartSession(const WorkerOptions& options);

  // Checks the server (CheckServer), registers the worker and its
  // definitions on `session` (OpenStartSession's, for these options), then
  // starts every thread.
  void Start(std::unique_ptr<store::Connection> session);
  // Start on a session opened now. Throws when the database cannot be
  // reached.
  void Start() { Start(OpenStartSession(options_)); }

  // Graceful stop: stop claiming, let steps in flight finish and hand their
  // runs back, up to the grace period. Returns false when some step was still
  // running at the deadline (its run was released and is fenced; the caller
  // should exit without waiting for that thread).
  bool Stop();

  // Serves other queues, with another number of slots, or other workflow
  // definitions, without stopping: registers the definitions and the
  // worker's new queues first (throwing, with nothing changed, when the
  // database refuses), then swaps them in. Runs already claimed finish their
  // step on the definitions they were claimed under; slots beyond a lower
  // concurrency end once their run is done. Called from the thread that
  // called Start.
  void Reload(WorkerServing serving);

  WorkerStats Stats() const;
  // Steps running now, and the slots there are.
  std::pair<int, int> Busy() const;
  // The slot a wake-up would go to now (Wake), or -1 for the poller.
  int SlotForWakeUp() const;
  const std::string& id() const { return options_.worker_id; }
  // Liveness of its loops and readiness; see health.hpp.
  Health& health() { return health_; }

 private:
  // What one slot takes on: a claimed run, or in batch mode up to
  // batch_size of them, and the definitions they were claimed under.
  struct Claimed {
    std::vector<store::ClaimedRun> claims;
    std::shared_ptr<const DefinitionSet> definitions;
    // Instead of claims: the run the slot claimed for itself (with its last
    // checkpoint, or between runs), on its own session.
    std::optional<store::ClaimedNextRun> self_claimed;
  };

  void PollLoop();
  // The poller's claim: one claim_runs statement on `connection`, without
  // an explicit transaction (one round trip), of up to `want` runs,
  // recorded (RecordClaim).
  std::vector<store::ClaimedRun> Claim(store::Connection& connection,
                                       const store::ClaimRequest& request, int want);
  // The worker's only busy slot, finishing a run whose last commit could
  // not claim its next one (a transaction of several statements), claims
  // it on its own session, stack lock and read included, and keeps going:
  // a hand-off to the poller and back, whose thread and server process
  // would each have to get the CPU first, would leave the worker with
  // nothing in flight. Nothing when other slots are busy, or where
  // NextClaimForSlot says nothing.
  std::optional<Claimed> ClaimForSlot(int slot, Executor& executor,
                                      const std::shared_ptr<const DefinitionSet>& definitions);
  // One run claimed on the executor's session (store::ClaimRunForSlot),
  // recorded; nullopt when none was due. Throws on a failed claim, after
  // letting go of a stack lock it may have left behind.
  std::optional<Claimed> ClaimOnSession(Executor& executor, const store::ClaimRequest& request,
                                        const std::shared_ptr<const DefinitionSet>& definitions);
  // Once per session, as its slot goes idle: store::PlanClaimRunForSlot, so
  // that the first wake-up it takes does not wait for the planning. False
  // when the slot may not claim for itself now (SlotClaimRequest): it tries
  // again when it next goes idle.
  bool PlanSlotClaim(int slot, Executor& executor,
                     const std::shared_ptr<const DefinitionSet>& definitions);
  // What a slot's parking checkpoint claims besides, under a backlog
  // (Executor's next_claim): a claim that costs no transaction of its own,
  // so any busy slot makes it. Nothing when the poller has claimed runs
  // still waiting for a slot, the last claim came back short, or the worker
  // is stopping, has fewer slots or other definitions now, or runs batches.
  std::optional<store::ClaimRequest> NextClaimForSlot(
      int slot, const std::shared_ptr<const DefinitionSet>& definitions);
  // What an idle slot asks for on a wake-up: NextClaimForSlot's request,
  // backlog or not; never nullopt for a slot IdleSessionServes. Called with
  // mutex_ held.
  std::optional<store::ClaimRequest> SlotClaimRequest(
      int slot, const std::shared_ptr<const DefinitionSet>& definitions) const;
  // Records a claim's runs (`claimed`, of which those that could be read
  // are of `queues`) in the metrics and stats; whether it got all it wanted
  // is what tells the slots that a backlog is waiting.
  void RecordClaim(int claimed, int want, const std::vector<std::string>& queues, bool by_slot);
  // RecordClaim of a slot's claim of its next run.
  void RecordSlotClaim(const std::optional<store::ClaimedNextRun>& next);
  void SlotLoop(int slot);
  void StartSlots();  // threads for the slots below concurrency_ that have none
  // Listens for wake-ups, and holds the wake gates of the queues served
  // open (store::WakeListener) while the worker waits for hints: opened,
  // followed by a claim, when HintNeeds says so; closed at a hint that
  // finds every slot busy.
  void ListenLoop();
  struct HintNeeds {
    std::vector<std::string> queues;  // served now
    bool free_slot = false;
    // A free slot, no wake-up waiting to be taken, and no claim for a free
    // slot in flight: a run made due now waits for a hint or the poll.
    bool waiting = false;
  };
  HintNeeds WakeHintNeeds() const;
  void StartMaintenance();
  // A wake-up (a notification, or the listener's reconnect). It goes to the
  // lowest-numbered idle slot that keeps a session for the definitions
  // served now, which claims one run on it with the run's stack lock and
  // read in the same statement: the notified run starts without the
  // poller's thread and claim, and without a statement to lock and read it.
  // Always the lowest, so that wake-ups keep finding the same sessions,
  // whose statements are planned already, and the others may go idle. With
  // no such slot, or in batch mode, the poller claims.
  void Wake();
  void WakePoller();
  void WakePollerOnBacklog();  // when the last claim got all it asked for
  // With mutex_ held: whether `slot` waits idle with a session it may claim
  // on for the definitions served now, outside batch mode; the lowest such
  // slot, or -1.
  bool IdleSessionServes(int slot) const;
  int FirstIdleSessionServing() const;
  // With mutex_ held: a wake-up for the lowest idle slot that
  // IdleSessionServes, or for the poller when there is none.
  void WakeAnIdleSlot();
  // With mutex_ held, once a slot stops waiting idle with its session: a
  // wake-up sent to it goes to another such slot, or to the poller.
  void PassOnSlotWake();
  // Backoff for reconnect loops: quick at first, never hammering the server.
  static std::chrono::milliseconds ReconnectDelay(int failures);
  // Refuses a server that cannot hold the daemon's connections; warns about
  // a superuser role and a server short of free connections.
  void CheckServer(store::Connection& connection) const;
  // The options of the sessions that run the engine's own statements (the
  // poller, the slots, start, reload and stop), named "cairn ROLE WORKER".
  static store::ConnectionOptions EngineSession(const WorkerOptions& options,
                                                const std::string& role);
  store::ConnectionOptions EngineSession(const std::string& role) const {
    return EngineSession(options_, role);
  }
  std::unique_ptr<store::Connection> Connect(const std::string& role);

  WorkerOptions options_;
  const StepCatalog& steps_;
  LeaseBook leases_;
  Health health_;

  std::atomic<bool> stop_claiming_{false};
  std::atomic<bool> stop_runs_{false};

  mutable std::mutex mutex_;
  std::condition_variable poller_cv_;  // wake-ups, freed slots, stop
  std::condition_variable slots_cv_;   // claimed runs queued, stop, fewer slots
  std::condition_variable idle_cv_;    // a slot finished a run, stop
  std::deque<Claimed> queue_;
  int busy_ = 0;
  bool wake_ = false;             // for the poller
  int wake_slot_ = -1;            // the idle slot a wake-up went to (Wake)
  int waking_ = 0;                // slots claiming on a wake-up they took
  bool poller_claiming_ = false;  // for free slots; the runs not queued yet
  // Raised when WakeHintNeeds may have changed: a slot went idle or
  // took a wake-up, the poller is going to wait, the queues changed.
  EventSignal hints_wanted_changed_;
  // The last claim, the poller's or a slot's, got every run it asked for.
  bool backlog_ = false;
  // What the worker serves (Reload changes it), guarded by mutex_.
  std::vector<std::string> queues_;
  int concurrency_ = 0;
  int claim_batch_ = 0;
  int batch_size_ = 1;
  std::shared_ptr<const DefinitionSet> definitions_;
  std::vector<std::string> served_hashes_;
  std::vector<bool> slot_running_;  // by slot number
  // By slot number: while the slot waits idle with an open session, the
  // definitions its executor serves; else null.
  std::vector<const DefinitionSet*> idle_sessions_;

  mutable std::mutex stats_mutex_;
  WorkerStats stats_;

  std::unique_ptr<LeaseKeeper> keeper_;
  // Shared by the slots; opens its session when a step first uses it.
  std::shared_ptr<IdempotencySession> idempotency_;
  std::unique_ptr<Sweeper> sweeper_;
  std::unique_ptr<Retention> retention_;
  std::thread poller_;
  std::thread listener_;
  std::vector<std::thread> slots_;
  bool started_ = false;
};

}  // namespace cairn
