// Schema migrations against a real PostgreSQL: fresh schemas, no-op re-runs,
// dry runs, tampered and newer schemas, and concurrent migrators (threads and
// real `cairn migrate` processes).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "errors.hpp"
#include "migrate.hpp"
#include "pg_harness.hpp"
#include "store.hpp"
#include "test_paths.hpp"

extern char** environ;

namespace cairn::test {
namespace {

using ::testing::HasSubstr;

struct ProcessResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Starts the cairn binary with args, its output going to a file.
class CairnProcess {
 public:
  explicit CairnProcess(const std::vector<std::string>& args) {
    output_path_ = std::filesystem::temp_directory_path() /
                   ("cairn-migrate-test-" + std::to_string(::getpid()) + "-" +
                    std::to_string(counter_++) + ".out");
    std::vector<std::string> argv_storage = {cairn::test::CairnBinary()};
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_storage) argv.push_back(a.data());
    argv.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
    int error =
        posix_spawn(&pid_, argv_storage[0].c_str(), &actions, &attributes, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    if (error != 0) {
      throw std::runtime_error("cannot start " + argv_storage[0] + ": " + std::strerror(error));
    }
  }

  ~CairnProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ignored;
    std::filesystem::remove(output_path_, ignored);
  }

  ProcessResult Wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    ProcessResult result;
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::ifstream in(output_path_);
    std::stringstream text;
    text << in.rdbuf();
    result.output = text.str();
    return result;
  }

 private:
  static inline std::atomic<int> counter_{0};
  pid_t pid_ = -1;
  std::filesystem::path output_path_;
};

class Migrations : public PgTest {
 protected:
  std::unique_ptr<store::Connection> Open() const {
    store::ConnectionOptions options;
    options.url = url();
    options.schema = schema();
    return std::make_unique<store::Connection>(options);
  }

  std::string Sql(const std::string& text) const {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text.compare(i, 3, "{s}") == 0) {
        out += "\"" + schema() + "\"";
        i += 2;
      } else {
        out += text[i];
      }
    }
    return RunPsql(out);
  }

  bool SchemaExists() const {
    return RunPsql("SELECT count(*) FROM pg_namespace WHERE nspname = '" + schema() + "'") == "1";
  }

  // Every migration is recorded exactly once and every table exists.
  void ExpectConsistentSchema(const store::MigrationReport& report) const {
    EXPECT_EQ(Sql("SELECT count(*) FROM {s}.schema_migrations"),
              std::to_string(report.migrations.size()));
    EXPECT_EQ(Sql("SELECT count(DISTINCT version) FROM {s}.schema_migrations"),
              std::to_string(report.migrations.size()));
    EXPECT_EQ(Sql("SELECT max(version) FROM {s}.schema_migrations"),
              std::to_string(report.latest_version));
    for (const auto& m : report.migrations) {
      EXPECT_EQ(Sql("SELECT checksum FROM {s}.schema_migrations WHERE version = " +
                    std::to_string(m.version)),
                m.checksum);
    }
    for (const char* table : {"runs", "run_events", "wait_records", "schedules", "idempotency_keys",
                              "workers", "workflow_definitions"}) {
      EXPECT_EQ(Sql(std::string("SELECT to_regclass('{s}.") + table + "') IS NOT NULL"), "t")
          << table;
    }
  }

  // The report of a migrated schema, read without changing anything.
  store::MigrationReport Status() const {
    auto connection = Open();
    return store::MigrationStatus(*connection);
  }
};

