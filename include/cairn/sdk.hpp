// The header-only C++17 SDK for cairn step plugins, built on the C ABI in
// cairn/plugin.h: steps are ordinary functions from a StepContext to an
// Outcome, and CAIRN_PLUGIN generates the exported entry point. Every
// generated trampoline catches all exceptions, so nothing unwinds through C
// frames: an exception becomes a retryable failure carrying its message.
//
//   #include <cairn/sdk.hpp>
//
//   cairn::sdk::Outcome Reserve(cairn::sdk::StepContext& ctx) {
//     int quantity = ctx.input().value("quantity", 1);
//     ctx.set("reserved", quantity);
//     return cairn::sdk::Next();
//   }
//
//   CAIRN_PLUGIN("shop", "1.0.0", CAIRN_STEP("reserve", Reserve))
//
// Thread-safety: a step function may run on several threads at once, for
// different runs; a StepContext belongs to one invocation and one thread.
#pragma once

#include <cairn/plugin.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace cairn {
namespace sdk {

using Json = nlohmann::json;

enum class LogLevel {
  kDebug = CAIRN_LOG_DEBUG,
  kInfo = CAIRN_LOG_INFO,
  kWarn = CAIRN_LOG_WARN,
  kError = CAIRN_LOG_ERROR,
};

// Throw from a step to fail it with a code; StepContext::sql throws it too.
// Any other exception fails the step as retryable with code "exception".
class Failure : public std::runtime_error {
 public:
  Failure(std::string code, const std::string& message, bool retryable = true)
      : std::runtime_error(message), code_(std::move(code)), retryable_(retryable) {}
  const std::string& code() const { return code_; }
  bool retryable() const { return retryable_; }

 private:
  std::string code_;
  bool retryable_;
};

// When a child run StepContext::start_child starts is cancelled along with
// its parent (ABI 1.4). Cancelling the parent always cancels its unfinished
// children, whatever they asked.
struct ChildOptions {
  // The parent fails, however it does (a step failing for good, a crash, its
  // deadline, a wait timing out): cancelled in the transaction that fails it.
  bool cancel_when_parent_fails = false;
  // The parent waits for the first of its children (ChildWait::kFirst) and
  // another child is that first: cancelled in the commit of the parent's step
  // that resumes with its summary.
  bool cancel_when_first_done = false;
};

// Which child runs WaitChildren waits for: all the children the step
// started, or the first of them to finish.
enum class ChildWait {
  kAll = CAIRN_CHILDREN_ALL,
  kFirst = CAIRN_CHILDREN_FIRST,
};

// What a step decided. Build one with Next, Jump, Wait, WaitChildren, Sleep,
// SleepUntil, Complete, Fail or FailPermanent.
class Outcome {
 public:
  enum class Kind { kNext, kJump, kWait, kWaitChildren, kSleep, kSleepUntil, kComplete, kFail };

  Kind kind() const { return kind_; }

  // Hands the outcome to the host; returns what the step function returns.
  cairn_result Apply(const cairn_host_api* host, cairn_step_ctx* ctx) const {
    switch (kind_) {
      case Kind::kNext:
        return host->next(ctx);
      case Kind::kJump:
        return host->jump(ctx, text_.c_str());
      case Kind::kWait:
        return host->wait(ctx, text_.c_str(), key_.c_str(), number_);
      case Kind::kWaitChildren:
        if (host->struct_size <
            offsetof(cairn_host_api, wait_children) + sizeof(host->wait_children)) {
          host->fail(ctx, 0, "plugin_error",
                     "the host is older than ABI 1.2 and cannot wait for child runs");
          return CAIRN_ERROR;
        }
        return host->wait_children(ctx, static_cast<cairn_child_wait>(mode_), text_.c_str(),
                                   number_);
      case Kind::kSleep:
        return host->sleep_ms(ctx, number_);
      case Kind::kSleepUntil:
        return host->sleep_until(ctx, text_.c_str());
      case Kind::kComplete: {
        const std::string output = json_.dump();
        return host->complete(ctx, cairn_bytes{output.data(), output.size()});
      }
      case Kind::kFail:
        host->fail(ctx, retryable_ ? 1 : 0, key_.c_str(), text_.c_str());
        return retryable_ ? CAIRN_RETRY : CAIRN_ERROR;
    }
    return CAIRN_ERROR;
  }

