// A StoreTest for end-to-end suites: real `cairn run` daemons of the built
// binary and plugins serve one workflow file on the test's schema, runs are
// started through the SQL API and driven with the `cairn` CLI, and the
// helpers read the outcome back from the database.
//
// Only for test sources: it needs the build paths of daemon_process.hpp,
// which cairn_add_test defines for them alone.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon_process.hpp"
#include "store_fixture.hpp"

namespace cairn::test {

class DaemonTest : public StoreTest {
 protected:
  // workflow_file is relative to the source tree, so a suite may serve a
  // shipped workflow (config/workflows/...) as well as a test one
  // (tests/workflows/...).
  explicit DaemonTest(std::string workflow_file) : workflow_file_(std::move(workflow_file)) {}

  // Polls and reaps faster than the defaults so that suites wait less for
  // claims, wait expiry (which runs on the reaper interval) and recovery.
  // Virtual so a suite can change more (a shorter lease, say) and
  // StartDaemon still applies it.
  virtual DaemonOptions Options(int concurrency) const {
    DaemonOptions o = BuiltDaemonOptions(url(), schema(), "", concurrency);
    o.workflow_paths = {SourceDir() + "/" + workflow_file_};
    o.poll_interval = "100ms";
    o.reaper_interval = "200ms";
    return o;
  }

  // A daemon that reported ready. When it did not, the failure is recorded
  // with its log but the test goes on, so that it still stops what it started.
  std::unique_ptr<DaemonProcess> StartDaemon(int concurrency = 4) const {
    auto daemon = std::make_unique<DaemonProcess>(Options(concurrency));
    if (!daemon->StartAndWaitReady()) {
      ADD_FAILURE() << "daemon did not start:\n" << daemon->Log();
    }
    return daemon;
  }

  // A graceful shutdown: a daemon that does not exit 0 on SIGTERM fails the test.
  static void Stop(DaemonProcess& daemon) {
    daemon.Terminate();
    EXPECT_EQ(daemon.WaitExit(std::chrono::seconds(30)), 0) << daemon.Log();
  }

  // Starts a run as an application does, through the SQL API; returns its id.
  std::string StartRun(const std::string& workflow, const Json& input = Json::object()) {
    return Sql("SELECT {s}.start_run('" + workflow + "', '" + Quoted(input.dump()) + "'::jsonb)");
  }

  // Runs the cairn CLI against the test's database and schema.
  CommandResult Cli(std::vector<std::string> args) const {
    args.insert(args.end(), {"--database-url", url(), "--schema", schema()});
    return RunCommand(CairnBinary(), args);
  }

  int64_t CountRuns(const std::string& status, const std::string& workflow = "") const {
    return SqlInt("SELECT count(*) FROM {s}.runs WHERE status = '" + status + "'" +
                  (workflow.empty() ? "" : " AND workflow = '" + workflow + "'"));
  }

  // Events of a kind across all runs.
  int64_t EventCount(const std::string& kind) const {
    return SqlInt("SELECT count(*) FROM {s}.run_events WHERE kind = '" + kind + "'");
  }

  int64_t RunEventCount(const std::string& run_id, const std::string& kind) const {
    return SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + run_id +
                  "' AND kind = '" + kind + "'");
  }

  // Waits until a count query returns expected; false on timeout.
  bool WaitFor(const std::string& count_sql, int64_t expected,
               std::chrono::milliseconds timeout) const {
    return PollUntil([&] { return SqlInt(count_sql) == expected; }, timeout,
                     std::chrono::milliseconds(50));
  }

  bool WaitForStatus(const std::string& id, const std::string& status,
                     std::chrono::milliseconds timeout = std::chrono::seconds(20)) const {
    return PollUntil([&] { return RunColumn(id, "status") == status; }, timeout,
                     std::chrono::milliseconds(50));
  }

  // Single quotes doubled, so that a JSON text (whose strings may hold a
  // quote) can be spliced into an SQL literal.
  static std::string Quoted(const std::string& text) {
    std::string out;
    for (char c : text) {
      out += c;
      if (c == '\'') out += '\'';
    }
    return out;
  }

 private:
  std::string workflow_file_;
};

}  // namespace cairn::test
