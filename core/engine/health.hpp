// The health of a worker, apart from its metrics. Liveness: each loop of the
// worker (poller, lease keeper, each executor slot, listener) beats as it
// comes round, saying how long its next round may take; a loop that should
// be beating and has not for `missed_beats` of its intervals (plus a grace)
// is late, and a late loop makes the worker unhealthy (/healthz fails, the
// systemd watchdog is no longer pinged). Readiness: the worker's definitions
// are loaded and registered, its poller reaches the database, it is not
// draining (/readyz). Every method is thread-safe and cheap (atomics; a mutex
// only to add a loop or to read the list).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace cairn {

struct HealthOptions {
  // A loop is late once this many of its intervals have passed without a
  // beat, plus the grace (which absorbs a slow statement or a busy machine).
  int missed_beats = 3;
  std::chrono::milliseconds grace{std::chrono::seconds(10)};
};

class Health {
 public:
  using Clock = std::chrono::steady_clock;

  // The heart of one loop, owned by the Health; see Track.
  class Heart {
   public:
    explicit Heart(std::string name) : name_(std::move(name)) {}
    const std::string& name() const { return name_; }

   private:
    friend class Health;
    std::string name_;
    std::atomic<int64_t> last_beat_{0};    // Clock ticks
    std::atomic<int64_t> interval_ms_{0};  // the loop's announced interval
    std::atomic<bool> resting_{true};      // not expected to beat
  };

  // A loop's handle on its heart. Moving it is allowed; destroying it rests
  // the heart (a loop that ended is not late).
  class Pulse {
   public:
    Pulse() = default;
    explicit Pulse(Heart* heart) : heart_(heart) {}
    Pulse(Pulse&& other) noexcept : heart_(other.heart_) { other.heart_ = nullptr; }
    Pulse& operator=(Pulse&& other) noexcept;
    Pulse(const Pulse&) = delete;
    Pulse& operator=(const Pulse&) = delete;
    ~Pulse() { Rest(); }

    // The loop came round; its next beat is due within `interval`.
    void Beat(std::chrono::milliseconds interval);
    // The loop waits for work with nothing to do (an idle slot): it is not
    // expected to beat until its next Beat.
    void Rest();

   private:
    Heart* heart_ = nullptr;
  };

  struct Liveness {
    bool healthy = true;
    // One line per late loop: "keeper: no beat for 4210 ms (interval 200 ms)".
    std::vector<std::string> late;
    std::string Detail() const;  // "ok", or the late loops
  };

  struct Readiness {
    bool ready = false;
    std::string detail;  // "ready", or why not
  };

  explicit Health(HealthOptions options = {});
  Health(const Health&) = delete;
  Health& operator=(const Health&) = delete;

  // Adds a loop (resting until its first beat) and returns its pulse. Names
  // should be unique; they appear in /healthz.
  Pulse Track(const std::string& name);

  Liveness CheckLiveness(Clock::time_point now = Clock::now()) const;

  // Readiness inputs.
  void MarkStarted();  // definitions loaded and registered, loops started
  void DatabaseReached();
  void DatabaseUnreachable(const std::string& reason);
  void MarkDraining();
  Readiness CheckReadiness() const;

 private:
  HealthOptions options_;
  mutable std::mutex mutex_;
  std::deque<Heart> hearts_;  // deque: references stay valid as it grows

  std::atomic<bool> started_{false};
  std::atomic<bool> draining_{false};
  std::atomic<bool> database_reached_{false};
  mutable std::mutex reason_mutex_;
  std::string unreachable_reason_;
};

}  // namespace cairn
