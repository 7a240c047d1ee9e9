// The real-PostgreSQL test harness: one server per test binary (or the one
// named by CAIRN_TEST_DATABASE_URL), unique schema names, the PgTest fixture
// and a small libpq admin helper. All functions are thread-safe; the server is
// started lazily on first use and stopped by test_main.cpp, by its signal
// thread, or (if the test binary dies) by a watchdog process.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <string_view>

namespace cairn::test {

// libpq URI of the test server, e.g. postgresql://postgres@127.0.0.1:PORT/postgres.
// The first call starts the harness's own PostgreSQL server unless
// CAIRN_TEST_DATABASE_URL is set; throws std::runtime_error (with the server
// log) when the server cannot be started.
const std::string& DatabaseUrl();

// True when the harness started the server itself (CAIRN_TEST_DATABASE_URL unset).
bool HarnessOwnsServer();

// A fresh, valid, lower-case SQL identifier per call (across processes too):
// <prefix>_<pid>_<counter>_<random>, at most 63 characters. The prefix must
// start with a letter or underscore; it is lower-cased and shortened if needed.
std::string UniqueSchemaName(std::string_view prefix = "t");

// Runs sql (one or more statements) on a short-lived connection to
// DatabaseUrl() and returns the first column of the first row of the last
// result as text ("" when there is no row or the value is NULL). Throws
// std::runtime_error carrying PostgreSQL's message on any error.
std::string RunPsql(const std::string& sql);

// Same, against another server or database.
std::string RunPsqlAt(const std::string& url, const std::string& sql);

// A TCP port on 127.0.0.1 that nothing listens on right now.
int FindFreePort();

// Restarts the harness's own server in place (same port and data): an
// immediate shutdown, like a crash, then start-up with crash recovery. Every
// open connection is cut. Throws std::logic_error when the server is external
// (callers should GTEST_SKIP() unless HarnessOwnsServer()).
void RestartServer();

// The signals test_main blocks in every thread and waits for in its signal
// thread (SIGINT, SIGTERM, SIGHUP). Children inherit a blocked mask across
// exec: a test that forks and execs a process (the cairn binary) must call
// RestoreChildSignalMask() in the child before exec, or use
// posix_spawnattr_setsigmask with an empty set and POSIX_SPAWN_SETSIGMASK.
const sigset_t& TestSignals();

// Unblocks all signals in the calling thread; async-signal-safe, meant for a
// forked child before exec.
void RestoreChildSignalMask();

// Every *_pgtest fixture derives from this. SetUp picks a unique schema name
// (the schema is not created: the store's migrator creates it); TearDown drops
// that schema with CASCADE, whether or not the test passed.
class PgTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  const std::string& url() const { return url_; }
  const std::string& schema() const { return schema_; }

 private:
  std::string url_;
  std::string schema_;
};

namespace internal {

// Stops the harness's server (immediate shutdown) and removes its temporary
// folder. Idempotent, and a no-op in any process but the one that started the
// server (a forked death-test child). Called by test_main at exit and from its
// signal thread.
void StopServer();

}  // namespace internal

}  // namespace cairn::test
