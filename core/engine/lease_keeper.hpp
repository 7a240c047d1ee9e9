// The lease keeper: renews the leases of the runs a worker's slots hold and
// heartbeats the worker, on a thread and a session of its own that nothing
// else uses, so that no other work can ever delay a renewal. Its session
// bounds every statement and lock wait, and renewal skips rows another
// session has locked instead of waiting for them (store::RenewLeases): one
// locked run never costs the others their leases. Start and Stop are called
// from one thread; RenewOnce (the test hook) from any.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "health.hpp"
#include "lease_book.hpp"
#include "store.hpp"

namespace cairn {

class Metrics;

struct LeaseKeeperOptions {
  store::ConnectionOptions connection;
  std::string worker_id;
  std::chrono::milliseconds lease{30000};
  // How often the worker heartbeats (renewals come at least every lease / 3).
  std::chrono::milliseconds heartbeat_interval{5000};
  Health* health = nullptr;    // null: no liveness beats
  Metrics* metrics = nullptr;  // null: record nothing
};

class LeaseKeeper {
 public:
  LeaseKeeper(LeaseKeeperOptions options, LeaseBook& leases);
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  void Start();
  void Stop();

  // Renews every held lease and heartbeats once, marking runs taken over as
  // lost in the lease book. Throws on database errors.
  store::LeaseRenewal RenewOnce();

  // The renewal period: a third of the lease, at least 50 ms.
  std::chrono::milliseconds period() const;

 private:
  void Loop();

  LeaseKeeperOptions options_;
  LeaseBook& leases_;
  std::mutex connection_mutex_;
  std::unique_ptr<store::Connection> connection_;
  // Runs found locked by another session at the last renewal (guarded by
  // connection_mutex_).
  std::set<std::string> busy_before_;
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace cairn