 private:
  friend Outcome Next();
  friend Outcome Jump(std::string step);
  friend Outcome Wait(std::string event, std::string key,
                      std::optional<std::chrono::milliseconds> timeout);
  friend Outcome WaitChildren(ChildWait mode, std::string event,
                              std::optional<std::chrono::milliseconds> timeout);
  friend Outcome Sleep(std::chrono::milliseconds duration);
  friend Outcome SleepUntil(std::string timestamptz);
  friend Outcome Complete(Json output);
  friend Outcome Fail(std::string code, std::string message, bool retryable);

  explicit Outcome(Kind kind) : kind_(kind) {}

  Kind kind_;
  std::string text_;    // jump target, wait event, sleep-until time, fail message
  std::string key_;     // wait correlation key, fail code
  int64_t number_ = 0;  // wait timeout (-1: none), sleep milliseconds
  bool retryable_ = true;
  ChildWait mode_ = ChildWait::kAll;  // wait-children mode
  Json json_;                         // complete output
};

// Continue with the next step of the definition.
inline Outcome Next() { return Outcome(Outcome::Kind::kNext); }

// Continue with the named step.
inline Outcome Jump(std::string step) {
  Outcome o(Outcome::Kind::kJump);
  o.text_ = std::move(step);
  return o;
}

// Park the run until `event` is signalled with correlation key `key`; without
// a timeout it waits forever.
inline Outcome Wait(std::string event, std::string key,
                    std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
  Outcome o(Outcome::Kind::kWait);
  o.text_ = std::move(event);
  o.key_ = std::move(key);
  o.number_ = timeout ? static_cast<int64_t>(timeout->count()) : -1;
  return o;
}

// Park the run until all (ChildWait::kAll) or the first (ChildWait::kFirst)
// of the child runs this step started with StepContext::start_child have
// finished; then the run continues with the next step and context[event] is
// a JSON array of {"id", "workflow", "status", "output", "error"} for those
// children. Without a timeout it waits forever; on timeout the step's
// on_wait_timeout applies, as for Wait. Needs a host with ABI 1.2.
inline Outcome WaitChildren(ChildWait mode, std::string event = "children",
                            std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
  Outcome o(Outcome::Kind::kWaitChildren);
  o.mode_ = mode;
  o.text_ = std::move(event);
  o.number_ = timeout ? static_cast<int64_t>(timeout->count()) : -1;
  return o;
}

// Continue with the next step after `duration` of database time.
inline Outcome Sleep(std::chrono::milliseconds duration) {
  Outcome o(Outcome::Kind::kSleep);
  o.number_ = static_cast<int64_t>(duration.count());
  return o;
}

// Continue with the next step at a PostgreSQL timestamptz given as text.
inline Outcome SleepUntil(std::string timestamptz) {
  Outcome o(Outcome::Kind::kSleepUntil);
  o.text_ = std::move(timestamptz);
  return o;
}

// Finish the run with `output`.
inline Outcome Complete(Json output = Json::object()) {
  Outcome o(Outcome::Kind::kComplete);
  o.json_ = std::move(output);
  return o;
}

// Fail the step; a retryable failure is retried by the step's retry policy.
inline Outcome Fail(std::string code, std::string message, bool retryable = true) {
  Outcome o(Outcome::Kind::kFail);
  o.key_ = std::move(code);
  o.text_ = std::move(message);
  o.retryable_ = retryable;
  return o;
}

// Fail the run now, without retries.
inline Outcome FailPermanent(std::string code, std::string message) {
  return Fail(std::move(code), std::move(message), false);
}

// One invocation of a step: what it reads (input, context, run id, attempt)
// and what it can do besides returning an outcome (set context fields, run
// SQL in the step transaction, log).
// A key of the idempotency store as a claim found it (ABI 1.3; see
// cairn_host_api.idempotency_claim). kClaimed: this run holds the key now
// (in_doubt when it took over a claim that never completed or failed, so the
// effect may already have happened); kInProgress: another owner holds it
// until expires_at; kCompleted: result is the stored result.
struct IdempotencyState {
  enum class Status { kClaimed, kInProgress, kCompleted };
  Status status = Status::kClaimed;
  bool in_doubt = false;
  std::string key;
  std::string owner;
  std::string expires_at;
  int claims = 0;
  Json result;        // kCompleted
  std::string error;  // kClaimed: the failure of a failed claim it replaced
};

class StepContext {
 public:
  StepContext(const cairn_step_call* call, cairn_step_ctx* ctx) : call_(call), ctx_(ctx) {}
  StepContext(const StepContext&) = delete;
  StepContext& operator=(const StepContext&) = delete;

