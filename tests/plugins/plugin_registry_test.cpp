// PluginRegistry and the C ABI adapter, through the real loader and the real
// the built plugins (noop, example, test_steps) and the
// fixtures in its fixtures/ folder. No database: a transactional step
// gets RecordingSql, this test's own StepSql, which records statements. The
// SDK is also driven directly against a fake (older) host table.
#include "plugin_registry.hpp"

#include <cairn/plugin.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cairn/sdk.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "temp_dir.hpp"
#include "test_paths.hpp"

namespace cairn {
namespace {

namespace fs = std::filesystem;

const std::string kPluginDir = cairn::test::BuiltPluginDir();
const std::string kFixtureDir = kPluginDir + "/fixtures";

std::string PluginFile(const std::string& name) { return kPluginDir + "/" + name + ".so"; }
std::string FixtureFile(const std::string& name) { return kFixtureDir + "/" + name + ".so"; }

std::string Version(int major, int minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// The message of the PluginError that `load` throws; fails the test if none.
std::string LoadError(const std::function<void()>& load) {
  try {
    load();
  } catch (const PluginError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a PluginError";
  return "";
}

// Records every statement; answers with `respond` (default: one row {"n": k}
// for the k-th statement).
class RecordingSql : public StepSql {
 public:
  struct Statement {
    std::string sql;
    Json params;
  };

  Json Execute(const std::string& sql, const Json& params) override {
    statements.push_back({sql, params});
    if (respond) return respond(sql, params);
    return Json::array({{{"n", statements.size()}}});
  }

  std::vector<Statement> statements;
  std::function<Json(const std::string&, const Json&)> respond;
};

// Invokes a step the way the executor does.
struct Invocation {
  Json input = Json::object();
  Json context = Json::object();
  int attempt = 1;
  StepSql* sql = nullptr;

  StepOutcome Run(PluginRegistry& registry, const std::string& step) const {
    std::shared_ptr<Step> found = registry.Find(step);
    if (found == nullptr) throw std::runtime_error("no step " + step);
    StepCall call;
    call.run_id = "run-1";
    call.workflow = "wf";
    call.step = step;
    call.attempt = attempt;
    call.input = &input;
    call.context = &context;
    call.sql = sql;
    return found->Invoke(call);
  }
};

using process::TempDir;

void Chmod(const fs::path& path, mode_t mode) { ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path; }

fs::path CopyPlugin(const std::string& from, const fs::path& dir, mode_t mode = 0644) {
  const fs::path to = dir / fs::path(from).filename();
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  EXPECT_EQ(::chmod(to.c_str(), mode), 0);
  return to;
}

class PluginRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override { registry_.Load({kPluginDir}); }
  PluginRegistry registry_;
};

// ---- Loading ----------------------------------------------------------------

TEST_F(PluginRegistryTest, LoadsEveryPluginOfTheDirectory) {
  std::vector<std::string> names;
  for (const PluginInfo& info : registry_.List()) {
    names.push_back(info.name);
    EXPECT_EQ(info.abi_major, CAIRN_ABI_MAJOR);
    EXPECT_EQ(fs::path(info.file), fs::canonical(PluginFile(info.name)));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"example", "noop", "test_steps"}));

  const std::vector<PluginInfo> list = registry_.List();
  EXPECT_EQ(list[0].version, "1.0.0");
  EXPECT_EQ(list[0].steps,
            (std::vector<std::string>{"reserve_stock", "charge_payment", "await_payment", "ship",
                                      "release_stock", "refund_payment"}));
  EXPECT_EQ(list[1].steps, (std::vector<std::string>{"noop", "noop_complete", "noop_wait"}));

