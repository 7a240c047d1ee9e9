// The contract every maintenance service shares (the lease reaper and wait
// expiry, retention, schedule ticks): a pass runs every interval on a thread
// and a database session of the service's own, so that no service can delay
// another (and none can delay lease renewal, which has a thread of its own in
// the worker). Start and Stop are idempotent and called from one thread;
// RunOnce is the testable unit and returns what the pass did; a service logs
// only when it did something. RunOnce may be called from any thread: passes
// serialise on the service's session. The session is dropped after a failed
// pass and at Stop (the next pass opens a new one); a service that holds
// something of its session's, say a lock, learns of it in SessionEnding.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "store.hpp"

namespace cairn {

// What one pass changed, as named counts ("reaped" 3). Empty: nothing.
struct ServiceReport {
  std::vector<std::pair<std::string, int64_t>> counts;

  void Add(std::string what, int64_t count) {
    if (count != 0) counts.emplace_back(std::move(what), count);
  }
  bool Empty() const { return counts.empty(); }
  int64_t Count(const std::string& what) const;
  std::string Text() const;  // "3 reaped, 1 crashed"; "nothing" when empty
};

struct PeriodicServiceOptions {
  std::string name;                     // for logs and application_name
  store::ConnectionOptions connection;  // the service's own session
  std::chrono::milliseconds interval{std::chrono::seconds(5)};
  // Called on the service's thread after each pass it runs by itself (not
  // after RunOnce), say to record metrics.
  std::function<void(const ServiceReport&)> on_report;
};

class PeriodicService {
 public:
  explicit PeriodicService(PeriodicServiceOptions options);
  // A subclass must call Stop() in its own destructor: the thread calls Pass.
  virtual ~PeriodicService();
  PeriodicService(const PeriodicService&) = delete;
  PeriodicService& operator=(const PeriodicService&) = delete;

  void Start();
  // Joins the thread and ends the session.
  void Stop();
  // One pass now. Throws on database errors (the thread logs them, drops the
  // session and tries again at the next interval).
  ServiceReport RunOnce();

  const std::string& name() const { return options_.name; }
  std::chrono::milliseconds interval() const { return options_.interval; }

 protected:
  virtual ServiceReport Pass(store::Connection& connection) = 0;
  // Called with the session about to be dropped (at Stop, after a failed
  // pass, or when it was found closed), serialised with passes. The session
  // may be broken. Must not throw.
  virtual void SessionEnding(store::Connection& connection) { (void)connection; }

  // Runs fn(connection) on the service's session, serialised with passes.
  template <class F>
  auto WithConnection(F&& fn) {
    std::lock_guard lock(mutex_);
    try {
      return fn(Connection());
    } catch (...) {
      EndSession();
      throw;
    }
  }

 private:
  void Loop();
  store::Connection& Connection();  // with mutex_ held
  void EndSession();                // with mutex_ held

  PeriodicServiceOptions options_;
  std::mutex mutex_;  // the session
  std::unique_ptr<store::Connection> connection_;
  std::mutex thread_mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace cairn