  // The run's input (a JSON object), parsed on first use.
  const Json& input() const {
    if (!input_) input_ = Parse(call_->input);
    return *input_;
  }

  // The run's context as this step sees it: as checkpointed, plus the fields
  // this step has set so far. Parsed on first use.
  const Json& context() const {
    if (!context_) {
      context_ = Parse(call_->context);
      if (!context_->is_object()) *context_ = Json::object();
      for (auto& [key, value] : updates_.items()) Merge(*context_, key, value);
    }
    return *context_;
  }

  const char* run_id() const { return call_->run_id; }
  const char* workflow() const { return call_->workflow; }
  // The step's name in the workflow definition; for a compensation, the
  // plugin step it runs (the step's compensate:).
  const char* step() const { return call_->step; }
  // For a compensation, the name of the workflow step it undoes (ABI 1.4);
  // nullptr for a forward step, and on a host older than ABI 1.4, which does
  // not say.
  const char* compensates() const {
    if (call_->struct_size < offsetof(cairn_step_call, compensates) + sizeof(call_->compensates)) {
      return nullptr;
    }
    return call_->compensates;
  }
  int attempt() const { return call_->attempt; }
  bool transactional() const { return call_->transactional != 0; }

  // Sets context field `key` (committed with the step's outcome, one audit
  // event per changed field). A null value removes the field.
  void set(const std::string& key, const Json& value) {
    const std::string text = value.dump();
    if (host()->set_context(ctx_, key.c_str(), cairn_bytes{text.data(), text.size()}) != CAIRN_OK) {
      throw Failure("plugin_error", host()->last_error(ctx_), false);
    }
    if (context_) {
      Merge(*context_, key, value);
    } else {
      updates_[key] = value;
    }
  }

  // Removes context field `key`.
  void erase(const std::string& key) { set(key, nullptr); }

  // Signals the run waiting on correlation key `key` with `payload`, when
  // this step commits (never if it fails).
  void signal(const std::string& key, const Json& payload = Json::object()) {
    if (host()->struct_size < offsetof(cairn_host_api, signal) + sizeof(host()->signal)) {
      throw Failure("plugin_error", "the host is older than ABI 1.1 and cannot signal", false);
    }
    const std::string text = payload.dump();
    if (host()->signal(ctx_, key.c_str(), cairn_bytes{text.data(), text.size()}) != CAIRN_OK) {
      throw Failure("plugin_error", host()->last_error(ctx_), false);
    }
  }