  ASSERT_NE(registry_.Find("noop"), nullptr);
  EXPECT_EQ(registry_.Find("noop")->name(), "noop");
  EXPECT_EQ(registry_.Find("noop")->plugin(), "noop");
  EXPECT_EQ(registry_.Find("charge_payment")->plugin(), "example");
  EXPECT_EQ(registry_.Find("no_such_step"), nullptr);
  const std::vector<std::string> steps = registry_.StepNames();
  EXPECT_TRUE(std::is_sorted(steps.begin(), steps.end()));
  EXPECT_NE(std::find(steps.begin(), steps.end(), "fail_always"), steps.end());
}

TEST(PluginRegistry, LoadingTheSameFileTwiceIsANoOp) {
  PluginRegistry registry;
  registry.LoadFile(PluginFile("noop"));
  registry.Load({PluginFile("noop"), kPluginDir + "/./noop.so"});
  EXPECT_EQ(registry.List().size(), 1u);
}

TEST(PluginRegistry, FixturesAreNotInThePluginDirectory) {
  // Loading the plugin directory must never pick up a fixture.
  EXPECT_TRUE(fs::exists(FixtureFile("wrong_major")));
  EXPECT_FALSE(fs::exists(PluginFile("wrong_major")));
}

TEST(PluginRegistry, RefusesAnotherMajorNamingBothVersions) {
  PluginRegistry registry;
  const std::string message = LoadError([&] { registry.LoadFile(FixtureFile("wrong_major")); });
  EXPECT_NE(message.find(FixtureFile("wrong_major")), std::string::npos) << message;
  EXPECT_NE(message.find("ABI " + Version(CAIRN_ABI_MAJOR + 1, CAIRN_ABI_MINOR)), std::string::npos)
      << message;
  EXPECT_NE(message.find("ABI " + Version(CAIRN_ABI_MAJOR, CAIRN_ABI_MINOR)), std::string::npos)
      << message;
  EXPECT_TRUE(registry.List().empty());
  EXPECT_EQ(registry.Find("fixture_step"), nullptr);
}

TEST(PluginRegistry, RefusesANewerMinorNamingBothVersions) {
  PluginRegistry registry;
  const std::string message = LoadError([&] { registry.LoadFile(FixtureFile("newer_minor")); });
  EXPECT_NE(message.find(FixtureFile("newer_minor")), std::string::npos) << message;
  EXPECT_NE(message.find("ABI " + Version(CAIRN_ABI_MAJOR, CAIRN_ABI_MINOR + 1)), std::string::npos)
      << message;
  EXPECT_NE(message.find("ABI " + Version(CAIRN_ABI_MAJOR, CAIRN_ABI_MINOR)), std::string::npos)
      << message;
  EXPECT_TRUE(registry.List().empty());
}

TEST(PluginRegistry, AcceptsEveryOlderMinorOfTheSameMajor) {
  // Plugins built for ABI 1.0 and 1.1 keep loading on a 1.2 host (the
  // fixture claims the minor the environment gives it).
  for (int minor = 0; minor <= CAIRN_ABI_MINOR; ++minor) {
    ::setenv("CAIRN_TEST_FIXTURE_ABI_MINOR", std::to_string(minor).c_str(), 1);
    PluginRegistry registry;
    registry.LoadFile(FixtureFile("duplicate_step"));
    ::unsetenv("CAIRN_TEST_FIXTURE_ABI_MINOR");
    ASSERT_EQ(registry.List().size(), 1u) << minor;
    EXPECT_EQ(registry.List()[0].abi_major, CAIRN_ABI_MAJOR);
    EXPECT_EQ(registry.List()[0].abi_minor, minor);
    const StepOutcome o = Invocation{}.Run(registry, "noop");
    EXPECT_EQ(o.kind, OutcomeKind::kNext) << minor;
  }
  EXPECT_GE(CAIRN_ABI_MINOR, 2);
}

TEST(PluginRegistry, RefusesAMissingFileOrDirectory) {
  PluginRegistry registry;
  std::string message = LoadError([&] { registry.LoadFile("/nonexistent/cairn/x.so"); });
  EXPECT_NE(message.find("/nonexistent"), std::string::npos) << message;
  EXPECT_NE(message.find("no such file"), std::string::npos) << message;

  message = LoadError([&] { registry.LoadDirectory(kPluginDir + "/no-such-dir"); });
  EXPECT_NE(message.find(kPluginDir + "/no-such-dir"), std::string::npos) << message;

  message = LoadError([&] { registry.Load({kPluginDir + "/missing.so"}); });
  EXPECT_NE(message.find(kPluginDir + "/missing.so"), std::string::npos) << message;

  message = LoadError([&] { registry.LoadDirectory(PluginFile("noop")); });
  EXPECT_NE(message.find("not a directory"), std::string::npos) << message;
}

TEST(PluginRegistry, RefusesAFileThatIsNotAPlugin) {
  PluginRegistry registry;
  std::string message = LoadError([&] { registry.LoadFile(FixtureFile("no_entry")); });
  EXPECT_NE(message.find(FixtureFile("no_entry")), std::string::npos) << message;
  EXPECT_NE(message.find(CAIRN_PLUGIN_ENTRY_SYMBOL), std::string::npos) << message;

  message = LoadError([&] { registry.LoadFile(FixtureFile("null_descriptor")); });
  EXPECT_NE(message.find("no descriptor"), std::string::npos) << message;

  TempDir dir;
  const fs::path junk = dir.path() / "junk.so";
  { std::ofstream(junk) << "not an ELF file"; }
  Chmod(junk, 0644);
  message = LoadError([&] { registry.LoadFile(junk.string()); });
  EXPECT_NE(message.find("dlopen failed"), std::string::npos) << message;
  EXPECT_NE(message.find(junk.string()), std::string::npos) << message;
  EXPECT_TRUE(registry.List().empty());
}

TEST(PluginRegistry, RefusesADuplicateStepNamingBothPlugins) {
  PluginRegistry registry;
  registry.LoadFile(PluginFile("noop"));
  const std::string message = LoadError([&] { registry.LoadFile(FixtureFile("duplicate_step")); });
  EXPECT_NE(message.find("'noop'"), std::string::npos) << message;
  EXPECT_NE(message.find("plugin 'duplicate_step'"), std::string::npos) << message;
  EXPECT_NE(message.find("plugin 'noop'"), std::string::npos) << message;
  EXPECT_NE(message.find(FixtureFile("duplicate_step")), std::string::npos) << message;
  EXPECT_NE(message.find(fs::canonical(PluginFile("noop")).string()), std::string::npos) << message;
  // All or nothing: the refused plugin left no trace.
  ASSERT_EQ(registry.List().size(), 1u);
  EXPECT_EQ(registry.Find("noop")->plugin(), "noop");
}

TEST(PluginRegistry, RefusesADuplicatePluginName) {
  PluginRegistry registry;
  registry.LoadFile(PluginFile("example"));
  const std::string message = LoadError([&] { registry.LoadFile(FixtureFile("duplicate_name")); });
  EXPECT_NE(message.find("'example'"), std::string::npos) << message;
  EXPECT_NE(message.find(fs::canonical(PluginFile("example")).string()), std::string::npos)
      << message;
  EXPECT_EQ(registry.List().size(), 1u);
}

// ---- Trust checks -----------------------------------------------------------

TEST(PluginTrust, RefusesAWorldWritableDirectory) {
  TempDir dir;
  const fs::path copy = CopyPlugin(PluginFile("noop"), dir.path());
  Chmod(dir.path(), 0777);
  PluginRegistry registry;
  std::string message = LoadError([&] { registry.LoadDirectory(dir.path().string()); });
  EXPECT_NE(message.find("directory " + dir.path().string() + " is writable by others"),
            std::string::npos)
      << message;
  message = LoadError([&] { registry.LoadFile(copy.string()); });
  EXPECT_NE(message.find("directory " + dir.path().string() + " is writable by others"),
            std::string::npos)
      << message;
  EXPECT_TRUE(registry.List().empty());
}

TEST(PluginTrust, RefusesAGroupWritableFile) {
  TempDir dir;
  Chmod(dir.path(), 0755);
  const fs::path copy = CopyPlugin(PluginFile("noop"), dir.path(), 0664);
  PluginRegistry registry;
  const std::string message = LoadError([&] { registry.LoadFile(copy.string()); });
  EXPECT_NE(message.find("file " + copy.string() + " is writable by its group"), std::string::npos)
      << message;
  EXPECT_NE(message.find("0664"), std::string::npos) << message;
}

TEST(PluginTrust, RefusesAGroupWritableAncestor) {
  TempDir dir;
  const fs::path sub = dir.path() / "sub";
  fs::create_directory(sub);
  Chmod(sub, 0755);
  const fs::path copy = CopyPlugin(PluginFile("noop"), sub);
  Chmod(dir.path(), 0770);
  PluginRegistry registry;
  const std::string message = LoadError([&] { registry.LoadFile(copy.string()); });
  EXPECT_NE(message.find("directory " + dir.path().string() + " is writable by its group"),
            std::string::npos)
      << message;
}

TEST(PluginTrust, AcceptsAStickyAncestorButNotAStickyPluginDirectory) {
  TempDir dir;
  const fs::path sticky = dir.path() / "sticky";
  const fs::path safe = sticky / "safe";
  fs::create_directories(safe);
  Chmod(safe, 0755);
  CopyPlugin(PluginFile("noop"), safe);
  Chmod(sticky, 01777);  // like /tmp
  Chmod(dir.path(), 0755);

  PluginRegistry registry;
  registry.LoadDirectory(safe.string());
  ASSERT_EQ(registry.List().size(), 1u);
  EXPECT_EQ(registry.List()[0].file, (safe / "noop.so").string());

  CopyPlugin(PluginFile("example"), sticky);
  PluginRegistry other;
  const std::string message = LoadError([&] { other.LoadDirectory(sticky.string()); });
  EXPECT_NE(message.find("directory " + sticky.string() + " is writable by others"),
            std::string::npos)
      << message;
}

TEST(PluginTrust, ChecksTheDirectoriesASymlinkLeadsThrough) {
  TempDir dir;
  const fs::path open_dir = dir.path() / "open";
  const fs::path safe_dir = dir.path() / "safe";
  fs::create_directories(open_dir);
  fs::create_directories(safe_dir);
  Chmod(dir.path(), 0755);
  Chmod(safe_dir, 0755);

  // A symlink in a trusted directory to a trusted file: loads the target.
  fs::create_symlink(fs::canonical(PluginFile("noop")), safe_dir / "noop.so");
  PluginRegistry registry;
  registry.LoadFile((safe_dir / "noop.so").string());
  ASSERT_EQ(registry.List().size(), 1u);
  EXPECT_EQ(registry.List()[0].file, fs::canonical(PluginFile("noop")).string());

  // The same symlink in a directory others can write (they could repoint it).
  fs::create_symlink(fs::canonical(PluginFile("example")), open_dir / "example.so");
  Chmod(open_dir, 0777);
  const std::string message =
      LoadError([&] { registry.LoadFile((open_dir / "example.so").string()); });
  EXPECT_NE(message.find("directory " + open_dir.string() + " is writable by others"),
            std::string::npos)
      << message;
}

TEST(PluginTrust, RefusesAFileOwnedBySomebodyElse) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  TempDir dir;
  Chmod(dir.path(), 0755);
  const fs::path copy = CopyPlugin(PluginFile("noop"), dir.path());
  ASSERT_EQ(::chown(copy.c_str(), 65534, 65534), 0);
  PluginRegistry registry;
  const std::string message = LoadError([&] { registry.LoadFile(copy.string()); });
  EXPECT_NE(message.find(copy.string() + " is owned by uid 65534"), std::string::npos) << message;
}

