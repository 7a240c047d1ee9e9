// See health.hpp.
#include "health.hpp"

namespace cairn {

namespace {

int64_t Ticks(Health::Clock::time_point t) { return t.time_since_epoch().count(); }

int64_t Millis(Health::Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

Health::Pulse& Health::Pulse::operator=(Pulse&& other) noexcept {
  if (this != &other) {
    Rest();
    heart_ = other.heart_;
    other.heart_ = nullptr;
  }
  return *this;
}

void Health::Pulse::Beat(std::chrono::milliseconds interval) {
  if (!heart_) return;
  heart_->interval_ms_.store(interval.count());
  heart_->last_beat_.store(Ticks(Clock::now()));
  heart_->resting_.store(false);
}

void Health::Pulse::Rest() {
  if (heart_) heart_->resting_.store(true);
}

std::string Health::Liveness::Detail() const {
  if (healthy) return "ok";
  std::string out = "unhealthy: late: ";
  for (std::size_t i = 0; i < late.size(); ++i) out += (i ? "; " : "") + late[i];
  return out;
}

Health::Health(HealthOptions options) : options_(options) {}

Health::Pulse Health::Track(const std::string& name) {
  std::lock_guard lock(mutex_);
  hearts_.emplace_back(name);
  return Pulse(&hearts_.back());
}

Health::Liveness Health::CheckLiveness(Clock::time_point now) const {
  Liveness liveness;
  std::lock_guard lock(mutex_);
  for (const Heart& heart : hearts_) {
    if (heart.resting_.load()) continue;
    const auto since = Clock::duration(Ticks(now) - heart.last_beat_.load());
    const std::chrono::milliseconds interval(heart.interval_ms_.load());
    if (since <= options_.missed_beats * interval + options_.grace) continue;
    liveness.healthy = false;
    liveness.late.push_back(heart.name() + ": no beat for " + std::to_string(Millis(since)) +
                            " ms (interval " + std::to_string(interval.count()) + " ms)");
  }
  return liveness;
}

void Health::MarkStarted() { started_ = true; }

void Health::DatabaseReached() { database_reached_ = true; }

void Health::DatabaseUnreachable(const std::string& reason) {
  {
    std::lock_guard lock(reason_mutex_);
    unreachable_reason_ = reason;
  }
  database_reached_ = false;
}

void Health::MarkDraining() { draining_ = true; }

Health::Readiness Health::CheckReadiness() const {
  if (draining_.load()) return {false, "not ready: draining"};
  if (!started_.load()) return {false, "not ready: starting (loading definitions)"};
  if (!database_reached_.load()) {
    std::lock_guard lock(reason_mutex_);
    return {false, unreachable_reason_.empty()
                       ? "not ready: the poller has not reached the database yet"
                       : "not ready: database unreachable: " + unreachable_reason_};
  }
  return {true, "ready"};
}

}  // namespace cairn
