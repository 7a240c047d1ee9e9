// Steps for cairn's own tests (engine, end-to-end, loader): each does one
// obvious thing driven by the run's input, so a test's workflow definition
// says what happens. Built into the plugin directory beside noop and example
// (as test_steps.so); not meant for production. Stateless and reentrant.
#include <cairn/sdk.hpp>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

using cairn::sdk::Json;
using cairn::sdk::Outcome;
using cairn::sdk::StepContext;

// A retryable failure with code "boom", every time.
Outcome FailAlways(StepContext& ctx) {
  return cairn::sdk::Fail("boom", "fail_always failed on attempt " + std::to_string(ctx.attempt()));
}

// A permanent failure with code "permanent".
Outcome FailPermanent(StepContext&) {
  return cairn::sdk::FailPermanent("permanent", "fail_permanent never succeeds");
}

// Fails (retryable, code "not_yet") until attempt input.succeed_on_attempt
// (default 3), then continues.
Outcome FailUntilAttempt(StepContext& ctx) {
  const int succeed_on = ctx.input().value("succeed_on_attempt", 3);
  if (ctx.attempt() < succeed_on) {
    return cairn::sdk::Fail("not_yet", "attempt " + std::to_string(ctx.attempt()) + " of " +
                                           std::to_string(succeed_on));
  }
  ctx.set("succeeded_on_attempt", ctx.attempt());
  return cairn::sdk::Next();
}

// Blocks its executor thread for input.sleep_ms (default 100) milliseconds:
// in-flight work for shutdown and lease tests. Not a cairn sleep.
Outcome SleepABit(StepContext& ctx) {
  const int64_t ms = ctx.input().value("sleep_ms", int64_t{100});
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  ctx.set("slept_ms", ms);
  return cairn::sdk::Next();
}

// Appends the attempt number to context.attempts and sets last_attempt.
Outcome RecordAttempt(StepContext& ctx) {
  Json attempts = ctx.context().value("attempts", Json::array());
  attempts.push_back(ctx.attempt());
  ctx.set("attempts", attempts);
  ctx.set("last_attempt", ctx.attempt());
  return cairn::sdk::Next();
}

// Validates "schema.table" (or "table"): identifiers are spliced, not bound.
std::string QualifiedTable(const std::string& name) {
  std::string out;
  std::string part;
  auto flush = [&] {
    bool ok = !part.empty() && part.size() <= 63 && !(part[0] >= '0' && part[0] <= '9');
    for (char c : part) {
      ok = ok &&
           ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
    }
    if (!ok) throw cairn::sdk::Failure("bad_input", "input.table is not schema.table", false);
    out += (out.empty() ? "\"" : ".\"") + part + "\"";
    part.clear();
  };
  for (char c : name) {
    if (c == '.') {
      flush();
    } else {
      part += c;
    }
  }
  flush();
  return out;
}

// Transactional: inserts (run_id, attempt) into input.table, whose columns
// are (run_id text, attempt int); then fails retryably if
// input.fail_after_insert is true (the insert must roll back).
Outcome TxInsert(StepContext& ctx) {
  const std::string table = QualifiedTable(ctx.input().value("table", ""));
  ctx.sql("INSERT INTO " + table + " (run_id, attempt) VALUES ($1, $2)", ctx.run_id(),
          ctx.attempt());
  if (ctx.input().value("fail_after_insert", false)) {
    return cairn::sdk::Fail("after_insert", "tx_insert failed after its insert");
  }
  ctx.set("inserted", true);
  return cairn::sdk::Next();
}

// Transactional: runs input.sql with input.params and sets context.rows.
Outcome SqlQuery(StepContext& ctx) {
  const Json rows =
      ctx.sql_array(ctx.input().value("sql", ""), ctx.input().value("params", Json::array()));
  ctx.set("rows", rows);
  return cairn::sdk::Next();
}