TEST(PluginTrust, ChecksBeforeDlopenRunsConstructors) {
  TempDir dir;
  const fs::path marker = dir.path() / "constructor-ran";
  ::setenv("CAIRN_TEST_MARKER", marker.c_str(), 1);
  const fs::path open_dir = dir.path() / "open";
  fs::create_directory(open_dir);
  const fs::path copy = CopyPlugin(FixtureFile("constructor_marker"), open_dir);
  Chmod(open_dir, 0777);

  PluginRegistry registry;
  LoadError([&] { registry.LoadFile(copy.string()); });
  EXPECT_FALSE(fs::exists(marker)) << "the plugin's constructor ran before the trust check";

  // Control: from a trusted path the constructor does run.
  Chmod(open_dir, 0755);
  registry.LoadFile(copy.string());
  EXPECT_TRUE(fs::exists(marker));
  ::unsetenv("CAIRN_TEST_MARKER");
}

// ---- Steps through the adapter ------------------------------------------------

TEST_F(PluginRegistryTest, NoopContinuesWithNothingSet) {
  const StepOutcome outcome = Invocation{}.Run(registry_, "noop");
  EXPECT_EQ(outcome.kind, OutcomeKind::kNext);
  EXPECT_EQ(outcome.context_updates, Json::object());

  const StepOutcome done = Invocation{}.Run(registry_, "noop_complete");
  EXPECT_EQ(done.kind, OutcomeKind::kComplete);
  EXPECT_EQ(done.output, Json::object());
}

TEST_F(PluginRegistryTest, ExampleReserveStockWritesAReservation) {
  RecordingSql sql;
  Invocation inv;
  inv.input = {{"order_id", "A-1"}, {"sku", "mug"}, {"quantity", 2}, {"schema", "shop"}};
  inv.sql = &sql;
  const StepOutcome outcome = inv.Run(registry_, "reserve_stock");
  EXPECT_EQ(outcome.kind, OutcomeKind::kNext) << outcome.error_message;
  EXPECT_EQ(outcome.context_updates, (Json{{"reserved", {{"sku", "mug"}, {"quantity", 2}}}}));
  ASSERT_EQ(sql.statements.size(), 1u);
  EXPECT_EQ(sql.statements[0].sql,
            "INSERT INTO \"shop\".reservations (order_id, sku, quantity) VALUES ($1, $2, $3)");
  EXPECT_EQ(sql.statements[0].params, Json::array({"A-1", "mug", 2}));

  inv.input = {{"order_id", "A-1"}};
  const StepOutcome bad = inv.Run(registry_, "reserve_stock");
  EXPECT_EQ(bad.kind, OutcomeKind::kFail);
  EXPECT_FALSE(bad.retryable);
  EXPECT_EQ(bad.error_code, "bad_input");
}

TEST_F(PluginRegistryTest, ExampleReserveStockWritesThroughTheStepTransaction) {
  RecordingSql sql;
  Invocation inv;
  inv.input = {{"order_id", "A-1"}, {"sku", "mug"}, {"quantity", 2}, {"schema", "shop"}};
  inv.sql = &sql;
  const StepOutcome outcome = inv.Run(registry_, "reserve_stock");
  EXPECT_EQ(outcome.kind, OutcomeKind::kNext) << outcome.error_message;
  EXPECT_EQ(outcome.context_updates, (Json{{"reserved", {{"sku", "mug"}, {"quantity", 2}}}}));
  ASSERT_EQ(sql.statements.size(), 1u);
  EXPECT_EQ(sql.statements[0].sql,
            "INSERT INTO \"shop\".reservations (order_id, sku, quantity) VALUES ($1, $2, $3)");
  EXPECT_EQ(sql.statements[0].params, Json::array({"A-1", "mug", 2}));
}

// The example's charge goes through the idempotency store or not at all:
// where the host offers none, the step fails for good before it charges or
// records anything (tests/daemon/example_pgtest.cpp charges for real).
TEST_F(PluginRegistryTest, ExampleChargePaymentChargesOnlyThroughTheIdempotencyStore) {
  RecordingSql sql;
  Invocation inv;
  inv.input = {{"order_id", "A-1"}, {"amount_cents", 1800}, {"schema", "shop"}};
  inv.sql = &sql;
  const StepOutcome outcome = inv.Run(registry_, "charge_payment");
  EXPECT_EQ(outcome.kind, OutcomeKind::kFail);
  EXPECT_FALSE(outcome.retryable);
  EXPECT_EQ(outcome.error_code, "idempotency_refused");
  EXPECT_TRUE(sql.statements.empty());
  EXPECT_EQ(outcome.context_updates, Json::object());
}

TEST_F(PluginRegistryTest, SqlIsRefusedOutsideATransactionalStep) {
  Invocation inv;
  inv.input = {{"order_id", "A-1"}, {"sku", "mug"}, {"quantity", 2}};
  const StepOutcome outcome = inv.Run(registry_, "reserve_stock");
  EXPECT_EQ(outcome.kind, OutcomeKind::kFail);
  EXPECT_FALSE(outcome.retryable);
  EXPECT_EQ(outcome.error_code, "sql_refused");
  EXPECT_NE(outcome.error_message.find("not running as a transactional step"), std::string::npos)
      << outcome.error_message;
}

