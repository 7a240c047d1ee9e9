// Tests of the test harness itself (tests/support): the server answers, every
// fixture gets its own schema, and TearDown drops it. Runs against the real
// server, as root in CI (where the server runs as the postgres account).
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "identifier.hpp"
#include "pg_harness.hpp"

namespace cairn::test {
namespace {

// Exposes the fixture's life cycle so one test can watch another fixture's.
class ProbeFixture : public PgTest {
 public:
  void TestBody() override {}
  using PgTest::schema;
  using PgTest::SetUp;
  using PgTest::TearDown;
  using PgTest::url;
};

std::string SchemaExists(const std::string& schema) {
  return RunPsql("select count(*) from pg_namespace where nspname = '" + schema + "'");
}

using Harness = PgTest;

TEST_F(Harness, ServerAnswersSelectOne) {
  EXPECT_EQ(RunPsql("select 1"), "1");
  EXPECT_EQ(url(), DatabaseUrl());
}

TEST_F(Harness, ServerIsPostgresFifteenOrNewer) {
  EXPECT_GE(std::stoi(RunPsql("show server_version_num")), 150000);
}

TEST_F(Harness, OwnServerIsConfiguredForTests) {
  if (!HarnessOwnsServer()) GTEST_SKIP() << "external server";
  EXPECT_EQ(RunPsql("show fsync"), "off");
  EXPECT_EQ(RunPsql("show full_page_writes"), "off");
  EXPECT_EQ(RunPsql("show max_connections"), "200");
  EXPECT_EQ(RunPsql("show listen_addresses"), "127.0.0.1");
}

TEST_F(Harness, ServerDoesNotRunAsRoot) {
  // As root, the harness runs the server as the postgres account.
  if (!HarnessOwnsServer()) GTEST_SKIP() << "external server";
  EXPECT_EQ(RunPsql("select current_user"), "postgres");
  std::string data_dir = RunPsql("show data_directory");
  EXPECT_NE(data_dir.find("/cairn-pg-"), std::string::npos) << data_dir;
}

TEST_F(Harness, SchemaNameIsAValidIdentifierNotYetCreated) {
  EXPECT_TRUE(IsValidIdentifier(schema())) << schema();
  EXPECT_EQ(SchemaExists(schema()), "0");
}

TEST_F(Harness, TwoFixturesGetDistinctSchemas) {
  ProbeFixture first;
  ProbeFixture second;
  first.SetUp();
  second.SetUp();
  EXPECT_NE(first.schema(), second.schema());
  EXPECT_NE(first.schema(), schema());
  EXPECT_EQ(first.url(), second.url());
  first.TearDown();
  second.TearDown();
}

TEST_F(Harness, TearDownDropsTheSchemaAndItsObjects) {
  ProbeFixture probe;
  probe.SetUp();
  const std::string schema = probe.schema();
  RunPsql("create schema " + schema + "; create table " + schema +
          ".runs (id int primary key); insert into " + schema + ".runs values (1)");
  ASSERT_EQ(SchemaExists(schema), "1");
  ASSERT_EQ(RunPsql("select count(*) from " + schema + ".runs"), "1");
  probe.TearDown();
  EXPECT_EQ(SchemaExists(schema), "0");
}

TEST_F(Harness, TearDownToleratesASchemaNeverCreated) {
  ProbeFixture probe;
  probe.SetUp();
  probe.TearDown();  // must not add a failure
  EXPECT_EQ(SchemaExists(probe.schema()), "0");
}

TEST(UniqueSchemaName, IsFreshValidAndShort) {
  std::set<std::string> names;
  for (int i = 0; i < 1000; ++i) {
    std::string name = UniqueSchemaName();
    EXPECT_TRUE(IsValidIdentifier(name)) << name;
    EXPECT_TRUE(names.insert(name).second) << name;
  }
  EXPECT_EQ(UniqueSchemaName("daemon").rfind("daemon_", 0), 0u);
  EXPECT_EQ(UniqueSchemaName("Store").rfind("store_", 0), 0u);
}

TEST(UniqueSchemaName, ShortensALongPrefix) {
  std::string name = UniqueSchemaName(std::string(100, 'p'));
  EXPECT_LE(name.size(), 63u);
  EXPECT_TRUE(IsValidIdentifier(name)) << name;
}

TEST(UniqueSchemaName, RejectsAnInvalidPrefix) {
  EXPECT_THROW(UniqueSchemaName("1abc"), std::invalid_argument);
  EXPECT_THROW(UniqueSchemaName("a;b"), std::invalid_argument);
  EXPECT_THROW(UniqueSchemaName(""), std::invalid_argument);
}

TEST(RunPsql, ReportsTheServersError) {
  try {
    RunPsql("select * from no_such_table_anywhere");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_table_anywhere"), std::string::npos) << e.what();
  }
}

TEST(RunPsql, ReturnsEmptyForNoRowsAndNull) {
  EXPECT_EQ(RunPsql("select 1 where false"), "");
  EXPECT_EQ(RunPsql("select null"), "");
  EXPECT_EQ(RunPsql("create temporary table t (x int)"), "");
}

TEST(Server, AcceptsOneHundredFiftyConnections) {
  // Daemon tests open a connection per executor slot per worker: more than
  // PostgreSQL's default max_connections of 100.
  if (!HarnessOwnsServer()) GTEST_SKIP() << "external server";
  std::vector<std::unique_ptr<PGconn, decltype(&PQfinish)>> connections;
  for (int i = 0; i < 150; ++i) {
    connections.emplace_back(PQconnectdb(DatabaseUrl().c_str()), &PQfinish);
    ASSERT_EQ(PQstatus(connections.back().get()), CONNECTION_OK)
        << i << ": " << PQerrorMessage(connections.back().get());
  }
  EXPECT_GE(std::stoi(RunPsql("select count(*) from pg_stat_activity where backend_type = "
                              "'client backend'")),
            150);
}

TEST(RestartServer, KeepsTheUrlAndTheData) {
  if (!HarnessOwnsServer()) GTEST_SKIP() << "external server";
  std::string schema = UniqueSchemaName("restart");
  RunPsql("create schema " + schema + "; create table " + schema + ".t (x int); insert into " +
          schema + ".t values (42)");
  std::string before = RunPsql("select pg_postmaster_start_time()");
  RestartServer();
  EXPECT_NE(RunPsql("select pg_postmaster_start_time()"), before);
  EXPECT_EQ(RunPsql("select x from " + schema + ".t"), "42");
  RunPsql("drop schema " + schema + " cascade");
}

}  // namespace
}  // namespace cairn::test