TEST_F(Migrations, FreshSchemaMigratesToTheLatestVersion) {
  auto connection = Open();
  store::MigrationReport report = store::Migrate(*connection);
  ASSERT_FALSE(report.migrations.empty());
  EXPECT_GE(report.latest_version, 1);
  EXPECT_EQ(report.schema_version, report.latest_version);
  EXPECT_EQ(report.applied_now.size(), report.migrations.size());
  for (const auto& m : report.migrations) {
    EXPECT_TRUE(m.applied) << m.name;
    EXPECT_EQ(m.checksum.size(), 64u) << m.name;
  }
  EXPECT_EQ(report.migrations.front().name, "0001_schema.sql");
  ExpectConsistentSchema(report);

  // The schema works: the store can use it straight away.
  auto run = connection->Transact([&](store::Tx& tx) {
    NewRun fresh;
    fresh.workflow = "w";
    fresh.definition_hash = "h";
    return store::CreateRun(tx, fresh).run;
  });
  EXPECT_EQ(Sql("SELECT count(*) FROM {s}.runs WHERE id = '" + run.id + "'"), "1");
}

TEST_F(Migrations, SecondMigrateIsANoOp) {
  auto connection = Open();
  store::MigrationReport first = store::Migrate(*connection);
  const std::string recorded =
      Sql("SELECT string_agg(version || ' ' || applied_at, ',' ORDER BY version)"
          " FROM {s}.schema_migrations");
  store::MigrationReport second = store::Migrate(*connection);
  EXPECT_TRUE(second.applied_now.empty());
  EXPECT_EQ(second.schema_version, first.schema_version);
  for (const auto& m : second.migrations) {
    EXPECT_TRUE(m.applied);
    EXPECT_TRUE(m.applied_at.has_value());
  }
  EXPECT_EQ(Sql("SELECT string_agg(version || ' ' || applied_at, ',' ORDER BY version)"
                " FROM {s}.schema_migrations"),
            recorded);
  // And from another session.
  auto other = Open();
  EXPECT_TRUE(store::Migrate(*other).applied_now.empty());
  ExpectConsistentSchema(second);
}

TEST_F(Migrations, DryRunOnAnEmptyDatabaseCreatesNothing) {
  auto connection = Open();
  store::MigrationReport report = store::Migrate(*connection, /*dry_run=*/true);
  EXPECT_EQ(report.schema_version, 0);
  EXPECT_GE(report.latest_version, 1);
  EXPECT_EQ(report.applied_now.size(), report.migrations.size());
  for (const auto& m : report.migrations) EXPECT_FALSE(m.applied);
  EXPECT_FALSE(SchemaExists());

  store::MigrationReport status = store::MigrationStatus(*connection);
  EXPECT_EQ(status.schema_version, 0);
  EXPECT_TRUE(status.applied_now.empty());
  EXPECT_FALSE(SchemaExists());

  // After a real migration a dry run has nothing to do.
  store::Migrate(*connection);
  store::MigrationReport after = store::Migrate(*connection, true);
  EXPECT_TRUE(after.applied_now.empty());
  EXPECT_EQ(after.schema_version, after.latest_version);
}

TEST_F(Migrations, MixedCaseSchemaMigratesOnceAndIsSeenAsMigrated) {
  const std::string mixed = "Mixed_" + schema();
  store::ConnectionOptions options;
  options.url = url();
  options.schema = mixed;
  store::MigrationReport first, second;
  try {
    store::Connection connection(options);
    first = store::Migrate(connection);
    second = store::Migrate(connection);
  } catch (...) {
    RunPsql("DROP SCHEMA IF EXISTS \"" + mixed + "\" CASCADE");
    throw;
  }
  const std::string recorded = RunPsql("SELECT count(*) FROM \"" + mixed + "\".schema_migrations");
  RunPsql("DROP SCHEMA IF EXISTS \"" + mixed + "\" CASCADE");
  EXPECT_EQ(first.applied_now.size(), first.migrations.size());
  EXPECT_TRUE(second.applied_now.empty());
  EXPECT_EQ(recorded, std::to_string(first.migrations.size()));
  EXPECT_FALSE(SchemaExists()) << "the lower-case schema was touched";
}