TEST_F(PluginRegistryTest, ExampleAwaitPaymentWaitsShipCompletesReleaseGivesBack) {
  RecordingSql sql;
  Invocation inv;
  inv.input = {{"order_id", "A-1"}};
  const StepOutcome wait = inv.Run(registry_, "await_payment");
  EXPECT_EQ(wait.kind, OutcomeKind::kWait);
  EXPECT_EQ(wait.wait_event, "payment_confirmed");
  EXPECT_EQ(wait.wait_key, "payment:A-1");
  EXPECT_EQ(wait.wait_timeout_ms, 24 * 3600 * 1000);

  inv.sql = &sql;
  inv.context = {{"reserved", {{"sku", "mug"}, {"quantity", 2}}}, {"charged_cents", 1800}};
  const StepOutcome ship = inv.Run(registry_, "ship");
  EXPECT_EQ(ship.kind, OutcomeKind::kComplete) << ship.error_message;
  EXPECT_EQ(ship.output["order_id"], "A-1");
  EXPECT_EQ(ship.output["charged_cents"], 1800);

  inv.input["undeliverable"] = true;
  const StepOutcome lost = inv.Run(registry_, "ship");
  EXPECT_EQ(lost.kind, OutcomeKind::kFail);
  EXPECT_FALSE(lost.retryable);
  EXPECT_EQ(lost.error_code, "undeliverable");

  const StepOutcome release = inv.Run(registry_, "release_stock");
  EXPECT_EQ(release.kind, OutcomeKind::kNext) << release.error_message;
  EXPECT_EQ(release.context_updates, (Json{{"released", true}, {"reserved", nullptr}}));
  EXPECT_EQ(sql.statements.back().sql,
            "UPDATE \"cairn_example\".reservations SET status = 'released', updated_at = now() "
            "WHERE order_id = $1 AND status = 'reserved' RETURNING order_id");
}

TEST_F(PluginRegistryTest, EveryOutcomeKindCrossesTheBoundary) {
  Invocation inv;
  inv.input = {{"target", "charge"}};
  StepOutcome o = inv.Run(registry_, "jump_to");
  EXPECT_EQ(o.kind, OutcomeKind::kJump);
  EXPECT_EQ(o.jump_to, "charge");

  inv.input = {{"event", "paid"}, {"key", "k-1"}, {"timeout_ms", 5000}};
  o = inv.Run(registry_, "wait_for");
  EXPECT_EQ(o.kind, OutcomeKind::kWait);
  EXPECT_EQ(o.wait_event, "paid");
  EXPECT_EQ(o.wait_key, "k-1");
  EXPECT_EQ(o.wait_timeout_ms, 5000);

  inv.input = {{"event", "paid"}};
  o = inv.Run(registry_, "wait_for");
  EXPECT_EQ(o.wait_key, "paid:run-1");
  EXPECT_FALSE(o.wait_timeout_ms.has_value());

  inv.input = {{"sleep_ms", 250}};
  o = inv.Run(registry_, "sleep_for");
  EXPECT_EQ(o.kind, OutcomeKind::kSleep);
  EXPECT_EQ(o.sleep_ms, 250);
  EXPECT_FALSE(o.sleep_until.has_value());

  inv.input = {{"until", "2030-01-01 00:00:00+00"}};
  o = inv.Run(registry_, "sleep_for");
  EXPECT_EQ(o.kind, OutcomeKind::kSleep);
  EXPECT_EQ(o.sleep_until, "2030-01-01 00:00:00+00");
  EXPECT_FALSE(o.sleep_ms.has_value());

  inv.input = {{"output", {{"total", 3}}}};
  o = inv.Run(registry_, "complete_with");
  EXPECT_EQ(o.kind, OutcomeKind::kComplete);
  EXPECT_EQ(o.output, (Json{{"total", 3}}));

  o = Invocation{}.Run(registry_, "fail_always");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_TRUE(o.retryable);
  EXPECT_EQ(o.error_code, "boom");
  EXPECT_EQ(o.error_message, "fail_always failed on attempt 1");

  o = Invocation{}.Run(registry_, "fail_permanent");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
  EXPECT_EQ(o.error_code, "permanent");
}

TEST_F(PluginRegistryTest, ContextUpdatesReachTheOutcome) {
  Invocation inv;
  inv.input = {{"fields", {{"a", 1}, {"b", {{"nested", true}}}, {"gone", nullptr}}}};
  StepOutcome o = inv.Run(registry_, "set_fields");
  EXPECT_EQ(o.kind, OutcomeKind::kNext);
  EXPECT_EQ(o.context_updates, (Json{{"a", 1}, {"b", {{"nested", true}}}, {"gone", nullptr}}));

  inv.input = Json::object();
  inv.context = {{"attempts", {1, 2}}};
  inv.attempt = 3;
  o = inv.Run(registry_, "record_attempt");
  EXPECT_EQ(o.context_updates, (Json{{"attempts", {1, 2, 3}}, {"last_attempt", 3}}));
}

TEST_F(PluginRegistryTest, TheStepSeesWhatTheHostPasses) {
  Invocation inv;
  inv.input = {{"x", "é"}};
  inv.context = {{"y", {1, 2}}};
  inv.attempt = 4;
  const StepOutcome o = inv.Run(registry_, "echo");
  ASSERT_EQ(o.kind, OutcomeKind::kComplete);
  EXPECT_EQ(o.output, (Json{{"run_id", "run-1"},
                            {"workflow", "wf"},
                            {"step", "echo"},
                            {"attempt", 4},
                            {"transactional", false},
                            {"input", inv.input},
                            {"context", inv.context}}));
}

