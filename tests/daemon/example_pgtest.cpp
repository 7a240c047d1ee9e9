// The example order workflow (plugins/example, config/workflows/example.yaml)
// as users run it, against the harness's real PostgreSQL server and a real
// daemon: a paid order ships; a payment that never comes, a cancel and an
// undeliverable parcel undo what the run did, in reverse order, in the shop's
// own tables.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "example_fixture.hpp"

namespace cairn::test {
namespace {

using Json = nlohmann::json;

class ExampleOrder : public ExampleOrderTest {
 protected:
  // "<stock status>/<payment status>" of an order; "-" where there is no row.
  std::string Shop(const std::string& order_id) const {
    return Sql("SELECT coalesce((SELECT status FROM {s}.reservations WHERE order_id = '" +
               order_id +
               "'), '-') || '/' || coalesce((SELECT status FROM {s}.orders "
               "WHERE order_id = '" +
               order_id + "'), '-')");
  }

  std::string Compensated(const std::string& id) const {
    return Sql(
        "SELECT coalesce(string_agg(step, ' ' ORDER BY position), '') FROM "
        "{s}.run_events WHERE run_id = '" +
        id + "' AND kind = 'compensated'");
  }

  std::string Log() const { return daemon_ ? daemon_->Log() : ""; }

  int CountInLog(const std::string& text) const {
    const std::string log = Log();
    int count = 0;
    for (auto at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++count;
    return count;
  }
};

TEST_F(ExampleOrder, APaidOrderShips) {
  const std::string id = Order("A-1");
  ASSERT_TRUE(WaitForStatus(id, "waiting")) << Log();
  EXPECT_EQ(Shop("A-1"), "reserved/-");
  EXPECT_EQ(Signal("payment:A-1"), "delivered");
  ASSERT_TRUE(WaitForStatus(id, "completed")) << Log();
  EXPECT_EQ(Shop("A-1"), "shipped/charged");
  EXPECT_EQ(RunColumn(id, "output->>'charged_cents'"), "1800");
  EXPECT_EQ(Compensated(id), "");
  // The card was charged once, through the idempotency store, in the run's
  // namespace and owned by the run; the run carries the provider's answer.
  EXPECT_EQ(Sql("SELECT status || ' ' || owner || ' ' || claims || ' ' || (result->>'charge_id') "
                "FROM {s}.idempotency_keys WHERE namespace = 'default' AND key = 'charge:A-1'"),
            "completed run:" + id + " 1 ch_" + id + "_1");
  EXPECT_EQ(RunColumn(id, "context->>'charge_id'"), "ch_" + id + "_1");
  EXPECT_EQ(CountInLog("payment provider: charged 1800 cents for order A-1"), 1);
}

TEST_F(ExampleOrder, AnUndeliverableOrderIsRefundedThenReleased) {
  const std::string id = Order("A-2", {{"undeliverable", true}});
  ASSERT_TRUE(WaitForStatus(id, "waiting")) << Log();
  EXPECT_EQ(Signal("payment:A-2"), "delivered");
  ASSERT_TRUE(WaitForStatus(id, "failed")) << Log();
  EXPECT_EQ(Compensated(id), "refund_payment release_stock");
  EXPECT_EQ(Shop("A-2"), "released/refunded");
  EXPECT_EQ(RunColumn(id, "error"), "the carrier cannot deliver order A-2");
}

TEST_F(ExampleOrder, AnUnpaidOrderTimesOutAndReleasesItsStock) {
  const std::string id = Order("A-3", {{"payment_timeout_ms", 300}});
  ASSERT_TRUE(WaitForStatus(id, "failed")) << Log();
  EXPECT_EQ(Compensated(id), "release_stock");
  EXPECT_EQ(Shop("A-3"), "released/-");
  EXPECT_EQ(Signal("payment:A-3"), "expired");
}

TEST_F(ExampleOrder, ACancelledOrderReleasesItsStock) {
  const std::string id = Order("A-4");
  ASSERT_TRUE(WaitForStatus(id, "waiting")) << Log();
  auto cancel = Cli({"cancel", id, "--reason", "customer changed their mind"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.out << cancel.err;
  ASSERT_TRUE(WaitForStatus(id, "cancelled")) << Log();
  EXPECT_EQ(Compensated(id), "release_stock");
  EXPECT_EQ(Shop("A-4"), "released/-");
  EXPECT_EQ(Signal("payment:A-4"), "cancelled");
}

TEST_F(ExampleOrder, RejectedInputFailsWithNothingToUndo) {
  const std::string id = Order("A-5", {{"sku", ""}});
  ASSERT_TRUE(WaitForStatus(id, "failed")) << Log();
  EXPECT_EQ(RunColumn(id, "error"), "input.sku is required");
  EXPECT_EQ(RunColumn(id, "final_status"), "");
  EXPECT_EQ(Shop("A-5"), "-/-");
}

}  // namespace
}  // namespace cairn::test