// Throws a C++ exception: the SDK must turn it into a retryable failure.
Outcome Throws(StepContext&) { throw std::runtime_error("thrown by the throws step"); }

// Throws something that is not a std::exception.
Outcome ThrowsUnknown(StepContext&) { throw 42; }

// Sets every field of input.fields in the context (null removes one).
Outcome SetFields(StepContext& ctx) {
  const Json fields = ctx.input().value("fields", Json::object());
  for (const auto& [key, value] : fields.items()) ctx.set(key, value);
  return cairn::sdk::Next();
}

// Jumps to input.target.
Outcome JumpTo(StepContext& ctx) { return cairn::sdk::Jump(ctx.input().value("target", "")); }

// Waits for input.event with key input.key (default "<event>:<run id>"),
// with input.timeout_ms if given.
Outcome WaitFor(StepContext& ctx) {
  const std::string event = ctx.input().value("event", "go");
  const std::string key = ctx.input().value("key", event + ":" + ctx.run_id());
  std::optional<std::chrono::milliseconds> timeout;
  if (ctx.input().contains("timeout_ms")) {
    timeout = std::chrono::milliseconds(ctx.input()["timeout_ms"].get<int64_t>());
  }
  return cairn::sdk::Wait(event, key, timeout);
}

// Sleeps (cairn's durable sleep) for input.sleep_ms, or until input.until.
Outcome SleepFor(StepContext& ctx) {
  if (ctx.input().contains("until")) {
    return cairn::sdk::SleepUntil(ctx.input()["until"].get<std::string>());
  }
  return cairn::sdk::Sleep(std::chrono::milliseconds(ctx.input().value("sleep_ms", 1000)));
}

// Completes with input.output (default {"done": true}).
Outcome CompleteWith(StepContext& ctx) {
  return cairn::sdk::Complete(ctx.input().value("output", Json{{"done", true}}));
}

// Completes with what the step saw, to check what the host passes.
// Signals the run waiting on input.signal_key with input.signal_payload, in
// this step's commit; fails afterwards when input.fail_after_signal is true
// (the signal must then not be sent).
Outcome SendSignal(StepContext& ctx) {
  ctx.signal(ctx.input().value("signal_key", ""),
             ctx.input().value("signal_payload", Json::object()));
  if (ctx.input().value("fail_after_signal", false)) {
    return cairn::sdk::FailPermanent("after_signal", "failed after signalling");
  }
  return cairn::sdk::Next();
}

Outcome Echo(StepContext& ctx) {
  ctx.info("echo");
  return cairn::sdk::Complete({{"run_id", ctx.run_id()},
                               {"workflow", ctx.workflow()},
                               {"step", ctx.step()},
                               {"attempt", ctx.attempt()},
                               {"transactional", ctx.transactional()},
                               {"input", ctx.input()},
                               {"context", ctx.context()}});
}

}  // namespace

// clang-format off
CAIRN_PLUGIN("test_steps", "1.0.0",
             CAIRN_STEP("fail_always", FailAlways),
             CAIRN_STEP("fail_permanent", FailPermanent),
             CAIRN_STEP("fail_until_attempt", FailUntilAttempt),
             CAIRN_STEP("sleep_a_bit", SleepABit),
             CAIRN_STEP("record_attempt", RecordAttempt),
             CAIRN_STEP("tx_insert", TxInsert),
             CAIRN_STEP("sql_query", SqlQuery),
             CAIRN_STEP("throws", Throws),
             CAIRN_STEP("throws_unknown", ThrowsUnknown),
             CAIRN_STEP("set_fields", SetFields),
             CAIRN_STEP("jump_to", JumpTo),
             CAIRN_STEP("wait_for", WaitFor),
             CAIRN_STEP("sleep_for", SleepFor),
             CAIRN_STEP("complete_with", CompleteWith),
             CAIRN_STEP("send_signal", SendSignal),
             CAIRN_STEP("echo", Echo))
// clang-format on