TEST_F(PluginRegistryTest, StartChildrenStartsChildRunsAndWaitsForThem) {
  Invocation inv;
  inv.input = {{"children",
                {{{"workflow", "child_wf"}, {"input", {{"n", 1}}}},
                 {{"workflow", "other_wf"}, {"input", {{"n", 2}, {"fail", true}}}}}},
               {"child_wait", "all"},
               {"children_event", "kids"},
               {"children_timeout_ms", 1500}};
  StepOutcome o = inv.Run(registry_, "start_children");
  ASSERT_EQ(o.kind, OutcomeKind::kWait) << o.error_message;
  EXPECT_EQ(o.wait_children, ChildWait::kAll);
  EXPECT_EQ(o.wait_event, "kids");
  EXPECT_TRUE(o.wait_key.empty());
  EXPECT_EQ(o.wait_timeout_ms, 1500);
  ASSERT_EQ(o.children.size(), 2u);
  EXPECT_EQ(o.children[0].workflow, "child_wf");
  EXPECT_EQ(o.children[0].input, (Json{{"n", 1}}));
  EXPECT_EQ(o.children[1].workflow, "other_wf");
  EXPECT_EQ(o.children[1].input, (Json{{"n", 2}, {"fail", true}}));

  inv.input = {{"children", {{{"workflow", "child_wf"}}}}, {"child_wait", "first"}};
  o = inv.Run(registry_, "start_children");
  ASSERT_EQ(o.kind, OutcomeKind::kWait) << o.error_message;
  EXPECT_EQ(o.wait_children, ChildWait::kFirst);
  EXPECT_EQ(o.wait_event, "children");
  EXPECT_FALSE(o.wait_timeout_ms.has_value());
  ASSERT_EQ(o.children.size(), 1u);
  EXPECT_EQ(o.children[0].input, Json::object());

  // Options go through the SDK's ChildOptions (ABI 1.4); none is the
  // plain start_child.
  inv.input = {{"children",
                {{{"workflow", "child_wf"}, {"cancel_when_parent_fails", true}},
                 {{"workflow", "child_wf"}, {"cancel_when_first_done", true}},
                 {{"workflow", "child_wf"}}}},
               {"child_wait", "first"}};
  o = inv.Run(registry_, "start_children");
  ASSERT_EQ(o.kind, OutcomeKind::kWait) << o.error_message;
  ASSERT_EQ(o.children.size(), 3u);
  EXPECT_EQ(o.children[0].options, (ChildOptions{true, false}));
  EXPECT_EQ(o.children[1].options, (ChildOptions{false, true}));
  EXPECT_EQ(o.children[2].options, ChildOptions{});

  // Without child_wait the children start and the run goes on.
  inv.input = {{"children", {{{"workflow", "child_wf"}}}}};
  o = inv.Run(registry_, "start_children");
  EXPECT_EQ(o.kind, OutcomeKind::kNext);
  EXPECT_FALSE(o.wait_children.has_value());
  EXPECT_EQ(o.children.size(), 1u);

  // Waiting without children is a plugin mistake.
  inv.input = {{"child_wait", "all"}};
  o = inv.Run(registry_, "start_children");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
  EXPECT_EQ(o.error_code, "plugin_error");
  EXPECT_TRUE(o.children.empty());

  // An empty workflow name is refused (and fails the step).
  inv.input = {{"children", {{{"input", {{"n", 1}}}}}}};
  o = inv.Run(registry_, "start_children");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
  EXPECT_EQ(o.error_code, "plugin_error");
  EXPECT_NE(o.error_message.find("empty workflow name"), std::string::npos) << o.error_message;
  EXPECT_TRUE(o.children.empty());
}

TEST_F(PluginRegistryTest, ChildWorkCompletesOrFails) {
  Invocation inv;
  StepOutcome o = inv.Run(registry_, "child_work");
  ASSERT_EQ(o.kind, OutcomeKind::kComplete);
  EXPECT_EQ(o.output, (Json{{"n", 0}, {"run_id", "run-1"}}));

  inv.input = {{"n", 7}, {"sleep_ms", 5}};
  o = inv.Run(registry_, "child_work");
  ASSERT_EQ(o.kind, OutcomeKind::kComplete);
  EXPECT_EQ(o.output, (Json{{"n", 7}, {"run_id", "run-1"}}));

  inv.input = {{"n", 7}, {"fail", true}};
  o = inv.Run(registry_, "child_work");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
  EXPECT_EQ(o.error_code, "child_failed");
}

TEST_F(PluginRegistryTest, JournalStepsWriteTheirInvokedName) {
  for (const char* step : {"journal", "undo_a", "undo_b", "undo_c"}) {
    RecordingSql sql;
    Invocation inv;
    inv.input = {{"journal", "t.journal"}};
    inv.sql = &sql;
    inv.attempt = 2;
    const StepOutcome o = inv.Run(registry_, step);
    EXPECT_EQ(o.kind, OutcomeKind::kNext) << step << ": " << o.error_message;
    ASSERT_EQ(sql.statements.size(), 1u) << step;
    EXPECT_EQ(sql.statements[0].sql,
              "INSERT INTO \"t\".\"journal\" (run_id, step, attempt) VALUES ($1, $2, $3)");
    EXPECT_EQ(sql.statements[0].params, Json::array({"run-1", step, 2}));
  }

  Invocation bad;
  RecordingSql sql;
  bad.input = {{"journal", "t.journal; drop"}};
  bad.sql = &sql;
  const StepOutcome o = bad.Run(registry_, "journal");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
  EXPECT_EQ(o.error_code, "bad_input");
  EXPECT_TRUE(sql.statements.empty());
}

TEST_F(PluginRegistryTest, UndoGatedWritesOnlyThroughAnOpenGate) {
  for (const Json& gate :
       {Json::array(), Json::array({{{"open", false}}}), Json::array({{{"open", nullptr}}})}) {
    RecordingSql sql;
    sql.respond = [&](const std::string&, const Json&) { return gate; };
    Invocation inv;
    inv.input = {{"gate", "t.gate"}, {"journal", "t.journal"}};
    inv.sql = &sql;
    const StepOutcome o = inv.Run(registry_, "undo_gated");
    EXPECT_EQ(o.kind, OutcomeKind::kFail) << gate;
    EXPECT_TRUE(o.retryable);
    EXPECT_EQ(o.error_code, "gate_closed");
    ASSERT_EQ(sql.statements.size(), 1u);
    EXPECT_EQ(sql.statements[0].sql, "SELECT open FROM \"t\".\"gate\"");
  }

  RecordingSql sql;
  sql.respond = [](const std::string& statement, const Json&) {
    return statement.rfind("SELECT", 0) == 0 ? Json::array({{{"open", true}}}) : Json::array();
  };
  Invocation inv;
  inv.input = {{"gate", "t.gate"}, {"journal", "t.journal"}};
  inv.sql = &sql;
  const StepOutcome o = inv.Run(registry_, "undo_gated");
  EXPECT_EQ(o.kind, OutcomeKind::kNext) << o.error_message;
  ASSERT_EQ(sql.statements.size(), 2u);
  EXPECT_EQ(sql.statements[1].params, Json::array({"run-1", "undo_gated", 1}));
}

TEST_F(PluginRegistryTest, TxInsertSlowInsertsThenSleeps) {
  RecordingSql sql;
  Invocation inv;
  inv.input = {{"table", "shop.rows"}, {"sleep_ms", 1}};
  inv.sql = &sql;
  const StepOutcome o = inv.Run(registry_, "tx_insert_slow");
  EXPECT_EQ(o.kind, OutcomeKind::kNext) << o.error_message;
  EXPECT_EQ(o.context_updates, (Json{{"inserted", true}}));
  ASSERT_EQ(sql.statements.size(), 1u);
  EXPECT_EQ(sql.statements[0].sql,
            "INSERT INTO \"shop\".\"rows\" (run_id, attempt) VALUES ($1, $2)");
  EXPECT_EQ(sql.statements[0].params, Json::array({"run-1", 1}));
}