  // Starts a child run of the newest definition of `workflow` with `input`
  // (a JSON object), when this step commits (never if it fails). The child's
  // parent is this run; return WaitChildren(...) to wait for the children.
  // With options the child asks to be cancelled along with its parent (see
  // ChildOptions; needs a host with ABI 1.4 for any option set):
  //   cairn::sdk::ChildOptions options;
  //   options.cancel_when_parent_fails = true;
  //   options.cancel_when_first_done = true;
  //   ctx.start_child("quote", {{"vendor", v}}, options);
  // (In C++20: {.cancel_when_parent_fails = true, .cancel_when_first_done = true}.)
  void start_child(const std::string& workflow, const Json& input = Json::object(),
                   const ChildOptions& options = {}) {
    const std::string text = input.dump();
    const cairn_bytes bytes{text.data(), text.size()};
    cairn_result result = CAIRN_ERROR;
    if (options.cancel_when_parent_fails || options.cancel_when_first_done) {
      if (host()->struct_size <
          offsetof(cairn_host_api, start_child_with) + sizeof(host()->start_child_with)) {
        throw Failure("plugin_error",
                      "the host is older than ABI 1.4 and cannot cancel child runs with their "
                      "parent",
                      false);
      }
      uint32_t flags = 0;
      if (options.cancel_when_parent_fails) flags |= CAIRN_CHILD_CANCEL_WHEN_PARENT_FAILS;
      if (options.cancel_when_first_done) flags |= CAIRN_CHILD_CANCEL_WHEN_FIRST_DONE;
      result = host()->start_child_with(ctx_, workflow.c_str(), bytes, flags);
    } else {
      if (host()->struct_size <
          offsetof(cairn_host_api, start_child) + sizeof(host()->start_child)) {
        throw Failure("plugin_error", "the host is older than ABI 1.2 and cannot start child runs",
                      false);
      }
      result = host()->start_child(ctx_, workflow.c_str(), bytes);
    }
    if (result != CAIRN_OK) throw Failure("plugin_error", host()->last_error(ctx_), false);
  }

  // Runs one parameterized statement in the step transaction (transactional
  // steps only) and returns its rows as a JSON array of objects:
  //   ctx.sql("INSERT INTO shop.orders (id, cents) VALUES ($1, $2)", id, cents);
  // Throws Failure: code "sql_refused" (permanent) when the host refused the
  // call, "sql_error" (retryable) when the database failed it.
  template <class... Params>
  Json sql(const std::string& statement, const Params&... params) {
    Json array = Json::array();
    (array.push_back(Json(params)), ...);
    return sql_array(statement, array);
  }

  // Like sql, with the parameters given as one JSON array.
  Json sql_array(const std::string& statement, const Json& params) {
    const std::string text = params.dump();
    cairn_bytes rows{nullptr, 0};
    const cairn_result result =
        host()->sql_exec(ctx_, statement.c_str(), cairn_bytes{text.data(), text.size()}, &rows);
    if (result != CAIRN_OK) {
      const bool retryable = result == CAIRN_RETRY;
      throw Failure(retryable ? "sql_error" : "sql_refused", host()->last_error(ctx_), retryable);
    }
    return Parse(rows);
  }

  // Makes the effect of fn happen once for key, across this run's retries,
  // timeouts and takeovers, and across runs of the namespace that use the
  // same key: fn runs only when the run claims the key, and its result
  // (JSON) is stored for ttl and returned to every later caller instead of
  // running fn again:
  //   Json charge = ctx.once("charge:" + order_id, std::chrono::hours(24), [&] {
  //     return provider.Charge(order_id, cents);  // {"charge_id": "ch_1"}
  //   });
  // fn may take the IdempotencyState of its claim, to see in_doubt: an
  // earlier attempt claimed the key and died before storing a result, so
  // the effect may have happened (ask the provider, or pass it the same key).
  // If fn throws, the key is marked failed (the next claim takes it at once)
  // and the exception goes on: throw only when the effect did not happen.
  // The claim itself is held for `lease` (default: ttl) while fn runs: the
  // run's own retry takes it back at once if this attempt dies, another
  // owner only once it expires, so give a shorter lease where other runs
  // share the key and should not wait a whole ttl for a crashed one.
  // Throws Failure: "idempotency_in_progress" (retryable) while another
  // owner holds the key; "idempotency_error" (retryable) when the database
  // failed a call or the run lost the key before storing its result;
  // "idempotency_refused" (permanent) for an invalid key or result.
  template <class Fn>
  Json once(const std::string& key, std::chrono::milliseconds ttl, Fn&& fn,
            std::optional<std::chrono::milliseconds> lease = std::nullopt) {
    const IdempotencyState state = idempotency_claim(key, lease.value_or(ttl));
    if (state.status == IdempotencyState::Status::kCompleted) return state.result;
    if (state.status == IdempotencyState::Status::kInProgress) {
      throw Failure("idempotency_in_progress",
                    "idempotency key '" + key + "' is in progress under " + state.owner +
                        " until " + state.expires_at,
                    true);
    }
    Json result;
    try {
      if constexpr (std::is_invocable_v<Fn&, const IdempotencyState&>) {
        result = fn(state);
      } else {
        result = fn();
      }
    } catch (const std::exception& e) {
      FailQuietly(key, e.what());
      throw;
    } catch (...) {
      FailQuietly(key, "unknown exception");
      throw;
    }
    idempotency_complete(key, result, ttl);
    return result;
  }

