// A DaemonTest that serves the example order workflow as users run it
// (plugins/example, config/workflows/example.yaml): the shop's tables in the
// test's schema and one real `cairn run` daemon, started in SetUp and
// stopped in TearDown. Only for test sources (it needs the build paths).
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "daemon_fixture.hpp"

namespace cairn::test {

class ExampleOrderTest : public DaemonTest {
 protected:
  ExampleOrderTest() : DaemonTest("config/workflows/example.yaml") {}

  void SetUp() override {
    DaemonTest::SetUp();
    // The shop's tables, from the plugin's own schema.sql, in the test schema.
    std::ifstream file(SourceDir() + "/plugins/example/schema.sql");
    std::stringstream text;
    text << file.rdbuf();
    std::string ddl = text.str();
    for (auto at = ddl.find("cairn_example"); at != std::string::npos;
         at = ddl.find("cairn_example", at)) {
      ddl.replace(at, std::string("cairn_example").size(), "\"" + schema() + "\"");
    }
    Sql(ddl);
    // Not StartDaemon: a daemon that did not start must fail SetUp, which
    // skips the test rather than letting it wait out its timeouts.
    daemon_ = std::make_unique<DaemonProcess>(Options(4));
    ASSERT_TRUE(daemon_->StartAndWaitReady()) << daemon_->Log();
  }

  void TearDown() override {
    if (daemon_) Stop(*daemon_);
    DaemonTest::TearDown();
  }

  // Starts an order run; extra input keys (undeliverable, payment_timeout_ms)
  // steer the example's steps.
  std::string Order(const std::string& order_id, Json extra = Json::object()) {
    Json input = {{"order_id", order_id},
                  {"sku", "mug"},
                  {"quantity", 2},
                  {"amount_cents", 1800},
                  {"schema", schema()}};
    input.update(extra);
    return StartRun("order", input);
  }

  // Confirms a payment through the SQL API; returns the signal's outcome.
  std::string Signal(const std::string& key) {
    return Sql("SELECT {s}.signal('" + key + "', '{\"provider_ref\": \"ch_1\"}'::jsonb)");
  }

  std::unique_ptr<DaemonProcess> daemon_;
};

}  // namespace cairn::test