TEST_F(PluginRegistryTest, AnExceptionBecomesARetryableFailure) {
  StepOutcome o = Invocation{}.Run(registry_, "throws");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_TRUE(o.retryable);
  EXPECT_EQ(o.error_code, "exception");
  EXPECT_EQ(o.error_message, "thrown by the throws step");

  o = Invocation{}.Run(registry_, "throws_unknown");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_TRUE(o.retryable);
  EXPECT_EQ(o.error_message, "unknown exception");
}

// ---- sql_exec -----------------------------------------------------------------

StepOutcome Query(PluginRegistry& registry, RecordingSql& sql, const std::string& statement,
                  Json params = Json::array()) {
  Invocation inv;
  inv.input = {{"sql", statement}, {"params", std::move(params)}};
  inv.sql = &sql;
  return inv.Run(registry, "sql_query");
}

TEST_F(PluginRegistryTest, SqlReturnsRowsAsJson) {
  RecordingSql sql;
  sql.respond = [](const std::string&, const Json& params) {
    return Json::array({{{"id", params[0]}, {"name", "x"}}});
  };
  const StepOutcome o = Query(registry_, sql, "SELECT $1::int AS id, 'x' AS name", {7});
  EXPECT_EQ(o.kind, OutcomeKind::kNext) << o.error_message;
  EXPECT_EQ(o.context_updates["rows"], Json::array({{{"id", 7}, {"name", "x"}}}));
}

TEST_F(PluginRegistryTest, SqlRefusesAnEmptyStatementWithoutReachingTheStore) {
  // Which statements may run is the store's rule (tests/store/
  // step_sql_guard_test); the host refuses only calls that name none.
  RecordingSql sql;
  const StepOutcome o = Query(registry_, sql, "");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
  EXPECT_EQ(o.error_code, "sql_refused");
  EXPECT_NE(o.error_message.find("empty statement"), std::string::npos) << o.error_message;
  EXPECT_TRUE(sql.statements.empty());
}

TEST_F(PluginRegistryTest, SqlRefusesParamsThatAreNotAnArray) {
  RecordingSql sql;
  const StepOutcome o = Query(registry_, sql, "SELECT 1", Json{{"a", 1}});
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_EQ(o.error_code, "sql_refused");
  EXPECT_NE(o.error_message.find("JSON array"), std::string::npos) << o.error_message;
  EXPECT_TRUE(sql.statements.empty());
}

TEST_F(PluginRegistryTest, AStatementTheStoreRefusesFailsTheStepPermanently) {
  RecordingSql sql;
  sql.respond = [](const std::string&, const Json&) -> Json {
    throw InvalidArgumentError("statement refused by the store");
  };
  const StepOutcome o = Query(registry_, sql, "SELECT 1");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
  EXPECT_EQ(o.error_code, "sql_refused");
  EXPECT_NE(o.error_message.find("statement refused by the store"), std::string::npos);
}

TEST_F(PluginRegistryTest, ADatabaseErrorAbortsTheStepAndReachesTheEngine) {
  RecordingSql sql;
  sql.respond = [](const std::string&, const Json&) -> Json {
    throw DatabaseError(ErrorKind::kPermanent, "step sql", "23505", "duplicate key");
  };
  Invocation inv;
  inv.input = {{"table", "shop.rows"}};
  inv.sql = &sql;
  try {
    inv.Run(registry_, "tx_insert");
    ADD_FAILURE() << "expected the DatabaseError";
  } catch (const DatabaseError& e) {
    EXPECT_EQ(e.sqlstate(), "23505");
  }
  ASSERT_EQ(sql.statements.size(), 1u);
  EXPECT_EQ(sql.statements[0].sql,
            "INSERT INTO \"shop\".\"rows\" (run_id, attempt) VALUES ($1, $2)");
  EXPECT_EQ(sql.statements[0].params, Json::array({"run-1", 1}));
}

// ---- The raw C ABI ------------------------------------------------------------

class RawAbiTest : public ::testing::Test {
 protected:
  void SetUp() override { registry_.LoadFile(FixtureFile("raw_abi")); }
  PluginRegistry registry_;
};

TEST_F(RawAbiTest, FailureResultsWithoutFailGetAGenericFailure) {
  StepOutcome o = Invocation{}.Run(registry_, "raw_retry_without_fail");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_TRUE(o.retryable);
  EXPECT_EQ(o.error_code, "step_error");

  o = Invocation{}.Run(registry_, "raw_error_without_fail");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
}

TEST_F(RawAbiTest, MisuseOfTheHostApiFailsTheStepPermanently) {
  StepOutcome o = Invocation{}.Run(registry_, "raw_bad_json");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
  EXPECT_EQ(o.error_code, "plugin_error");
  EXPECT_NE(o.error_message.find("not valid JSON"), std::string::npos) << o.error_message;

  o = Invocation{}.Run(registry_, "raw_unknown_result");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
  EXPECT_EQ(o.error_code, "plugin_error");
}

TEST_F(RawAbiTest, StringsThatAreNotUtf8NeverReachTheOutcome) {
  // The store and the step-process wire take UTF-8 only: a key that is not
  // is the plugin's mistake; a failure's code and message are repaired.
  StepOutcome o = Invocation{}.Run(registry_, "raw_invalid_utf8_key");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_EQ(o.error_code, "plugin_error");
  EXPECT_NE(o.error_message.find("not valid UTF-8"), std::string::npos) << o.error_message;
  EXPECT_TRUE(o.context_updates.empty())
      << o.context_updates.dump(-1, ' ', false, Json::error_handler_t::replace);

  o = Invocation{}.Run(registry_, "raw_invalid_utf8_failure");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
  EXPECT_EQ(o.error_code, "declined\xEF\xBF\xBD");
  EXPECT_EQ(o.error_message, "card \xEF\xBF\xBD declined");
  EXPECT_NO_THROW((void)Json(o.error_code).dump());
  EXPECT_NO_THROW((void)Json(o.error_message).dump());
}

TEST_F(RawAbiTest, NumbersThatAreNoEnumeratorAreRefusedWithoutUndefinedBehaviour) {
  // Reading level 7 or mode 9 as the C++ enum was undefined (UBSan, through
  // the plugin ABI fuzz target).
  const StepOutcome o = Invocation{}.Run(registry_, "raw_unknown_enums");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_EQ(o.error_code, "plugin_error");
  EXPECT_NE(o.error_message.find("wait_children: unknown mode 9"), std::string::npos)
      << o.error_message;
}

TEST_F(RawAbiTest, FailThenOkKeepsTheFailure) {
  const StepOutcome o = Invocation{}.Run(registry_, "raw_fail_then_ok");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
  EXPECT_EQ(o.error_code, "declined");
  EXPECT_EQ(o.error_message, "card declined");
}

TEST_F(RawAbiTest, TheLastOutcomeCallWinsAndContextFieldsStay) {
  const StepOutcome o = Invocation{}.Run(registry_, "raw_last_wins");
  EXPECT_EQ(o.kind, OutcomeKind::kComplete);
  EXPECT_EQ(o.output, (Json{{"n", 3}}));
  EXPECT_TRUE(o.jump_to.empty());
  EXPECT_EQ(o.context_updates, (Json{{"a", 2}, {"b", nullptr}}));
}

