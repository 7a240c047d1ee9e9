// The sandbox of systemd/cairn.service takes nothing away that cairn uses. A
// real daemon (metrics on, through CAIRN_METRICS_LISTEN) runs the example
// order workflow, serves a scrape, reloads on SIGHUP and drains on SIGTERM
// under strace; every system call it made must be in the unit's
// SystemCallFilter= (the allowed groups without the denied ones, expanded by
// systemd-analyze), every socket of a family RestrictAddressFamilies= allows,
// no file opened for writing (ProtectSystem=strict), no /proc entry but its
// own (ProcSubset=pid, ProtectProc=invisible) and no memory both writable and
// executable (MemoryDenyWriteExecute=). systemd cannot run the unit here, so
// this is how the suite knows the hardening does not break the daemon.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "daemon_fixture.hpp"
#include "http_get.hpp"

namespace cairn::test {
namespace {

using Json = nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The values of every `key=` line of a unit file, split at spaces.
std::vector<std::vector<std::string>> UnitValues(const std::string& unit, const std::string& key) {
  std::vector<std::vector<std::string>> values;
  std::istringstream lines(unit);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key + "=", 0) != 0) continue;
    std::istringstream words(line.substr(key.size() + 1));
    std::vector<std::string> value;
    for (std::string word; words >> word;) value.push_back(word);
    values.push_back(value);
  }
  return values;
}

// System calls of a set of systemd syscall groups (@name) and names, with
// nested groups expanded by `systemd-analyze syscall-filter`.
std::set<std::string> Expand(const std::vector<std::string>& entries) {
  std::set<std::string> calls;
  for (const std::string& entry : entries) {
    if (entry.empty() || entry[0] != '@') {
      calls.insert(entry);
      continue;
    }
    const CommandResult listed = RunCommand("/usr/bin/systemd-analyze", {"syscall-filter", entry});
    if (listed.exit_code != 0) throw std::runtime_error("systemd-analyze syscall-filter " + entry);
    std::istringstream lines(listed.out);
    std::string line;
    std::getline(lines, line);  // the group's own name
    std::vector<std::string> nested;
    while (std::getline(lines, line)) {
      const auto start = line.find_first_not_of(' ');
      if (start == std::string::npos || line[start] == '#') continue;
      nested.push_back(line.substr(start));
    }
    const std::set<std::string> more = Expand(nested);
    calls.insert(more.begin(), more.end());
  }
  return calls;
}

class UnitSandbox : public DaemonTest {
 protected:
  UnitSandbox() : DaemonTest("config/workflows/example.yaml") {}

  void SetUp() override {
    DaemonTest::SetUp();
    std::string ddl = ReadFile(SourceDir() + "/plugins/example/schema.sql");
    for (auto at = ddl.find("cairn_example"); at != std::string::npos;
         at = ddl.find("cairn_example", at)) {
      ddl.replace(at, std::string("cairn_example").size(), "\"" + schema() + "\"");
    }
    Sql(ddl);
  }
};