TEST_F(Migrations, ChangedChecksumIsRefusedNamingTheFile) {
  auto connection = Open();
  store::MigrationReport report = store::Migrate(*connection);
  Sql("UPDATE {s}.schema_migrations SET checksum = 'x' WHERE version = 1");

  auto other = Open();
  try {
    store::Migrate(*other);
    FAIL() << "a changed migration was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kPermanent);
    EXPECT_THAT(e.what(), HasSubstr("0001_schema.sql"));
    EXPECT_THAT(e.what(), HasSubstr("changed"));
  }
  EXPECT_THROW(store::Migrate(*other, true), Error);
  EXPECT_THROW(store::MigrationStatus(*other), Error);
  EXPECT_EQ(Sql("SELECT checksum FROM {s}.schema_migrations WHERE version = 1"), "x");

  // The refusal released the migration lock: once repaired, another session
  // migrates (as a no-op) without waiting for this one to disconnect.
  Sql("UPDATE {s}.schema_migrations SET checksum = '" + report.migrations.front().checksum +
      "' WHERE version = 1");
  auto third = Open();
  EXPECT_TRUE(store::Migrate(*third).applied_now.empty());
}

TEST_F(Migrations, SchemaNewerThanTheBinaryIsRefused) {
  auto connection = Open();
  store::MigrationReport report = store::Migrate(*connection);
  Sql("INSERT INTO {s}.schema_migrations (version, name, checksum)"
      " VALUES (9999, '9999_future.sql', 'abc')");
  auto other = Open();
  try {
    store::Migrate(*other);
    FAIL() << "a newer schema was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kPermanent);
    EXPECT_THAT(e.what(), HasSubstr("9999"));
    EXPECT_THAT(e.what(), HasSubstr("upgrade cairn"));
  }
  EXPECT_THROW(store::Migrate(*other, true), Error);
  EXPECT_EQ(Sql("SELECT count(*) FROM {s}.schema_migrations"),
            std::to_string(report.migrations.size() + 1));
}

TEST_F(Migrations, ConcurrentMigrationsInThreadsLeaveOneConsistentSchema) {
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<store::Connection>> connections;
  for (int i = 0; i < kThreads; ++i) connections.push_back(Open());
  std::vector<store::MigrationReport> reports(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      try {
        reports[i] = store::Migrate(*connections[i]);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  size_t applied = 0;
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_EQ(errors[i], "") << "migrator " << i;
    EXPECT_EQ(reports[i].schema_version, reports[i].latest_version) << "migrator " << i;
    applied += reports[i].applied_now.size();
  }
  // Every migration was applied by exactly one migrator.
  EXPECT_EQ(applied, reports[0].migrations.size());
  ExpectConsistentSchema(reports[0]);
}

TEST_F(Migrations, ConcurrentMigrateProcessesLeaveOneConsistentSchema) {
  const std::vector<std::string> args = {"migrate", "--database-url", url(), "--schema", schema()};
  CairnProcess first(args);
  CairnProcess second(args);
  ProcessResult a = first.Wait();
  ProcessResult b = second.Wait();
  EXPECT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(b.exit_code, 0) << b.output;
  // One applied the migrations, the other found them applied.
  const std::string both = a.output + b.output;
  EXPECT_THAT(both, HasSubstr("applied now"));
  EXPECT_THAT(a.output, HasSubstr("up to date"));
  EXPECT_THAT(b.output, HasSubstr("up to date"));
  ExpectConsistentSchema(Status());
}

TEST_F(Migrations, MigrateCommandRefusesABadSchemaName) {
  const std::string before = RunPsql("SELECT count(*) FROM pg_namespace");
  CairnProcess process({"migrate", "--database-url", url(), "--schema", "bad;name"});
  ProcessResult result = process.Wait();
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("bad;name"));
  EXPECT_THAT(result.output, HasSubstr("schema"));
  EXPECT_EQ(RunPsql("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'bad%'"), "0");
  EXPECT_EQ(RunPsql("SELECT count(*) FROM pg_namespace"), before);
}

TEST_F(Migrations, MigrateCommandDryRunCreatesNothing) {
  CairnProcess process({"migrate", "--database-url", url(), "--schema", schema(), "--dry-run"});
  ProcessResult result = process.Wait();
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("would apply"));
  EXPECT_FALSE(SchemaExists());
}

}  // namespace
}  // namespace cairn::test
