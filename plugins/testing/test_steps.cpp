// Steps for cairn's own tests (engine, end-to-end, loader): each does one
// obvious thing driven by the run's input, so a test's workflow definition
// says what happens. Built into the plugin directory beside noop and example
// (as test_steps.so); not meant for production. Stateless and reentrant.
#include <unistd.h>

#include <cairn/sdk.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using cairn::sdk::Json;
using cairn::sdk::Outcome;
using cairn::sdk::StepContext;

// A retryable failure with code "boom", every time.
Outcome FailAlways(StepContext& ctx) {
  return cairn::sdk::Fail("boom", "fail_always failed on attempt " + std::to_string(ctx.attempt()));
}

// A permanent failure with input.message (whatever it holds) and code
// input.code, and a log line with the same message.
Outcome FailWith(StepContext& ctx) {
  const std::string message = ctx.input().value("message", "failed");
  ctx.warn(message);
  return cairn::sdk::FailPermanent(ctx.input().value("code", "failed"), message);
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
// `field` names the input field in the error.
std::string QualifiedTable(const std::string& name, const std::string& field = "input.table") {
  std::string out;
  std::string part;
  auto flush = [&] {
    bool ok = !part.empty() && part.size() <= 63 && !(part[0] >= '0' && part[0] <= '9');
    for (char c : part) {
      ok = ok &&
           ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
    }
    if (!ok) throw cairn::sdk::Failure("bad_input", field + " is not schema.table", false);
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
// input.fail_after_insert is true, or jumps to input.jump_after_insert (the
// insert must roll back either way when that is a step the workflow lacks).
Outcome TxInsert(StepContext& ctx) {
  const std::string table = QualifiedTable(ctx.input().value("table", ""));
  ctx.sql("INSERT INTO " + table + " (run_id, attempt) VALUES ($1, $2)", ctx.run_id(),
          ctx.attempt());
  if (ctx.input().value("fail_after_insert", false)) {
    return cairn::sdk::Fail("after_insert", "tx_insert failed after its insert");
  }
  if (ctx.input().contains("jump_after_insert")) {
    return cairn::sdk::Jump(ctx.input()["jump_after_insert"].get<std::string>());
  }
  ctx.set("inserted", true);
  return cairn::sdk::Next();
}

// Like tx_insert without fail_after_insert, but sleeps input.sleep_ms
// (default 2000) milliseconds after the insert, holding the step transaction
// open (in-flight transactional work for cancellation and lease tests); then
// sets context.inserted.
Outcome TxInsertSlow(StepContext& ctx) {
  const std::string table = QualifiedTable(ctx.input().value("table", ""));
  ctx.sql("INSERT INTO " + table + " (run_id, attempt) VALUES ($1, $2)", ctx.run_id(),
          ctx.attempt());
  const int64_t ms = ctx.input().value("sleep_ms", int64_t{2000});
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  ctx.set("inserted", true);
  return cairn::sdk::Next();
}

// Transactional: inserts (run_id, step, attempt) into input.journal, whose
// columns are (run_id text, step text, attempt int); step is the name the
// step was invoked as. Shared by journal, undo_a, undo_b and undo_c.
void WriteJournal(StepContext& ctx) {
  const std::string journal = QualifiedTable(ctx.input().value("journal", ""), "input.journal");
  ctx.sql("INSERT INTO " + journal + " (run_id, step, attempt) VALUES ($1, $2, $3)", ctx.run_id(),
          ctx.step(), ctx.attempt());
}

// Registered as journal, undo_a, undo_b and undo_c: writes one journal row
// (see WriteJournal), then continues. Compensation tests read the journal to
// see which steps ran, in which order.
Outcome Journal(StepContext& ctx) {
  WriteJournal(ctx);
  return cairn::sdk::Next();
}

// Registered as journal_compensates and undo_shared: writes one journal row
// whose step is "<step>><the step it undoes>", or "<step>>none" for a forward
// step, so a test sees what ctx.step() and ctx.compensates() said.
Outcome JournalCompensates(StepContext& ctx) {
  const std::string journal = QualifiedTable(ctx.input().value("journal", ""), "input.journal");
  const char* undone = ctx.compensates();
  ctx.sql("INSERT INTO " + journal + " (run_id, step, attempt) VALUES ($1, $2, $3)", ctx.run_id(),
          std::string(ctx.step()) + ">" + (undone != nullptr ? undone : "none"), ctx.attempt());
  return cairn::sdk::Next();
}

// Transactional: reads `SELECT open FROM <input.gate>` (one boolean row);
// with no row or false it fails (retryable) with code "gate_closed",
// otherwise it writes a journal row like journal and continues. Lets a test
// make a compensation step fail, then succeed once the gate is opened.
Outcome UndoGated(StepContext& ctx) {
  const std::string gate = QualifiedTable(ctx.input().value("gate", ""), "input.gate");
  const Json rows = ctx.sql("SELECT open FROM " + gate);
  const Json open = rows.empty() ? Json(false) : rows[0].value("open", Json(false));
  if (open != Json(true)) return cairn::sdk::Fail("gate_closed", "the gate " + gate + " is closed");
  WriteJournal(ctx);
  return cairn::sdk::Next();
}

// Starts one child run per element of input.children ({"workflow": ...,
// "input": {...}}, and "cancel_when_parent_fails" / "cancel_when_first_done"
// for its ChildOptions), in order; then, when input.child_wait is "all" or
// "first", waits for them (context field input.children_event, default
// "children"; timeout input.children_timeout_ms if given), otherwise
// continues without waiting. A child without options is started with the
// plain start_child, as a plugin older than ABI 1.4 does.
Outcome StartChildren(StepContext& ctx) {
  for (const Json& child : ctx.input().value("children", Json::array())) {
    const std::string workflow = child.value("workflow", "");
    const Json input = child.value("input", Json::object());
    if (!child.contains("cancel_when_parent_fails") && !child.contains("cancel_when_first_done")) {
      ctx.start_child(workflow, input);
      continue;
    }
    cairn::sdk::ChildOptions options;
    options.cancel_when_parent_fails = child.value("cancel_when_parent_fails", false);
    options.cancel_when_first_done = child.value("cancel_when_first_done", false);
    ctx.start_child(workflow, input, options);
  }
  const std::string mode = ctx.input().value("child_wait", "");
  if (mode != "all" && mode != "first") return cairn::sdk::Next();
  std::optional<std::chrono::milliseconds> timeout;
  if (ctx.input().contains("children_timeout_ms")) {
    timeout = std::chrono::milliseconds(ctx.input()["children_timeout_ms"].get<int64_t>());
  }
  return cairn::sdk::WaitChildren(
      mode == "all" ? cairn::sdk::ChildWait::kAll : cairn::sdk::ChildWait::kFirst,
      ctx.input().value("children_event", "children"), timeout);
}

// A child run's work: blocks its executor thread for input.sleep_ms
// (default 0) milliseconds, then fails permanently with code "child_failed"
// if input.fail is true, otherwise completes with {"n": input.n (default 0),
// "run_id": <its run id>}.
Outcome ChildWork(StepContext& ctx) {
  const int64_t ms = ctx.input().value("sleep_ms", int64_t{0});
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  if (ctx.input().value("fail", false)) {
    return cairn::sdk::FailPermanent("child_failed", "child_work was told to fail");
  }
  return cairn::sdk::Complete({{"n", ctx.input().value("n", Json(0))}, {"run_id", ctx.run_id()}});
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

// Completes with the id of the process the step ran in: the daemon's, on a
// thread, or a step process's.
Outcome ProcessId(StepContext&) {
  return cairn::sdk::Complete({{"pid", static_cast<int64_t>(::getpid())}});
}

// Poison steps: each takes down the process it runs in, the way a buggy
// plugin would. Under process isolation only its step process dies.
Outcome Abort(StepContext&) { std::abort(); }

// Writes through input.address (default 0): the compiler cannot see the
// null pointer coming, so this is a real SIGSEGV, not a trap it inserted.
Outcome NullDereference(StepContext& ctx) {
  auto* nowhere = reinterpret_cast<volatile int*>(
      static_cast<uintptr_t>(ctx.input().value("address", int64_t{0})));
  *nowhere = 42;
  return cairn::sdk::Next();
}

// Allocates and touches input.bytes (default 4 GiB): past any memory limit.
Outcome Allocate(StepContext& ctx) {
  const auto bytes = ctx.input().value("bytes", int64_t{4} << 30);
  std::vector<char> block(static_cast<size_t>(bytes), 'x');
  ctx.set("allocated", static_cast<int64_t>(block.size()));
  return cairn::sdk::Next();
}

// Never returns (a blocking call that hangs): only a timeout ends it.
Outcome Hang(StepContext&) {
  while (true) std::this_thread::sleep_for(std::chrono::hours(1));
}

// An effect outside the database: a line appended to a file.
void AppendLine(const std::string& path, const std::string& line) {
  std::FILE* file = std::fopen(path.c_str(), "a");
  if (file == nullptr) throw cairn::sdk::Failure("bad_input", "cannot open " + path, false);
  std::fputs((line + "\n").c_str(), file);
  std::fclose(file);
}

// Makes an effect once per input.key with ctx.once (ttl input.ttl_ms,
// default 1 h): the effect appends "<key> <run id> <attempt> <in_doubt>" to
// input.effects_file and lasts input.effect_ms. Only in the invocation that
// made the effect with a claim not in doubt, input.hang_in_effect hangs
// after the effect but before the key completes, and
// input.hang_after_effect hangs after it completed, before the checkpoint
// (a minute each; a kill or the step's timeout ends them). Sets
// context.once: the result, whether this invocation made the effect, and
// whether its claim was in doubt.
Outcome OnceEffect(StepContext& ctx) {
  const std::string key = ctx.input().value("key", "");
  const std::string file = ctx.input().value("effects_file", "");
  const auto ttl = std::chrono::milliseconds(ctx.input().value("ttl_ms", int64_t{3600000}));
  const auto effect = std::chrono::milliseconds(ctx.input().value("effect_ms", int64_t{0}));
  bool made = false;
  bool in_doubt = false;
  const Json result = ctx.once(key, ttl, [&](const cairn::sdk::IdempotencyState& state) {
    made = true;
    in_doubt = state.in_doubt;
    AppendLine(file, key + " " + ctx.run_id() + " " + std::to_string(ctx.attempt()) + " " +
                         (in_doubt ? "in_doubt" : "clean"));
    std::this_thread::sleep_for(effect);
    if (!in_doubt && ctx.input().value("hang_in_effect", false)) {
      std::this_thread::sleep_for(std::chrono::minutes(1));
    }
    return Json{{"charged_by", ctx.run_id()}, {"key", key}};
  });
  if (made && !in_doubt && ctx.input().value("hang_after_effect", false)) {
    std::this_thread::sleep_for(std::chrono::minutes(1));
  }
  ctx.set("once", {{"result", result}, {"made_effect", made}, {"in_doubt", in_doubt}});
  return cairn::sdk::Next();
}

}  // namespace

// clang-format off
CAIRN_PLUGIN("test_steps", "1.0.0",
             CAIRN_STEP("fail_always", FailAlways),
             CAIRN_STEP("abort", Abort),
             CAIRN_STEP("null_dereference", NullDereference),
             CAIRN_STEP("allocate", Allocate),
             CAIRN_STEP("hang", Hang),
             CAIRN_STEP("fail_permanent", FailPermanent),
             CAIRN_STEP("fail_with", FailWith),
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
             CAIRN_STEP("tx_insert_slow", TxInsertSlow),
             CAIRN_STEP("journal", Journal),
             CAIRN_STEP("undo_a", Journal),
             CAIRN_STEP("undo_b", Journal),
             CAIRN_STEP("undo_c", Journal),
             CAIRN_STEP("undo_gated", UndoGated),
             CAIRN_STEP("journal_compensates", JournalCompensates),
             CAIRN_STEP("undo_shared", JournalCompensates),
             CAIRN_STEP("start_children", StartChildren),
             CAIRN_STEP("child_work", ChildWork),
             CAIRN_STEP("echo", Echo),
             CAIRN_STEP("process_id", ProcessId),
             CAIRN_STEP("once_effect", OnceEffect))
// clang-format on
