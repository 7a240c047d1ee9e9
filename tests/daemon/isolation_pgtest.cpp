// Per-workflow step isolation against real daemons: plugins.isolation_by_workflow
// puts one workflow's steps on the daemon's threads or in step processes,
// whatever plugins.isolation says for the rest; a crashing step of a workflow
// in step processes fails only its attempt; a started daemon gets a step
// process per slot; a value that is no isolation, or
// a workflow no workflow file defines, stops `cairn run` and `cairn config
// check` with exit 2 before anything starts; and SIGHUP refuses a workflow on
// threads that would need a plugin the daemon did not load.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "daemon_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

class StepIsolation : public DaemonTest {
 protected:
  StepIsolation() : DaemonTest("tests/workflows/isolation.yaml") {}

  DaemonOptions With(const std::string& isolation, const std::string& by_workflow) const {
    DaemonOptions o = Options(2);
    o.isolation = isolation;
    o.isolation_by_workflow = by_workflow;
    return o;
  }

  std::unique_ptr<DaemonProcess> StartDaemonWith(const std::string& isolation,
                                                 const std::string& by_workflow) const {
    auto daemon = std::make_unique<DaemonProcess>(With(isolation, by_workflow));
    if (!daemon->StartAndWaitReady()) ADD_FAILURE() << "daemon did not start:\n" << daemon->Log();
    return daemon;
  }

  // The process a completed process_id step ran in.
  int64_t PidOf(const std::string& id) const {
    return Json::parse(RunColumn(id, "output")).value("pid", int64_t{-1});
  }

  // The code of the run's last event of a kind ("" when none).
  std::string LastCode(const std::string& id, const std::string& kind) const {
    return Sql("SELECT coalesce(value->>'code', '') FROM {s}.run_events WHERE run_id = '" + id +
               "' AND kind = '" + kind + "' ORDER BY position DESC LIMIT 1");
  }

  static std::string Maps(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // A daemon that must refuse to start: exit 2, every message in its log,
  // and nothing registered in the database.
  void ExpectStartupError(DaemonProcess& daemon, const std::vector<std::string>& messages) {
    daemon.Start();
    EXPECT_EQ(daemon.WaitExit(20s), 2) << daemon.Log();
    for (const std::string& message : messages) {
      EXPECT_NE(daemon.Log().find(message), std::string::npos)
          << "expected \"" << message << "\" in:\n"
          << daemon.Log();
    }
    EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.workers"), 0);
    EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.workflow_definitions"), 0);
  }

  // The processes whose parent is `parent`, from /proc.
  static std::set<int64_t> ChildrenOf(pid_t parent) {
    std::set<int64_t> children;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string name = entry.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream in(entry.path() / "stat");
      std::string stat;
      std::getline(in, stat);
      // pid (comm) state ppid ...: comm may hold spaces, so read after ')'.
      std::istringstream rest(stat.substr(stat.rfind(')') + 1));
      std::string state;
      pid_t ppid = 0;
      if (rest >> state >> ppid && ppid == parent) children.insert(std::stoll(name));
    }
    return children;
  }

  // The line of a file that holds text (1-based), or 0.
  static int LineOf(const std::string& file, const std::string& text) {
    std::ifstream in(file);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      if (line.find(text) != std::string::npos) return number;
    }
    return 0;
  }
};

