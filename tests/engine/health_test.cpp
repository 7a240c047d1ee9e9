// Unit tests of a worker's Health: loops that beat, rest and go late, and
// readiness. Time is passed in, so nothing sleeps. No database.
#include "health.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace cairn {
namespace {

using namespace std::chrono_literals;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

HealthOptions Options() {
  HealthOptions options;
  options.missed_beats = 3;
  options.grace = 500ms;
  return options;
}

TEST(Health, IsHealthyWithoutLoopsAndWhileLoopsBeatOnTime) {
  Health health(Options());
  EXPECT_TRUE(health.CheckLiveness().healthy);
  Health::Pulse poller = health.Track("poller");
  poller.Beat(100ms);
  const auto now = Health::Clock::now();
  EXPECT_TRUE(health.CheckLiveness(now).healthy);
  // Within three intervals and the grace: still on time.
  EXPECT_TRUE(health.CheckLiveness(now + 750ms).healthy);
  EXPECT_EQ(health.CheckLiveness(now).Detail(), "ok");
}

TEST(Health, ALoopLateByMoreThanItsMissedBeatsAndGraceMakesItUnhealthyNamingIt) {
  Health health(Options());
  Health::Pulse poller = health.Track("poller");
  Health::Pulse keeper = health.Track("keeper");
  poller.Beat(100ms);
  keeper.Beat(1s);
  const auto now = Health::Clock::now();
  auto liveness = health.CheckLiveness(now + 900ms);
  EXPECT_FALSE(liveness.healthy);
  ASSERT_EQ(liveness.late.size(), 1u);
  EXPECT_TRUE(Contains(liveness.late[0], "poller: no beat for")) << liveness.late[0];
  EXPECT_TRUE(Contains(liveness.late[0], "(interval 100 ms)")) << liveness.late[0];
  EXPECT_TRUE(Contains(liveness.Detail(), "unhealthy: late: poller")) << liveness.Detail();
  // Both late, each named.
  liveness = health.CheckLiveness(now + 4s);
  EXPECT_EQ(liveness.late.size(), 2u);
  // A beat brings it back.
  poller.Beat(100ms);
  keeper.Beat(1s);
  EXPECT_TRUE(health.CheckLiveness().healthy);
}

TEST(Health, ARestingLoopIsNeverLateAndALoopThatEndedRests) {
  Health health(Options());
  Health::Pulse slot = health.Track("slot 0");
  slot.Beat(100ms);
  slot.Rest();  // waiting for work
  EXPECT_TRUE(health.CheckLiveness(Health::Clock::now() + 1h).healthy);
  {
    Health::Pulse listener = health.Track("listener");
    listener.Beat(100ms);
    EXPECT_FALSE(health.CheckLiveness(Health::Clock::now() + 1h).healthy);
  }  // the loop ended
  EXPECT_TRUE(health.CheckLiveness(Health::Clock::now() + 1h).healthy);
}

TEST(Health, AMovedPulseKeepsBeatingTheSameHeart) {
  Health health(Options());
  Health::Pulse first = health.Track("poller");
  Health::Pulse moved = std::move(first);
  moved.Beat(100ms);
  first.Rest();  // a moved-from pulse does nothing
  EXPECT_FALSE(health.CheckLiveness(Health::Clock::now() + 1h).healthy);
}

TEST(Health, IsReadyOnceStartedWithTheDatabaseReachedAndNotDraining) {
  Health health(Options());
  auto readiness = health.CheckReadiness();
  EXPECT_FALSE(readiness.ready);
  EXPECT_TRUE(Contains(readiness.detail, "starting")) << readiness.detail;
  health.MarkStarted();
  readiness = health.CheckReadiness();
  EXPECT_FALSE(readiness.ready);
  EXPECT_TRUE(Contains(readiness.detail, "not reached the database yet")) << readiness.detail;
  health.DatabaseReached();
  readiness = health.CheckReadiness();
  EXPECT_TRUE(readiness.ready);
  EXPECT_EQ(readiness.detail, "ready");
  health.DatabaseUnreachable("connection refused");
  readiness = health.CheckReadiness();
  EXPECT_FALSE(readiness.ready);
  EXPECT_TRUE(Contains(readiness.detail, "database unreachable: connection refused"))
      << readiness.detail;
  health.DatabaseReached();
  health.MarkDraining();
  readiness = health.CheckReadiness();
  EXPECT_FALSE(readiness.ready);
  EXPECT_TRUE(Contains(readiness.detail, "draining")) << readiness.detail;
}

}  // namespace
}  // namespace cairn