TEST_F(RawAbiTest, RowBuffersStayValidUntilTheStepReturns) {
  RecordingSql sql;
  Invocation inv;
  inv.sql = &sql;
  const StepOutcome o = inv.Run(registry_, "raw_two_queries");
  ASSERT_EQ(o.kind, OutcomeKind::kNext) << o.error_message;
  EXPECT_EQ(o.context_updates["first"], Json::array({{{"n", 1}}}));
  EXPECT_EQ(o.context_updates["second"], Json::array({{{"n", 2}}}));
  EXPECT_EQ(o.context_updates["nul_terminated"], true);
  ASSERT_EQ(sql.statements.size(), 2u);
  EXPECT_EQ(sql.statements[1].params, Json::array({2}));
}

TEST_F(RawAbiTest, AStepCannotIgnoreADatabaseError) {
  RecordingSql sql;
  sql.respond = [](const std::string&, const Json&) -> Json {
    throw DatabaseError(ErrorKind::kTransient, "step sql", "08006", "connection lost");
  };
  Invocation inv;
  inv.sql = &sql;
  EXPECT_THROW(inv.Run(registry_, "raw_ignores_sql_error"), DatabaseError);
  EXPECT_EQ(sql.statements.size(), 1u);  // the second statement never reached the store
}

TEST_F(RawAbiTest, ThePluginSeesAConsistentHostTable) {
  const StepOutcome o = Invocation{}.Run(registry_, "raw_check_host");
  EXPECT_EQ(o.context_updates["host_ok"], true);
}

// ---- Child runs (ABI 1.2) -----------------------------------------------------

TEST_F(RawAbiTest, WaitChildrenParksTheRunForTheChildrenItStarted) {
  StepOutcome o = Invocation{}.Run(registry_, "raw_children_first");
  ASSERT_EQ(o.kind, OutcomeKind::kWait) << o.error_message;
  EXPECT_EQ(o.wait_children, ChildWait::kFirst);
  EXPECT_EQ(o.wait_event, "kids");
  EXPECT_TRUE(o.wait_key.empty());
  EXPECT_EQ(o.wait_timeout_ms, 5000);
  ASSERT_EQ(o.children.size(), 2u);
  EXPECT_EQ(o.children[0].workflow, "child_wf");
  EXPECT_EQ(o.children[0].input, (Json{{"n", 1}}));
  EXPECT_EQ(o.children[1].workflow, "other_wf");
  EXPECT_EQ(o.children[1].input, Json::object());  // len 0 means {}

  o = Invocation{}.Run(registry_, "raw_children_all");
  ASSERT_EQ(o.kind, OutcomeKind::kWait) << o.error_message;
  EXPECT_EQ(o.wait_children, ChildWait::kAll);
  EXPECT_EQ(o.wait_event, "children");  // NULL event
  EXPECT_FALSE(o.wait_timeout_ms.has_value());
  EXPECT_EQ(o.children.size(), 1u);
}

TEST_F(RawAbiTest, StartChildWithKeepsWhatEachChildAskedFor) {
  StepOutcome o = Invocation{}.Run(registry_, "raw_children_with_options");
  ASSERT_EQ(o.kind, OutcomeKind::kWait) << o.error_message;
  EXPECT_EQ(o.wait_children, ChildWait::kFirst);
  ASSERT_EQ(o.children.size(), 3u);
  EXPECT_EQ(o.children[0].workflow, "child_wf");
  EXPECT_EQ(o.children[0].input, (Json{{"n", 1}}));
  EXPECT_EQ(o.children[0].options, (ChildOptions{true, true}));
  EXPECT_EQ(o.children[1].workflow, "other_wf");
  EXPECT_EQ(o.children[1].input, Json::object());  // len 0 means {}
  EXPECT_EQ(o.children[1].options, (ChildOptions{false, false}));
  EXPECT_EQ(o.children[2].options, (ChildOptions{false, true}));

  // start_child asks for nothing.
  o = Invocation{}.Run(registry_, "raw_children_first");
  ASSERT_EQ(o.children.size(), 2u);
  EXPECT_EQ(o.children[0].options, ChildOptions{});
  EXPECT_EQ(o.children[1].options, ChildOptions{});
}

TEST_F(RawAbiTest, StartChildWithAnUnknownFlagFailsTheStepPermanently) {
  const StepOutcome o = Invocation{}.Run(registry_, "raw_child_unknown_flag");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
  EXPECT_EQ(o.error_code, "plugin_error");
  EXPECT_NE(o.error_message.find("start_child_with: unknown flags 128"), std::string::npos)
      << o.error_message;
  EXPECT_TRUE(o.children.empty());
}

TEST_F(RawAbiTest, ChildrenSurviveALaterOutcomeCall) {
  const StepOutcome o = Invocation{}.Run(registry_, "raw_child_then_next");
  ASSERT_EQ(o.kind, OutcomeKind::kNext) << o.error_message;
  EXPECT_FALSE(o.wait_children.has_value());
  EXPECT_TRUE(o.wait_event.empty());
  EXPECT_FALSE(o.wait_timeout_ms.has_value());
  ASSERT_EQ(o.children.size(), 2u);
  EXPECT_EQ(o.children[0].input, (Json{{"n", 1}}));
  EXPECT_EQ(o.children[1].input, (Json{{"n", 2}}));
}

TEST_F(RawAbiTest, FailAfterStartChildIsAFailure) {
  // Like signals, the children ride along with a kFail outcome; the step plan
  // drops both for a failed step, so none starts.
  const StepOutcome o = Invocation{}.Run(registry_, "raw_child_then_fail");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_TRUE(o.retryable);
  EXPECT_EQ(o.error_code, "later");
  EXPECT_FALSE(o.wait_children.has_value());
}

TEST_F(RawAbiTest, MisusingChildRunsFailsTheStepPermanently) {
  StepOutcome o = Invocation{}.Run(registry_, "raw_wait_without_child");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
  EXPECT_EQ(o.error_code, "plugin_error");
  EXPECT_NE(o.error_message.find("wait_children"), std::string::npos) << o.error_message;
  EXPECT_FALSE(o.wait_children.has_value());

  o = Invocation{}.Run(registry_, "raw_child_not_object");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
  EXPECT_EQ(o.error_code, "plugin_error");
  EXPECT_NE(o.error_message.find("not a JSON object"), std::string::npos) << o.error_message;
  EXPECT_TRUE(o.children.empty());

  o = Invocation{}.Run(registry_, "raw_child_no_workflow");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
  EXPECT_EQ(o.error_code, "plugin_error");
  EXPECT_NE(o.error_message.find("empty workflow name"), std::string::npos) << o.error_message;
}

// ---- The idempotency store (ABI 1.3) -------------------------------------------