TEST_F(StepIsolation, AWorkflowOnThreadsRunsInTheDaemonAndTheOthersInStepProcesses) {
  auto daemon = StartDaemonWith("process", "{on_threads: thread}");
  const std::string threaded = StartRun("on_threads");
  const std::string isolated = StartRun("in_processes");
  ASSERT_TRUE(WaitForStatus(threaded, "completed")) << daemon->Log();
  ASSERT_TRUE(WaitForStatus(isolated, "completed")) << daemon->Log();
  // The same plugin step, in the daemon for one workflow and in a step
  // process for the other.
  EXPECT_EQ(PidOf(threaded), daemon->pid());
  EXPECT_GT(PidOf(isolated), 0);
  EXPECT_NE(PidOf(isolated), daemon->pid());
  // The daemon loaded the plugin on_threads needs, and no other.
  const std::string maps = Maps(daemon->pid());
  EXPECT_NE(maps.find("/test_steps.so"), std::string::npos) << maps;
  EXPECT_EQ(maps.find("/noop.so"), std::string::npos) << maps;
  EXPECT_EQ(maps.find("/example.so"), std::string::npos) << maps;

  // A crashing step of a workflow in step processes fails its attempts, and
  // only them: the daemon and the workflow on threads go on.
  const std::string crash = StartRun("crashing");
  ASSERT_TRUE(WaitForStatus(crash, "failed")) << daemon->Log();
  EXPECT_EQ(LastCode(crash, "retried"), "crashed");
  EXPECT_EQ(LastCode(crash, "failed"), "crashed");
  EXPECT_EQ(RunEventCount(crash, "lease_expired"), 0);
  EXPECT_TRUE(daemon->Running());
  const std::string after = StartRun("on_threads");
  ASSERT_TRUE(WaitForStatus(after, "completed")) << daemon->Log();
  EXPECT_EQ(PidOf(after), daemon->pid());
  Stop(*daemon);
}

// A started daemon gets one idle step process per slot, so its first steps
// do not each wait for a process to start and load the plugins; the steps
// run in those processes.
TEST_F(StepIsolation, EverySlotGetsAnIdleStepProcessOnceTheDaemonStarts) {
  auto daemon = StartDaemonWith("process", "");
  std::set<int64_t> ready;
  // Options(2): two slots.
  EXPECT_TRUE(PollUntil(
      [&] {
        ready = ChildrenOf(daemon->pid());
        return ready.size() == 2;
      },
      10s, 20ms))
      << ready.size() << " step processes";
  const std::string first = StartRun("in_processes");
  const std::string second = StartRun("in_processes");
  ASSERT_TRUE(WaitForStatus(first, "completed")) << daemon->Log();
  ASSERT_TRUE(WaitForStatus(second, "completed")) << daemon->Log();
  EXPECT_EQ(ready.count(PidOf(first)), 1u);
  EXPECT_EQ(ready.count(PidOf(second)), 1u);
  EXPECT_EQ(ChildrenOf(daemon->pid()), ready);
  Stop(*daemon);
}

// Stopped while it still starts its slots' step processes, a daemon waits
// for them before it lets go of its logging: the warm-up used to log after
// the loggers were gone, and the daemon died of SIGSEGV instead of exiting 0.
TEST_F(StepIsolation, ADaemonStoppedWhileItsStepProcessesStartExitsCleanly) {
  DaemonOptions o = With("process", "");
  o.concurrency = 48;  // many more starts than the stop takes
  DaemonProcess daemon(o);
  ASSERT_TRUE(daemon.StartAndWaitReady()) << daemon.Log();
  daemon.Terminate();
  EXPECT_EQ(daemon.WaitExit(60s), 0) << daemon.Log();
}

TEST_F(StepIsolation, AWorkflowInStepProcessesSurvivesACrashUnderThreadIsolation) {
  auto daemon = StartDaemonWith("thread", "{crashing: process, in_processes: process}");
  const std::string crash = StartRun("crashing");
  ASSERT_TRUE(WaitForStatus(crash, "failed")) << daemon->Log();
  EXPECT_EQ(LastCode(crash, "failed"), "crashed");
  EXPECT_NE(RunColumn(crash, "error").find("SIGABRT"), std::string::npos)
      << RunColumn(crash, "error");
  EXPECT_EQ(RunEventCount(crash, "lease_expired"), 0);
  EXPECT_TRUE(daemon->Running());

  const std::string threaded = StartRun("on_threads");
  const std::string isolated = StartRun("in_processes");
  ASSERT_TRUE(WaitForStatus(threaded, "completed")) << daemon->Log();
  ASSERT_TRUE(WaitForStatus(isolated, "completed")) << daemon->Log();
  EXPECT_EQ(PidOf(threaded), daemon->pid());
  EXPECT_GT(PidOf(isolated), 0);
  EXPECT_NE(PidOf(isolated), daemon->pid());
  Stop(*daemon);
}

