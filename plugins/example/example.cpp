// The example plugin: the steps of a small order workflow, written with the
// C++ SDK (cairn/sdk.hpp). Read it top to bottom:
//
//   reserve_stock -> await_payment -> charge_payment -> ship
//                    (waits for payment_confirmed)
//   compensations: release_stock (for reserve_stock), refund_payment (for
//   charge_payment), run in reverse order when the run fails or is cancelled
//
// Input of a run: {"order_id": "A-1001", "sku": "mug", "quantity": 2,
//                  "amount_cents": 1800, "schema": "cairn_example"}
// Every step but await_payment is transactional: it writes to
// <schema>.reservations or <schema>.orders (created by schema.sql) in the
// transaction of its own checkpoint. charge_payment also has an effect
// outside the database, the card charge, made once with ctx.once. Steps keep
// no state between calls, so they are reentrant.
#include <cairn/sdk.hpp>
#include <string>

namespace {

using cairn::sdk::Json;
using cairn::sdk::Outcome;
using cairn::sdk::StepContext;

std::string OrderId(const StepContext& ctx) {
  std::string id = ctx.input().value("order_id", "");
  if (id.empty()) throw cairn::sdk::Failure("bad_input", "input.order_id is required", false);
  return id;
}

// The schema that holds the orders table. It is spliced into the statement
// (identifiers cannot be bound parameters), so it must be a plain identifier.
std::string Table(const StepContext& ctx, const std::string& table) {
  const std::string schema = ctx.input().value("schema", "cairn_example");
  bool ok = !schema.empty() && schema.size() <= 63 && !(schema[0] >= '0' && schema[0] <= '9');
  for (char c : schema) {
    ok = ok &&
         ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
  }
  if (!ok) throw cairn::sdk::Failure("bad_input", "input.schema is not a valid identifier", false);
  return "\"" + schema + "\"." + table;
}

// Puts the goods aside: the reservation row commits with the checkpoint.
Outcome ReserveStock(StepContext& ctx) {
  const std::string sku = ctx.input().value("sku", "");
  const int quantity = ctx.input().value("quantity", 1);
  if (sku.empty()) return cairn::sdk::FailPermanent("bad_input", "input.sku is required");
  if (quantity <= 0) return cairn::sdk::FailPermanent("bad_input", "input.quantity must be > 0");
  ctx.sql("INSERT INTO " + Table(ctx, "reservations") +
              " (order_id, sku, quantity) VALUES ($1, $2, $3)",
          OrderId(ctx), sku, quantity);
  ctx.set("reserved", Json{{"sku", sku}, {"quantity", quantity}});
  ctx.info("reserved " + std::to_string(quantity) + " x " + sku);
  return cairn::sdk::Next();
}

// Charges the card at the payment provider once, whatever happens to this
// step (a retry, a timeout, a worker killed after the charge): ctx.once
// claims the key charge:<order_id> in the idempotency store, calls the
// provider only when the claim is this run's, and stores the provider's
// answer, which every later attempt gets back instead of charging again.
// Then records the charge in the same transaction as the step's checkpoint:
// the row exists exactly when the run has moved past this step.
Outcome ChargePayment(StepContext& ctx) {
  const std::string order_id = OrderId(ctx);
  const int64_t amount_cents = ctx.input().value("amount_cents", int64_t{0});
  if (amount_cents < 0) return cairn::sdk::FailPermanent("bad_input", "amount_cents < 0");
  const Json charge = ctx.once(
      "charge:" + order_id, std::chrono::hours(24 * 7),
      [&](const cairn::sdk::IdempotencyState& claim) {
        // A real step calls the provider's API here, passing the same
        // key as its own idempotency key, so that a charge in doubt
        // (claim.in_doubt: an earlier attempt died mid-call) is not
        // made twice at the provider either.
        const std::string charge_id =
            std::string("ch_") + ctx.run_id() + "_" + std::to_string(claim.claims);
        ctx.info("payment provider: charged " + std::to_string(amount_cents) + " cents for order " +
                 order_id + " as " + charge_id +
                 (claim.in_doubt ? " (in doubt: an earlier attempt may have charged)" : ""));
        return Json{{"charge_id", charge_id}, {"amount_cents", amount_cents}};
      },
      // The claim is held this long while the provider is called: another
      // run for the same order waits at most this for a crashed one.
      std::chrono::minutes(10));
  ctx.sql("INSERT INTO " + Table(ctx, "orders") + " (order_id, amount_cents) VALUES ($1, $2)",
          order_id, amount_cents);
  ctx.set("charged_cents", amount_cents);
  ctx.set("charge_id", charge.at("charge_id"));
  return cairn::sdk::Next();
}

// Parks the run until the payment provider confirms: event
// payment_confirmed, correlation key payment:<order_id>.
Outcome AwaitPayment(StepContext& ctx) {
  const int64_t timeout_ms = ctx.input().value("payment_timeout_ms", int64_t{24 * 3600 * 1000});
  return cairn::sdk::Wait("payment_confirmed", "payment:" + OrderId(ctx),
                          std::chrono::milliseconds(timeout_ms));
}

// Hands the parcel over and finishes the run. An order whose input says
// "undeliverable": true fails here for good, after it was paid and charged:
// its compensations refund the payment and release the stock.
Outcome Ship(StepContext& ctx) {
  if (ctx.input().value("undeliverable", false)) {
    return cairn::sdk::FailPermanent("undeliverable",
                                     "the carrier cannot deliver order " + OrderId(ctx));
  }
  ctx.sql("UPDATE " + Table(ctx, "reservations") +
              " SET status = 'shipped', updated_at = now() WHERE order_id = $1",
          OrderId(ctx));
  return cairn::sdk::Complete({{"order_id", OrderId(ctx)},
                               {"shipped", ctx.context().value("reserved", Json::object())},
                               {"charged_cents", ctx.context().value("charged_cents", 0)}});
}

// Compensation of reserve_stock: gives the goods back.
Outcome ReleaseStock(StepContext& ctx) {
  const Json rows = ctx.sql("UPDATE " + Table(ctx, "reservations") +
                                " SET status = 'released', updated_at = now()"
                                " WHERE order_id = $1 AND status = 'reserved' RETURNING order_id",
                            OrderId(ctx));
  ctx.set("released", !rows.empty());
  ctx.erase("reserved");
  return cairn::sdk::Next();
}

// Compensation of charge_payment: marks the charge refunded.
Outcome RefundPayment(StepContext& ctx) {
  const Json rows = ctx.sql("UPDATE " + Table(ctx, "orders") +
                                " SET status = 'refunded', refunded_at = now()"
                                " WHERE order_id = $1 AND status = 'charged' RETURNING order_id",
                            OrderId(ctx));
  ctx.set("refunded", !rows.empty());
  return cairn::sdk::Next();
}

}  // namespace

// clang-format off
CAIRN_PLUGIN("example", "1.0.0",
             CAIRN_STEP("reserve_stock", ReserveStock),
             CAIRN_STEP("charge_payment", ChargePayment),
             CAIRN_STEP("await_payment", AwaitPayment),
             CAIRN_STEP("ship", Ship),
             CAIRN_STEP("release_stock", ReleaseStock),
             CAIRN_STEP("refund_payment", RefundPayment))
// clang-format on