TEST_F(UnitSandbox, TheDaemonUsesNothingTheUnitTakesAway) {
  const std::string unit = ReadFile(SourceDir() + "/systemd/cairn.service");
  TempDir dir("cairn-sandbox");
  const std::string trace = dir.path().string() + "/trace";
  const uint16_t port = static_cast<uint16_t>(FindFreePort());
  // The daemon as the unit would run it, traced; CAIRN_METRICS_LISTEN turns
  // the metrics listener on (the harness's config leaves it off).
  const std::string wrapper = dir.Write(
      "cairn-traced", "#!/bin/sh\nexport CAIRN_METRICS_LISTEN=127.0.0.1:" + std::to_string(port) +
                          "\nexec strace -f -qq -o " + trace + " " + CairnBinary() + " \"$@\"\n");
  ASSERT_EQ(::chmod(wrapper.c_str(), 0755), 0);
  DaemonOptions options = Options(4);
  options.binary = wrapper;
  DaemonProcess daemon(options);
  ASSERT_TRUE(daemon.StartAndWaitReady(std::chrono::seconds(60))) << daemon.Log();
  std::smatch pid_match;
  const std::string log = daemon.Log();
  ASSERT_TRUE(std::regex_search(log, pid_match, std::regex(R"(info \[(\d+)\])"))) << log;
  const pid_t cairn = std::stoi(pid_match[1]);

  // Work that reaches every part: transactional steps, a wait and its
  // signal, compensations, a scrape, a reload, a drain.
  const Json order = {{"sku", "mug"}, {"quantity", 1}, {"amount_cents", 900}, {"schema", schema()}};
  Json paid = order;
  paid["order_id"] = "S-1";
  Json undeliverable = order;
  undeliverable["order_id"] = "S-2";
  undeliverable["undeliverable"] = true;
  const std::string first = StartRun("order", paid);
  const std::string second = StartRun("order", undeliverable);
  ASSERT_TRUE(WaitForStatus(first, "waiting", std::chrono::seconds(60))) << daemon.Log();
  ASSERT_TRUE(WaitForStatus(second, "waiting", std::chrono::seconds(60))) << daemon.Log();
  ASSERT_EQ(Cli({"signal", "payment:S-1"}).exit_code, 0);
  ASSERT_EQ(Cli({"signal", "payment:S-2"}).exit_code, 0);
  ASSERT_TRUE(WaitForStatus(first, "completed", std::chrono::seconds(60))) << daemon.Log();
  ASSERT_TRUE(WaitForStatus(second, "failed", std::chrono::seconds(60))) << daemon.Log();
  EXPECT_EQ(HttpGet(port, "/metrics").status, 200)
      << "CAIRN_METRICS_LISTEN=127.0.0.1:" << port << " did not serve /metrics\n"
      << daemon.Log();
  ASSERT_EQ(::kill(cairn, SIGHUP), 0);
  ASSERT_TRUE(daemon.WaitForLog("SIGHUP: reloaded", std::chrono::seconds(20))) << daemon.Log();
  ASSERT_EQ(::kill(cairn, SIGTERM), 0);
  ASSERT_EQ(daemon.WaitExit(std::chrono::seconds(60)), 0) << daemon.Log();

  // The unit's rules.
  std::set<std::string> allowed;
  std::set<std::string> denied;
  for (const auto& value : UnitValues(unit, "SystemCallFilter")) {
    ASSERT_FALSE(value.empty());
    std::vector<std::string> entries = value;
    const bool deny = entries[0][0] == '~';
    if (deny) entries[0].erase(0, 1);
    const std::set<std::string> calls = Expand(entries);
    (deny ? denied : allowed).insert(calls.begin(), calls.end());
  }
  ASSERT_FALSE(allowed.empty()) << "the unit has no SystemCallFilter= allow list";
  ASSERT_FALSE(denied.empty()) << "the unit denies no system call group";
  const auto families = UnitValues(unit, "RestrictAddressFamilies");
  ASSERT_EQ(families.size(), 1u);
  const std::set<std::string> allowed_families(families[0].begin(), families[0].end());

  // What the daemon did, from the trace of all its threads.
  std::set<std::string> used;
  std::vector<std::string> problems;
  const std::regex call(R"(^\d+\s+([a-z_0-9]+)\()");
  const std::regex socket_family(R"(socket\((AF_[A-Z0-9]+),)");
  const std::regex opened(R"(open(?:at)?\((?:AT_FDCWD, )?\"([^\"]*)\", ([A-Z_|]+))");
  const std::regex own_proc("^/proc/(self|thread-self|" + std::to_string(cairn) + ")(/|$)");
  std::ifstream lines(trace);
  std::string line;
  std::smatch match;
  while (std::getline(lines, line)) {
    if (!std::regex_search(line, match, call)) continue;
    const std::string name = match[1];
    used.insert(name);
    if (std::regex_search(line, match, socket_family) && !allowed_families.count(match[1])) {
      problems.push_back("a socket of family " + match[1].str() + ": " + line);
    }
    if (std::regex_search(line, match, opened)) {
      const std::string path = match[1];
      const std::string flags = match[2];
      const bool writes = flags.find("O_WRONLY") != std::string::npos ||
                          flags.find("O_RDWR") != std::string::npos ||
                          flags.find("O_CREAT") != std::string::npos;
      if (writes && path != "/dev/null") problems.push_back("opens for writing: " + line);
      // glibc's malloc asks once whether overcommit is strict before it
      // shrinks a thread's arena; under ProcSubset=pid the open fails and it
      // keeps its default (not strict), which is what that file says here.
      const bool malloc_probe = path == "/proc/sys/vm/overcommit_memory";
      if (path.rfind("/proc/", 0) == 0 && !std::regex_search(path, own_proc) && !malloc_probe) {
        problems.push_back("reads /proc beyond its own entries: " + line);
      }
    }
    if ((name == "mmap" || name == "mprotect") &&
        line.find("PROT_WRITE|PROT_EXEC") != std::string::npos) {
      problems.push_back("writable and executable memory: " + line);
    }
  }
  ASSERT_GT(used.size(), 20u) << "the trace holds too little: " << trace;
  for (const std::string& name : used) {
    if (denied.count(name)) problems.push_back("calls " + name + ", which the unit denies");
    if (!allowed.count(name))
      problems.push_back("calls " + name + ", which the unit does not allow");
  }
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
}

}  // namespace
}  // namespace cairn::test