TEST_F(StepIsolation, AWorkflowNoFileDefinesStopsTheDaemonAndConfigCheck) {
  DaemonProcess daemon(With("process", "{on_thread: thread}"));
  const int line = LineOf(daemon.config_path(), "isolation_by_workflow");
  ASSERT_GT(line, 0);
  const std::string expected = daemon.config_path() + ":" + std::to_string(line) +
                               ": plugins.isolation_by_workflow.on_thread: names workflow "
                               "\"on_thread\", which no workflow file of workflows.paths defines";
  ExpectStartupError(daemon, {expected});

  const CommandResult check =
      RunCommand(CairnBinary(), {"config", "check", "--config", daemon.config_path()});
  EXPECT_EQ(check.exit_code, 2) << check.out << check.err;
  EXPECT_NE(check.err.find(expected), std::string::npos) << check.err;
  EXPECT_EQ(check.out, "");
}

TEST_F(StepIsolation, AValueThatIsNoIsolationNamesTheKeyAndItsLayer) {
  DaemonProcess daemon(With("process", "{on_threads: threads}"));
  const int line = LineOf(daemon.config_path(), "isolation_by_workflow");
  ASSERT_GT(line, 0);
  const std::string expected = daemon.config_path() + ":" + std::to_string(line) +
                               ": plugins.isolation_by_workflow.on_threads: must be one of";
  ExpectStartupError(daemon, {expected, "got \"threads\""});
  const CommandResult check =
      RunCommand(CairnBinary(), {"config", "check", "--config", daemon.config_path()});
  EXPECT_EQ(check.exit_code, 2) << check.out << check.err;
  EXPECT_NE(check.err.find(expected), std::string::npos) << check.err;

  DaemonOptions from_environment = With("process", "");
  from_environment.environment = {"CAIRN_PLUGINS_ISOLATION_BY_WORKFLOW={in_processes: fibre}"};
  DaemonProcess from_environment_daemon(from_environment);
  ExpectStartupError(
      from_environment_daemon,
      {"environment: CAIRN_PLUGINS_ISOLATION_BY_WORKFLOW: must be one of process | thread, "
       "got \"fibre\""});
}

TEST_F(StepIsolation, SighupRefusesAWorkflowOnThreadsThatNeedsAPluginTheDaemonDidNotLoad) {
  TempDir files("cairn-isolation");
  const std::string workflow = files.Write("on_threads.yaml",
                                           "workflows:\n  - name: on_threads\n    version: 1\n"
                                           "    steps:\n      - name: where\n"
                                           "        run: process_id\n");
  DaemonOptions options = With("process", "{on_threads: thread}");
  options.workflow_paths = {workflow};
  DaemonProcess daemon(options);
  ASSERT_TRUE(daemon.StartAndWaitReady()) << daemon.Log();

  // Version 2 adds a step of the noop plugin, which the daemon runs in step
  // processes only: on a thread it would have to load it now.
  files.Write("on_threads.yaml",
              "workflows:\n  - name: on_threads\n    version: 2\n"
              "    steps:\n      - name: where\n        run: process_id\n"
              "      - name: more\n        run: noop\n");
  daemon.Signal(SIGHUP);
  ASSERT_TRUE(daemon.WaitForLog("configuration not reloaded", 20s)) << daemon.Log();
  EXPECT_NE(daemon.Log().find("workflow on_threads v2, step more: run: plugin step \"noop\" runs "
                              "on a thread in workflow on_threads"),
            std::string::npos)
      << daemon.Log();
  EXPECT_NE(daemon.Log().find("restart the daemon"), std::string::npos) << daemon.Log();

  // The daemon goes on with version 1, on its threads.
  const std::string id = StartRun("on_threads");
  ASSERT_TRUE(WaitForStatus(id, "completed")) << daemon.Log();
  EXPECT_EQ(PidOf(id), daemon.pid());
  EXPECT_EQ(RunColumn(id, "definition_version"), "1");
  Stop(daemon);
}

}  // namespace
}  // namespace cairn::test