// A caller that offers no idempotency store (a test's bare StepCall) refuses
// once's claim with a message saying so; the step fails for good, with
// nothing run and no effect made.
TEST_F(PluginRegistryTest, OnceWhereTheHostOffersNoIdempotencyStoreIsRefused) {
  Invocation invocation;
  invocation.input = {{"key", "charge-1"}, {"effects_file", "/nonexistent/effects"}};
  const StepOutcome o = invocation.Run(registry_, "once_effect");
  EXPECT_EQ(o.kind, OutcomeKind::kFail);
  EXPECT_FALSE(o.retryable);
  EXPECT_EQ(o.error_code, "idempotency_refused");
  EXPECT_NE(o.error_message.find("offers no idempotency store to step 'once_effect'"),
            std::string::npos)
      << o.error_message;
}

// ---- The SDK on an older host -----------------------------------------------

// A host table as a 1.1 host has it (no start_child, no wait_children) that
// records the fail() call the SDK makes.
struct OldHost {
  static inline std::string code;
  static inline std::string message;
  static inline int retryable = -1;
  static cairn_result Fail(cairn_step_ctx*, int r, const char* c, const char* m) {
    retryable = r;
    code = c != nullptr ? c : "";
    message = m != nullptr ? m : "";
    return CAIRN_OK;
  }
};

TEST(SdkOnAnOlderHost, ChildRunsNeedAbi12) {
  cairn_host_api host{};
  host.struct_size = offsetof(cairn_host_api, signal) + sizeof(host.signal);
  host.abi_major = CAIRN_ABI_MAJOR;
  host.abi_minor = 1;
  host.fail = &OldHost::Fail;
  cairn_step_call call{};
  call.struct_size = sizeof(call);
  call.host = &host;

  const sdk::StepDef start{"start", [](sdk::StepContext& ctx) {
                             ctx.start_child("child_wf");
                             return sdk::Next();
                           }};
  EXPECT_EQ(sdk::detail::InvokeStep(const_cast<sdk::StepDef*>(&start), &call, nullptr),
            CAIRN_ERROR);
  EXPECT_EQ(OldHost::code, "plugin_error");
  EXPECT_EQ(OldHost::retryable, 0);
  EXPECT_NE(OldHost::message.find("older than ABI 1.2"), std::string::npos) << OldHost::message;

  OldHost::code.clear();
  OldHost::message.clear();
  const sdk::StepDef wait{
      "wait", [](sdk::StepContext&) { return sdk::WaitChildren(sdk::ChildWait::kAll); }};
  EXPECT_EQ(sdk::detail::InvokeStep(const_cast<sdk::StepDef*>(&wait), &call, nullptr), CAIRN_ERROR);
  EXPECT_EQ(OldHost::code, "plugin_error");
  EXPECT_NE(OldHost::message.find("older than ABI 1.2"), std::string::npos) << OldHost::message;
}

// An ABI 1.3 host: start_child without options works as before; with an
// option the SDK refuses before calling past the end of the host's table.
TEST(SdkOnAnOlderHost, ChildOptionsNeedAbi14) {
  cairn_host_api host{};
  host.struct_size = offsetof(cairn_host_api, idempotency_fail) + sizeof(host.idempotency_fail);
  host.abi_major = CAIRN_ABI_MAJOR;
  host.abi_minor = 3;
  host.fail = &OldHost::Fail;
  host.start_child = [](cairn_step_ctx*, const char*, cairn_bytes) { return CAIRN_OK; };
  host.next = [](cairn_step_ctx*) { return CAIRN_OK; };
  cairn_step_call call{};
  call.struct_size = sizeof(call);
  call.host = &host;
  OldHost::code.clear();
  OldHost::message.clear();

  const sdk::StepDef plain{"plain", [](sdk::StepContext& ctx) {
                             ctx.start_child("child_wf");
                             ctx.start_child("child_wf", Json::object(), sdk::ChildOptions{});
                             return sdk::Next();
                           }};
  EXPECT_EQ(sdk::detail::InvokeStep(const_cast<sdk::StepDef*>(&plain), &call, nullptr), CAIRN_OK);
  EXPECT_EQ(OldHost::code, "");

  const sdk::StepDef with{"with", [](sdk::StepContext& ctx) {
                            sdk::ChildOptions options;
                            options.cancel_when_parent_fails = true;
                            ctx.start_child("child_wf", Json::object(), options);
                            return sdk::Next();
                          }};
  EXPECT_EQ(sdk::detail::InvokeStep(const_cast<sdk::StepDef*>(&with), &call, nullptr), CAIRN_ERROR);
  EXPECT_EQ(OldHost::code, "plugin_error");
  EXPECT_EQ(OldHost::retryable, 0);
  EXPECT_NE(OldHost::message.find("older than ABI 1.4"), std::string::npos) << OldHost::message;
}

TEST(SdkOnAnOlderHost, OnceNeedsAbi13) {
  cairn_host_api host{};
  host.struct_size = offsetof(cairn_host_api, wait_children) + sizeof(host.wait_children);
  host.abi_major = CAIRN_ABI_MAJOR;
  host.abi_minor = 2;
  host.fail = &OldHost::Fail;
  cairn_step_call call{};
  call.struct_size = sizeof(call);
  call.host = &host;
  OldHost::code.clear();
  OldHost::message.clear();
  const sdk::StepDef once{"once", [](sdk::StepContext& ctx) {
                            ctx.once("charge-1", std::chrono::hours(1), [] { return Json(1); });
                            return sdk::Next();
                          }};
  EXPECT_EQ(sdk::detail::InvokeStep(const_cast<sdk::StepDef*>(&once), &call, nullptr), CAIRN_ERROR);
  EXPECT_EQ(OldHost::code, "plugin_error");
  EXPECT_EQ(OldHost::retryable, 0);
  EXPECT_NE(OldHost::message.find("older than ABI 1.3"), std::string::npos) << OldHost::message;
}

// A host of ABI 1.3 passes a cairn_step_call that ends at context: the SDK
// must not read compensates past it (here a poisoned field that a read would
// return), and reports no undone step.
TEST(SdkOnAnOlderHost, CompensatesIsNullBeforeAbi14) {
  cairn_host_api host{};
  host.struct_size = offsetof(cairn_host_api, idempotency_fail) + sizeof(host.idempotency_fail);
  host.abi_major = CAIRN_ABI_MAJOR;
  host.abi_minor = 3;
  cairn_step_call call{};
  call.struct_size = offsetof(cairn_step_call, context) + sizeof(call.context);
  call.host = &host;
  call.compensates = "poison";
  EXPECT_EQ(sdk::StepContext(&call, nullptr).compensates(), nullptr);

  call.struct_size = sizeof(call);
  EXPECT_STREQ(sdk::StepContext(&call, nullptr).compensates(), "poison");
  call.compensates = nullptr;
  EXPECT_EQ(sdk::StepContext(&call, nullptr).compensates(), nullptr);
}

}  // namespace
}  // namespace cairn
