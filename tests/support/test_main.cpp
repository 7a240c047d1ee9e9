// The gtest main of every test binary. It blocks SIGINT, SIGTERM and SIGHUP
// before any thread exists and waits for them on one dedicated thread, so an
// interrupted run still stops the harness's PostgreSQL server and deletes it.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>

#include "pg_harness.hpp"

namespace {

// No work in a signal handler: this thread receives the signals synchronously,
// cleans up, and ends the process with the conventional 128 + signal status.
[[noreturn]] void WaitForSignals() {
  int signal_number = 0;
  while (sigwait(&cairn::test::TestSignals(), &signal_number) != 0) {
  }
  std::fprintf(stderr, "\ncairn tests: %s: stopping the test PostgreSQL server\n",
               strsignal(signal_number));
  cairn::test::internal::StopServer();
  ::_exit(128 + signal_number);
}

}  // namespace

int main(int argc, char** argv) {
  pthread_sigmask(SIG_BLOCK, &cairn::test::TestSignals(), nullptr);
  std::thread(WaitForSignals).detach();
  ::testing::InitGoogleTest(&argc, argv);
  int status = RUN_ALL_TESTS();
  // A failed test still cleans up; a crash is left to the harness's watchdog.
  cairn::test::internal::StopServer();
  return status;
}
