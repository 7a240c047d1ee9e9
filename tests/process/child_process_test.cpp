// The child processes and scratch folders of the bench and the test harness,
// tried on /bin/sh.
#include "child_process.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "temp_dir.hpp"

namespace cairn::process {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> Shell(const std::string& script) { return {"/bin/sh", "-c", script}; }

fs::perms Mode(const fs::path& path) { return fs::status(path).permissions() & fs::perms::all; }

TEST(ChildProcess, ReportsTheExitCodeAndKeepsOutputAndErrorApart) {
  TempDir dir("cairn-child");
  ChildProcess child(Shell("echo out; echo err >&2; exit 7"), ChildEnvironment(),
                     dir.path() / "out", dir.path() / "err");
  EXPECT_EQ(child.Wait(seconds(10)), 7);
  EXPECT_FALSE(child.Running());
  EXPECT_EQ(ReadFile(child.output_path()), "out\n");
  EXPECT_EQ(ReadFile(child.error_path()), "err\n");
}

TEST(ChildProcess, SharesOneFileWhenNoErrorFileIsGiven) {
  TempDir dir("cairn-child");
  ChildProcess child(Shell("echo out; echo err >&2"), ChildEnvironment(), dir.path() / "log");
  EXPECT_EQ(child.Wait(seconds(10)), 0);
  EXPECT_EQ(child.error_path(), child.output_path());
  EXPECT_EQ(ReadFile(child.output_path()), "out\nerr\n");
}

TEST(ChildProcess, WaitGivesUpOnARunningChildAndSignalsEndIt) {
  TempDir dir("cairn-child");
  ChildProcess child(Shell("exec sleep 30"), ChildEnvironment(), dir.path() / "log");
  EXPECT_EQ(child.Wait(milliseconds(50)), std::nullopt);
  EXPECT_TRUE(child.Running());
  child.Signal(SIGTERM);
  EXPECT_EQ(child.Wait(seconds(10)), 128 + SIGTERM);
  // Reaped: a second signal goes nowhere, the code stays.
  child.Signal(SIGTERM);
  EXPECT_EQ(child.Kill(), 128 + SIGTERM);
}

TEST(ChildProcess, KillEndsAChildThatIgnoresTerm) {
  TempDir dir("cairn-child");
  ChildProcess child(Shell("trap '' TERM; echo ready; while :; do sleep 1; done"),
                     ChildEnvironment(), dir.path() / "log");
  for (int i = 0; i < 1000 && ReadFile(child.output_path()).empty(); ++i) {
    EXPECT_EQ(child.Wait(milliseconds(10)), std::nullopt);
  }
  child.Signal(SIGTERM);
  EXPECT_EQ(child.Wait(milliseconds(200)), std::nullopt);
  EXPECT_EQ(child.Kill(), 128 + SIGKILL);
}

TEST(ChildProcess, AnExecutableThatCannotStartExitsWith127AndSaysWhy) {
  TempDir dir("cairn-child");
  ChildProcess child({dir.path() / "no-such-program"}, ChildEnvironment(), dir.path() / "log");
  EXPECT_EQ(child.Wait(seconds(10)), 127);
  EXPECT_THAT(child.OutputTail(), HasSubstr("no-such-program: No such file or directory"));
}

TEST(ChildProcess, OutputTailKeepsTheEnd) {
  TempDir dir("cairn-child");
  ChildProcess child(Shell("printf 'abcdefghij'"), ChildEnvironment(), dir.path() / "log");
  ASSERT_EQ(child.Wait(seconds(10)), 0);
  EXPECT_EQ(child.OutputTail(4), "...ghij");
  EXPECT_EQ(child.OutputTail(100), "abcdefghij");
}

TEST(ChildProcess, TheChildGetsOnlyTheGivenEnvironmentAndNoInput) {
  TempDir dir("cairn-child");
  ChildProcess child(Shell("echo \"$ONLY\"; env | wc -l; cat"), {"ONLY=this"}, dir.path() / "log");
  ASSERT_EQ(child.Wait(seconds(10)), 0);
  // sh adds PWD (and maybe SHLVL, _) of its own; nothing of ours is there.
  const std::string output = ReadFile(child.output_path());
  EXPECT_THAT(output, HasSubstr("this\n"));
  EXPECT_LT(std::stoi(output.substr(output.find('\n') + 1)), 5);
}

TEST(ChildEnvironment, DropsCairnSettingsAndTheNotifySocketAndReplacesExtras) {
  ::setenv("CAIRN_DATABASE_URL", "postgresql://elsewhere/db", 1);
  ::setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1);
  ::setenv("CAIRN_CHILD_TEST_LANG", "x", 1);
  ::setenv("CHILD_TEST_KEPT", "kept", 1);
  ::setenv("CHILD_TEST_REPLACED", "old", 1);
  const std::vector<std::string> env =
      ChildEnvironment({"CHILD_TEST_REPLACED=new", "CAIRN_GIVEN=yes"});
  ::unsetenv("CAIRN_DATABASE_URL");
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("CAIRN_CHILD_TEST_LANG");
  ::unsetenv("CHILD_TEST_KEPT");
  ::unsetenv("CHILD_TEST_REPLACED");
  const auto has = [&](const std::string& entry) {
    return std::find(env.begin(), env.end(), entry) != env.end();
  };
  EXPECT_TRUE(has("CHILD_TEST_KEPT=kept"));
  EXPECT_TRUE(has("CHILD_TEST_REPLACED=new"));
  EXPECT_FALSE(has("CHILD_TEST_REPLACED=old"));
  EXPECT_TRUE(has("CAIRN_GIVEN=yes"));  // given on purpose: kept
  for (const std::string& entry : env) {
    EXPECT_THAT(entry, Not(HasSubstr("CAIRN_DATABASE_URL=")));
    EXPECT_THAT(entry, Not(HasSubstr("CAIRN_CHILD_TEST_LANG=")));
    EXPECT_THAT(entry, Not(HasSubstr("NOTIFY_SOCKET=")));
  }
}

