// The log lines of a real daemon, in JSON: every line it and its step
// processes write parses as JSON while steps fail with messages full of
// quotes, backslashes, newlines and control bytes; lines about a run carry
// run_id, workflow, step and attempt as fields; and the database password
// appears in no log line, command line or environment of its processes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "daemon_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kPassword = "s3cret-never-logged";

class Logging : public DaemonTest {
 protected:
  Logging() : DaemonTest("tests/workflows/logging.yaml") {}

  DaemonOptions Options(int concurrency) const override {
    DaemonOptions o = DaemonTest::Options(concurrency);
    o.log_format = "json";
    // The harness trusts every connection; the password only has to be kept.
    o.url = url();
    o.url.insert(o.url.find('@'), std::string(":") + kPassword);
    return o;
  }

  static std::string ReadAll(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // The daemon and every process below it.
  static std::vector<pid_t> ProcessTree(pid_t root) {
    std::vector<pid_t> tree{root};
    for (size_t i = 0; i < tree.size(); ++i) {
      const std::string tasks = "/proc/" + std::to_string(tree[i]) + "/task";
      std::error_code ec;
      for (const auto& task : fs::directory_iterator(tasks, ec)) {
        std::istringstream children(ReadAll(task.path().string() + "/children"));
        for (pid_t child; children >> child;) tree.push_back(child);
      }
    }
    return tree;
  }
};

TEST_F(Logging, EveryLineIsJsonAndLinesAboutARunCarryItsFields) {
  auto daemon = StartDaemon(2);
  const std::vector<std::string> messages = {
      "card \"declined\" by C:\\bank\\gateway", "line one\nline two\r\n\ttabbed",
      std::string("bell \x07 escape \x1b[2J end"), "ünïcödé \u2028 and \\u0000 spelled out"};
  std::vector<std::string> ids;
  for (const auto& message : messages) {
    ids.push_back(StartRun("log_and_fail", {{"message", message}, {"code", "quoted \"code\""}}));
  }
  for (const auto& id : ids) ASSERT_TRUE(WaitForStatus(id, "failed")) << daemon->Log();

  // The step processes are running now: nothing of theirs holds the secret.
  for (const pid_t pid : ProcessTree(daemon->pid())) {
    const std::string proc = "/proc/" + std::to_string(pid);
    EXPECT_EQ(ReadAll(proc + "/cmdline").find(kPassword), std::string::npos) << pid;
    EXPECT_EQ(ReadAll(proc + "/environ").find(kPassword), std::string::npos) << pid;
  }
  EXPECT_GT(ProcessTree(daemon->pid()).size(), 1u) << "no step process was found";
  Stop(*daemon);

  const std::string log = daemon->Log();
  EXPECT_EQ(log.find(kPassword), std::string::npos);
  std::istringstream lines(log);
  int parsed = 0;
  std::vector<int> about_run(ids.size(), 0);
  for (std::string line; std::getline(lines, line);) {
    Json object;
    ASSERT_NO_THROW(object = Json::parse(line)) << "not JSON: " << line;
    ++parsed;
    ASSERT_TRUE(object.contains("message") && object.contains("level")) << line;
    if (!object.contains("run_id")) continue;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (object["run_id"] != ids[i]) continue;
      ++about_run[i];
      EXPECT_EQ(object["workflow"], "log_and_fail") << line;
      EXPECT_EQ(object["step"], "speak") << line;
      EXPECT_EQ(object["attempt"], 1) << line;
    }
  }
  EXPECT_GT(parsed, 5);
  for (size_t i = 0; i < ids.size(); ++i) {
    // The plugin's warning (from its step process) and the daemon's line
    // about the failure.
    EXPECT_GE(about_run[i], 2) << "run " << ids[i] << " in:\n" << log;
  }
}

}  // namespace
}  // namespace cairn::test
