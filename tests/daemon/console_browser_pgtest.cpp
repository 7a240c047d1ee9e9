// The console in a real browser (tests/console/browser_test.py: chromium and
// chromium-driver through python3-selenium). This test sets the stage with
// real parts: the harness's PostgreSQL, a real `cairn run` serving the
// example order workflow (plugins/example, config/workflows/example.yaml),
// orders in each state, a run full of hostile text, 500 finished runs to page
// through, and a real `cairn console` with an access token. Screenshots of
// every page land in <build>/console-screenshots.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "console_support.hpp"
#include "example_fixture.hpp"

namespace cairn::test {
namespace {

const std::string kToken = "browser-test-token-0123456789abcdef";

using ConsoleBrowser = ExampleOrderTest;

TEST_F(ConsoleBrowser, ShowsFiltersPagesAndActsOnTheExampleOrders) {
  const std::string paid = Order("W-1");
  const std::string refunded = Order("W-2", {{"undeliverable", true}});
  const std::string to_signal = Order("W-3");
  const std::string to_cancel = Order("W-4");
  for (const auto& id : {paid, refunded, to_signal, to_cancel}) {
    ASSERT_TRUE(WaitForStatus(id, "waiting")) << daemon_->Log();
  }
  EXPECT_EQ(Signal("payment:W-1"), "delivered");
  EXPECT_EQ(Signal("payment:W-2"), "delivered");
  ASSERT_TRUE(WaitForStatus(paid, "completed")) << daemon_->Log();
  ASSERT_TRUE(WaitForStatus(refunded, "failed")) << daemon_->Log();

  // A failed order whose key, input and error hold markup, quotes and
  // control characters (failed: no worker picks it up).
  const std::string xss =
      Sql("INSERT INTO {s}.runs (workflow, definition_version, definition_hash, run_key, input, "
          "status, finished_at, error) SELECT 'order', version, hash, "
          "E'<script>alert(\"k\")</script>\\'\\x01', "
          "'{\"note\": \"</pre><script>alert(1)</script>\", \"<img src=x onerror=alert(3)>\": 1}', "
          "'failed', now(), E'<script>alert(2)</script>\"\\x07' "
          "FROM {s}.workflow_definitions WHERE workflow = 'order' LIMIT 1 RETURNING id");
  ASSERT_FALSE(xss.empty());
  // 500 finished runs in 13 distinct creation times: the id breaks ties.
  Sql("INSERT INTO {s}.runs (workflow, definition_version, definition_hash, status, "
      "finished_at, created_at) SELECT 'bulk', 1, 'bulk-hash', 'completed', now(), "
      "now() - (g % 13) * interval '1 second' FROM generate_series(1, 500) g");
  Json bulk = Json::array();
  for (const auto& id : [&] {
         std::vector<std::string> ids;
         const std::string all =
             Sql("SELECT string_agg(id::text, ',') FROM {s}.runs WHERE workflow = 'bulk'");
         for (size_t start = 0; start < all.size();) {
           size_t end = all.find(',', start);
           if (end == std::string::npos) end = all.size();
           ids.push_back(all.substr(start, end - start));
           start = end + 1;
         }
         return ids;
       }()) {
    bulk.push_back(id);
  }
  ASSERT_EQ(bulk.size(), 500u);

  ConsoleProcess console(url(), schema(), kToken);
  ASSERT_TRUE(console.WaitServing()) << console.process().Log();

  TempDir dir("cairn-browser");
  const std::string screenshots =
      std::filesystem::weakly_canonical(BuiltPluginDir() + "/../console-screenshots").string();
  std::filesystem::remove_all(screenshots);  // this run's pictures only
  const Json setup = {{"base", console.Base()},
                      {"token", kToken},
                      {"screenshots", screenshots},
                      {"runs",
                       {{"paid", paid},
                        {"refunded", refunded},
                        {"to_signal", to_signal},
                        {"to_cancel", to_cancel},
                        {"xss", xss},
                        {"bulk", bulk}}}};
  const std::string setup_file = dir.Write("setup.json", setup.dump());
  ::chmod(setup_file.c_str(), 0600);
  const CommandResult result =
      RunCommand("/usr/bin/python3", {SourceDir() + "/tests/console/browser_test.py", setup_file},
                 std::chrono::seconds(150));
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err << "\n---- console log ----\n"
                                 << console.process().Log();
  std::cout << result.out;
  // What the browser did, the database confirms.
  EXPECT_EQ(RunColumn(to_signal, "status"), "completed");
  EXPECT_EQ(RunColumn(to_cancel, "cancel_reason"), "customer called");
}

}  // namespace
}  // namespace cairn::test