  // The three calls once is made of, for steps that need more control.
  IdempotencyState idempotency_claim(const std::string& key, std::chrono::milliseconds lease) {
    RequireIdempotency();
    cairn_bytes out{nullptr, 0};
    Check(host()->idempotency_claim(ctx_, key.c_str(), static_cast<int64_t>(lease.count()), &out));
    const Json json = Parse(out);
    IdempotencyState state;
    const std::string status = json.value("status", "");
    state.status = status == "completed"     ? IdempotencyState::Status::kCompleted
                   : status == "in_progress" ? IdempotencyState::Status::kInProgress
                                             : IdempotencyState::Status::kClaimed;
    state.in_doubt = json.value("in_doubt", false);
    state.key = json.value("key", key);
    state.owner = Text(json, "owner");
    state.expires_at = Text(json, "expires_at");
    state.claims = json.value("claims", 0);
    if (json.contains("result")) state.result = json.at("result");
    state.error = Text(json, "error");
    return state;
  }

  void idempotency_complete(const std::string& key, const Json& result,
                            std::chrono::milliseconds ttl) {
    RequireIdempotency();
    const std::string text = result.dump();
    Check(host()->idempotency_complete(ctx_, key.c_str(), cairn_bytes{text.data(), text.size()},
                                       static_cast<int64_t>(ttl.count())));
  }

  void idempotency_fail(const std::string& key, const std::string& error) {
    RequireIdempotency();
    Check(host()->idempotency_fail(ctx_, key.c_str(), error.c_str()));
  }

  void log(LogLevel level, const std::string& message) const {
    host()->log(ctx_, static_cast<cairn_log_level>(level), message.c_str());
  }
  void debug(const std::string& message) const { log(LogLevel::kDebug, message); }
  void info(const std::string& message) const { log(LogLevel::kInfo, message); }
  void warn(const std::string& message) const { log(LogLevel::kWarn, message); }
  void error(const std::string& message) const { log(LogLevel::kError, message); }

  // The C ABI underneath, for what the SDK does not wrap.
  const cairn_host_api* host() const { return call_->host; }
  const cairn_step_call* raw_call() const { return call_; }
  cairn_step_ctx* raw_ctx() const { return ctx_; }

 private:
  void RequireIdempotency() const {
    if (host()->struct_size <
        offsetof(cairn_host_api, idempotency_fail) + sizeof(host()->idempotency_fail)) {
      throw Failure("plugin_error", "the host is older than ABI 1.3 and has no idempotency store",
                    false);
    }
  }
  void Check(cairn_result result) const {
    if (result == CAIRN_OK) return;
    const bool retryable = result == CAIRN_RETRY;
    throw Failure(retryable ? "idempotency_error" : "idempotency_refused", host()->last_error(ctx_),
                  retryable);
  }
  // Marks key failed on the way out of once. The exception that got us here
  // is what the step reports; if this call fails too, the key stays in
  // progress until its lease ends, in doubt, as after a crash.
  void FailQuietly(const std::string& key, const char* error) const noexcept {
    host()->idempotency_fail(ctx_, key.c_str(), error);
  }
  static std::string Text(const Json& json, const char* field) {
    const auto it = json.find(field);
    return it != json.end() && it->is_string() ? it->get<std::string>() : std::string();
  }
  static Json Parse(cairn_bytes bytes) {
    if (bytes.len == 0) return Json();
    return Json::parse(bytes.data, bytes.data + bytes.len);
  }
  static void Merge(Json& object, const std::string& key, const Json& value) {
    if (value.is_null()) {
      object.erase(key);
    } else {
      object[key] = value;
    }
  }