TEST(TempDir, IsPrivateUnlessAskedAndGoesWithItsFiles) {
  fs::path kept;
  {
    TempDir dir("cairn-temp");
    kept = dir.path();
    EXPECT_EQ(kept.filename().string().rfind("cairn-temp-", 0), 0u) << kept;
    EXPECT_EQ(Mode(kept), fs::perms::owner_all);
    const fs::path file = dir.Write("a/b/c.txt", "text");
    EXPECT_EQ(file, kept / "a/b/c.txt");
    EXPECT_EQ(ReadFile(file), "text");
    // A folder the test closed to itself is removed all the same.
    fs::permissions(kept, fs::perms::none);
  }
  EXPECT_FALSE(fs::exists(kept));
  TempDir open("cairn-temp", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                 fs::perms::others_read | fs::perms::others_exec);
  EXPECT_EQ(Mode(open.path()), fs::perms(0755));
}

TEST(TempDir, APrivateFileIsTheOwnersAloneEvenWhenItExisted) {
  const mode_t umask_before = ::umask(022);
  TempDir dir("cairn-temp");
  const fs::path shared = dir.Write("config.yaml", "first");
  EXPECT_EQ(Mode(shared), fs::perms(0644));
  const fs::path file = dir.WritePrivate("config.yaml", "url: secret");
  ::umask(umask_before);
  EXPECT_EQ(file, shared);
  EXPECT_EQ(Mode(file), fs::perms(0600));
  EXPECT_EQ(ReadFile(file), "url: secret");  // truncated, not appended
}

TEST(TempDir, WriteNamesTheFileItCannotWrite) {
  TempDir dir("cairn-temp");
  dir.Write("taken", "a file, not a folder");
  try {
    dir.Write("taken/inside", "x");
    FAIL() << "wrote below a file";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr((dir.path() / "taken/inside").string()));
  }
}

}  // namespace
}  // namespace cairn::process
