// The idempotency store end to end: the operator's `cairn idempotency show`
// against the harness's PostgreSQL.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "daemon_process.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;
using ::testing::HasSubstr;

class IdempotencyE2E : public StoreTest {
 protected:
  DaemonOptions Options(const std::string& isolation, int concurrency = 4) const {
    DaemonOptions o = BuiltDaemonOptions(url(), schema(), "e2e.yaml", concurrency);
    o.isolation = isolation;
    o.lease = "2s";
    o.reaper_interval = "300ms";
    return o;
  }

  std::string StartRun(const std::string& workflow, const Json& input) {
    return Sql("SELECT {s}.start_run('" + workflow + "', '" + input.dump() + "'::jsonb)");
  }

  int64_t CountRuns(const std::string& status) const {
    return SqlInt("SELECT count(*) FROM {s}.runs WHERE status = '" + status + "'");
  }

  std::string StatusSummary() const {
    return Sql(
        "SELECT coalesce(string_agg(status || '=' || n, ', ' ORDER BY status), 'no runs') "
        "FROM (SELECT status, count(*) AS n FROM {s}.runs GROUP BY status) s");
  }

  // The effects file's lines, each split into its words (key, run, attempt,
  // clean or in_doubt).
  std::vector<std::vector<std::string>> Effects() const {
    std::vector<std::vector<std::string>> lines;
    std::ifstream in(effects_);
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::vector<std::string> fields;
      for (std::string word; words >> word;) fields.push_back(word);
      lines.push_back(fields);
    }
    return lines;
  }

  Json Context(const std::string& run_id) const {
    return Json::parse(Sql("SELECT context FROM {s}.runs WHERE id = '" + run_id + "'"));
  }

  TempDir dir_{"cairn-idempotency"};
  std::string effects_ = dir_.path() + "/effects";
};

// `cairn idempotency show`: a key's record for people and as JSON, in its
// namespace; an unknown key is not found (exit 3) and says so.
TEST_F(IdempotencyE2E, ShowPrintsAKeysRecordAndAnUnknownKeyIsNotFound) {
  Sql("SELECT {s}.idempotency_claim('charge-1', 'checkout-7', interval '1 hour', 'shop')");
  Sql("SELECT {s}.idempotency_complete('charge-1', 'checkout-7', '{\"charge_id\": \"ch_1\"}',"
      " interval '1 day', 'shop')");
  const std::vector<std::string> connection = {"--database-url", url(), "--schema", schema()};
  auto cairn = [&](std::vector<std::string> args) {
    args.insert(args.end(), connection.begin(), connection.end());
    return RunCommand(CairnBinary(), args);
  };

  const CommandResult json = cairn({"idempotency", "show", "charge-1", "--namespace", "shop",
                                    "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json record = Json::parse(json.out);
  EXPECT_EQ(record.at("status"), "completed");
  EXPECT_EQ(record.at("owner"), "checkout-7");
  EXPECT_EQ(record.at("namespace"), "shop");
  EXPECT_EQ(record.at("result"), (Json{{"charge_id", "ch_1"}}));
  EXPECT_EQ(record.at("claims"), 1);
  EXPECT_FALSE(record.at("expired").get<bool>());

  const CommandResult text = cairn({"idempotency", "show", "charge-1", "--namespace", "shop"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("completed"));
  EXPECT_THAT(text.out, HasSubstr("ch_1"));

  const CommandResult other_namespace = cairn({"idempotency", "show", "charge-1"});
  EXPECT_EQ(other_namespace.exit_code, 3);
  EXPECT_THAT(other_namespace.err,
              HasSubstr("no idempotency key \"charge-1\" in namespace \"default\""));
  EXPECT_EQ(other_namespace.out, "");

  const CommandResult bad_action = cairn({"idempotency", "drop", "charge-1"});
  EXPECT_EQ(bad_action.exit_code, 2);
  EXPECT_THAT(bad_action.err, HasSubstr("unknown action \"drop\""));
  const CommandResult too_long = cairn({"idempotency", "show", std::string(600, 'k')});
  EXPECT_EQ(too_long.exit_code, 2);
  EXPECT_THAT(too_long.err, HasSubstr("over the limit of 512 bytes"));
}

}  // namespace
}  // namespace cairn::test