  const cairn_step_call* call_;
  cairn_step_ctx* ctx_;
  mutable std::optional<Json> input_;
  mutable std::optional<Json> context_;
  Json updates_;  // fields set before context() was parsed (null: none)
};

using StepFunction = Outcome (*)(StepContext&);

// One step of a plugin: its name and function. Made by CAIRN_STEP; a
// capture-less lambda converts to StepFunction.
struct StepDef {
  const char* name;
  StepFunction function;
};

namespace detail {

// The C step function behind every SDK step. No exception leaves it.
inline cairn_result InvokeStep(void* user_data, const cairn_step_call* call,
                               cairn_step_ctx* ctx) noexcept {
  const auto* def = static_cast<const StepDef*>(user_data);
  const cairn_host_api* host = call->host;
  try {
    StepContext step_ctx(call, ctx);
    const Outcome outcome = def->function(step_ctx);
    return outcome.Apply(host, ctx);
  } catch (const Failure& failure) {
    host->fail(ctx, failure.retryable() ? 1 : 0, failure.code().c_str(), failure.what());
    return failure.retryable() ? CAIRN_RETRY : CAIRN_ERROR;
  } catch (const std::exception& e) {
    host->fail(ctx, 1, "exception", e.what());
    return CAIRN_RETRY;
  } catch (...) {
    host->fail(ctx, 1, "exception", "unknown exception");
    return CAIRN_RETRY;
  }
}

// Fills the C step table and the descriptor (static storage owned by the
// plugin, alive for the process). Allocates nothing, throws nothing.
inline const cairn_plugin_descriptor* Describe(const char* name, const char* version,
                                               const StepDef* steps, cairn_step_def* defs,
                                               size_t count,
                                               cairn_plugin_descriptor* descriptor) noexcept {
  for (size_t i = 0; i < count; ++i) {
    defs[i].name = steps[i].name;
    defs[i].invoke = &InvokeStep;
    defs[i].user_data = const_cast<StepDef*>(&steps[i]);
  }
  descriptor->struct_size = sizeof(cairn_plugin_descriptor);
  descriptor->abi_major = CAIRN_ABI_MAJOR;
  descriptor->abi_minor = CAIRN_ABI_MINOR;
  descriptor->name = name;
  descriptor->version = version;
  descriptor->steps = defs;
  descriptor->step_count = count;
  descriptor->step_def_size = sizeof(cairn_step_def);
  return descriptor;
}

}  // namespace detail
}  // namespace sdk
}  // namespace cairn

// A step: CAIRN_STEP("reserve_stock", ReserveStock).
#define CAIRN_STEP(step_name, function) (::cairn::sdk::StepDef{(step_name), (function)})

// The plugin: its name, its version and its steps. Use once per shared object,
// at namespace scope; it defines the exported entry point.
#define CAIRN_PLUGIN(plugin_name, plugin_version, ...)                                             \
  extern "C" CAIRN_PLUGIN_EXPORT const cairn_plugin_descriptor* cairn_plugin_entry(                \
      const cairn_host_api* /*host*/) {                                                            \
    static const ::cairn::sdk::StepDef cairn_sdk_steps[] = {__VA_ARGS__};                          \
    static cairn_step_def cairn_sdk_defs[sizeof(cairn_sdk_steps) / sizeof(cairn_sdk_steps[0])];    \
    static cairn_plugin_descriptor cairn_sdk_descriptor;                                           \
    static const cairn_plugin_descriptor* const cairn_sdk_result = ::cairn::sdk::detail::Describe( \
        (plugin_name), (plugin_version), cairn_sdk_steps, cairn_sdk_defs,                          \
        sizeof(cairn_sdk_steps) / sizeof(cairn_sdk_steps[0]), &cairn_sdk_descriptor);              \
    return cairn_sdk_result;                                                                       \
  }
