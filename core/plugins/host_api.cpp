// The host function table of cairn/plugin.h: what a plugin's step may ask of
// cairn while it runs. Every function goes through HostCall, which refuses a
// NULL ctx and stops every exception at the boundary: none crosses into
// plugin code. Append-only: a new function goes at the end of the table, with
// a minor ABI bump.
#include <spdlog/spdlog.h>

#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "errors.hpp"
#include "logging.hpp"
#include "step_context.hpp"
#include "step_protocol.hpp"

namespace cairn::plugins {
namespace {

thread_local const std::string* tls_loading_file = nullptr;

std::string Text(const char* s) { return s == nullptr ? std::string() : std::string(s); }
bool IsEmpty(const char* s) { return s == nullptr || *s == '\0'; }

// Text from a plugin as UTF-8, which is all the store and the step-process
// wire take: invalid bytes become U+FFFD, as in DumpJson.
std::string Utf8Text(const char* s) {
  return Json::parse(DumpJson(Json(Text(s)))).get<std::string>();
}

// A name a plugin passes (a context key, a step, an event, a correlation
// key, a workflow) is stored as given, so it must be UTF-8 already.
bool IsUtf8(const char* s) { return Utf8Text(s) == Text(s); }

// The number a C plugin passed for an enum parameter. C allows any int there;
// reading it as the C++ enum when it is not one of the enumerators is
// undefined, so its bytes are copied out instead.
template <typename Enum>
std::underlying_type_t<Enum> RawValue(const Enum& value) {
  std::underlying_type_t<Enum> raw;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

// The barrier every host call runs behind: a NULL ctx is refused, last_error
// starts empty, and an exception (say, out of memory) becomes CAIRN_ERROR
// with last_error naming the call.
template <typename Body>
cairn_result HostCall(cairn_step_ctx* ctx, std::string_view call, Body&& body) noexcept {
  if (ctx == nullptr) return CAIRN_ERROR;
  try {
    ctx->last_error.clear();
    return body();
  } catch (const std::exception& e) {
    try {
      ctx->last_error = std::string(call) + ": " + e.what();
    } catch (...) {
      // Out of memory for the message too: the result alone must do.
    }
  } catch (...) {
    // Nothing to say; the result says it failed.
  }
  return CAIRN_ERROR;
}

// The last outcome call wins; context updates, signals and child runs made
// along the way are kept whatever the outcome (a failure drops them later, in
// one place).
void ChooseOutcome(cairn_step_ctx* ctx, OutcomeKind kind) {
  Json updates = std::move(ctx->outcome.context_updates);
  auto signals = std::move(ctx->outcome.signals);
  auto children = std::move(ctx->outcome.children);
  ctx->outcome = StepOutcome{};
  ctx->outcome.kind = kind;
  ctx->outcome.context_updates = std::move(updates);
  ctx->outcome.signals = std::move(signals);
  ctx->outcome.children = std::move(children);
}

// A call no correct plugin makes: remembered (the step will fail
// permanently) and reported through last_error.
cairn_result PluginMistake(cairn_step_ctx* ctx, const std::string& what) {
  ctx->last_error = what;
  if (ctx->plugin_error.empty()) ctx->plugin_error = what;
  return CAIRN_ERROR;
}

std::optional<Json> ParseJson(cairn_bytes bytes, bool empty_is_null) {
  if (bytes.len == 0 && empty_is_null) return Json();
  if (bytes.data == nullptr) return std::nullopt;
  Json value = Json::parse(bytes.data, bytes.data + bytes.len, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

void HostLog(cairn_step_ctx* ctx, cairn_log_level level, const char* message) {
  try {
    if (message == nullptr) return;
    spdlog::level::level_enum spd = spdlog::level::info;
    switch (RawValue(level)) {
      case CAIRN_LOG_DEBUG:
        spd = spdlog::level::debug;
        break;
      case CAIRN_LOG_INFO:
        spd = spdlog::level::info;
        break;
      case CAIRN_LOG_WARN:
        spd = spdlog::level::warn;
        break;
      case CAIRN_LOG_ERROR:
        spd = spdlog::level::err;
        break;
    }
    if (ctx == nullptr || ctx->call == nullptr) {
      spdlog::log(spd, "plugin {}: {}", tls_loading_file ? *tls_loading_file : "?", message);
      return;
    }
    const ScopedRunLog run_log(
        {ctx->call->run_id, ctx->call->workflow, *ctx->step, ctx->call->attempt});
    spdlog::log(spd, "plugin {} run={} workflow={} step={} attempt={}: {}", *ctx->plugin,
                ctx->call->run_id, ctx->call->workflow, *ctx->step, ctx->call->attempt, message);
  } catch (...) {
    // Logging must never take the step down.
  }
}

cairn_result HostSetContext(cairn_step_ctx* ctx, const char* key, cairn_bytes json) {
  return HostCall(ctx, "set_context", [&] {
    if (IsEmpty(key)) return PluginMistake(ctx, "set_context: empty key");
    if (!IsUtf8(key)) return PluginMistake(ctx, "set_context: the key is not valid UTF-8");
    std::optional<Json> value = ParseJson(json, /*empty_is_null=*/false);
    if (!value) {
      return PluginMistake(
          ctx, std::string("set_context: the value of '") + key + "' is not valid JSON");
    }
    ctx->outcome.context_updates[key] = std::move(*value);
    return CAIRN_OK;
  });
}

cairn_result HostNext(cairn_step_ctx* ctx) {
  return HostCall(ctx, "next", [&] {
    ChooseOutcome(ctx, OutcomeKind::kNext);
    return CAIRN_OK;
  });
}

cairn_result HostJump(cairn_step_ctx* ctx, const char* step) {
  return HostCall(ctx, "jump", [&] {
    if (IsEmpty(step)) return PluginMistake(ctx, "jump: empty step name");
    if (!IsUtf8(step)) return PluginMistake(ctx, "jump: the step name is not valid UTF-8");
    ChooseOutcome(ctx, OutcomeKind::kJump);
    ctx->outcome.jump_to = step;
    return CAIRN_OK;
  });
}

cairn_result HostWait(cairn_step_ctx* ctx, const char* event, const char* key, int64_t timeout_ms) {
  return HostCall(ctx, "wait", [&] {
    if (IsEmpty(event)) return PluginMistake(ctx, "wait: empty event name");
    if (IsEmpty(key)) return PluginMistake(ctx, "wait: empty correlation key");
    if (!IsUtf8(event) || !IsUtf8(key)) {
      return PluginMistake(ctx, "wait: the event name or correlation key is not valid UTF-8");
    }
    ChooseOutcome(ctx, OutcomeKind::kWait);
    ctx->outcome.wait_event = event;
    ctx->outcome.wait_key = key;
    if (timeout_ms >= 0) ctx->outcome.wait_timeout_ms = timeout_ms;
    return CAIRN_OK;
  });
}

cairn_result HostSleepMs(cairn_step_ctx* ctx, int64_t ms) {
  return HostCall(ctx, "sleep_ms", [&] {
    if (ms < 0) return PluginMistake(ctx, "sleep_ms: negative duration " + std::to_string(ms));
    ChooseOutcome(ctx, OutcomeKind::kSleep);
    ctx->outcome.sleep_ms = ms;
    return CAIRN_OK;
  });
}

cairn_result HostSleepUntil(cairn_step_ctx* ctx, const char* timestamptz) {
  return HostCall(ctx, "sleep_until", [&] {
    if (IsEmpty(timestamptz)) return PluginMistake(ctx, "sleep_until: empty timestamp");
    if (!IsUtf8(timestamptz))
      return PluginMistake(ctx, "sleep_until: the timestamp is not valid UTF-8");
    ChooseOutcome(ctx, OutcomeKind::kSleep);
    ctx->outcome.sleep_until = timestamptz;
    return CAIRN_OK;
  });
}

cairn_result HostComplete(cairn_step_ctx* ctx, cairn_bytes output_json) {
  return HostCall(ctx, "complete", [&] {
    std::optional<Json> output = ParseJson(output_json, /*empty_is_null=*/true);
    if (!output) return PluginMistake(ctx, "complete: the output is not valid JSON");
    ChooseOutcome(ctx, OutcomeKind::kComplete);
    ctx->outcome.output = std::move(*output);
    return CAIRN_OK;
  });
}

cairn_result HostFail(cairn_step_ctx* ctx, int retryable, const char* code, const char* message) {
  return HostCall(ctx, "fail", [&] {
    ChooseOutcome(ctx, OutcomeKind::kFail);
    ctx->outcome.retryable = retryable != 0;
    ctx->outcome.error_code = Utf8Text(code);
    ctx->outcome.error_message = IsEmpty(message) ? "step failed" : Utf8Text(message);
    return CAIRN_OK;
  });
}

// Which statements are allowed is the store's rule (StepSql::Execute throws
// InvalidArgumentError for a refused one); this only checks the call itself.
cairn_result HostSqlExec(cairn_step_ctx* ctx, const char* sql, cairn_bytes params_json,
                         cairn_bytes* out_rows_json) {
  return HostCall(ctx, "sql_exec", [&] {
    if (out_rows_json == nullptr) return PluginMistake(ctx, "sql_exec: out_rows_json is NULL");
    *out_rows_json = cairn_bytes{"", 0};
    if (ctx->transaction_error) {
      ctx->last_error =
          "sql_exec: an earlier statement of this step failed; the step transaction "
          "is aborted";
      return CAIRN_RETRY;
    }
    if (ctx->call->sql == nullptr) {
      ctx->last_error = "sql_exec: step '" + *ctx->step +
                        "' is not running as a transactional step; mark it transactional in the "
                        "workflow definition to use SQL";
      return CAIRN_ERROR;
    }
    if (IsEmpty(sql)) {
      ctx->last_error = "sql_exec: empty statement";
      return CAIRN_ERROR;
    }
    std::optional<Json> params = ParseJson(params_json, /*empty_is_null=*/true);
    if (params && params->is_null()) params = Json::array();
    if (!params || !params->is_array()) {
      ctx->last_error = "sql_exec: params must be a JSON array";
      return CAIRN_ERROR;
    }
    try {
      Json rows = ctx->call->sql->Execute(sql, *params);
      ctx->rows.push_back(DumpJson(rows));
    } catch (const InvalidArgumentError& e) {
      ctx->last_error = std::string("sql_exec: ") + e.what();
      return CAIRN_ERROR;
    } catch (const std::exception& e) {
      ctx->last_error = std::string("sql_exec: ") + e.what();
      ctx->transaction_error = std::current_exception();
      return CAIRN_RETRY;
    } catch (...) {
      ctx->last_error = "sql_exec: unknown error";
      ctx->transaction_error = std::current_exception();
      return CAIRN_RETRY;
    }
    const std::string& rows = ctx->rows.back();
    *out_rows_json = cairn_bytes{rows.data(), rows.size()};
    return CAIRN_OK;
  });
}

cairn_result HostSignal(cairn_step_ctx* ctx, const char* key, cairn_bytes payload_json) {
  return HostCall(ctx, "signal", [&] {
    if (IsEmpty(key)) return PluginMistake(ctx, "signal: empty correlation key");
    if (!IsUtf8(key)) return PluginMistake(ctx, "signal: the correlation key is not valid UTF-8");
    std::optional<Json> payload = ParseJson(payload_json, /*empty_is_null=*/true);
    if (!payload) return PluginMistake(ctx, "signal: the payload is not valid JSON");
    if (payload->is_null()) payload = Json::object();
    ctx->outcome.signals.emplace_back(key, std::move(*payload));
    return CAIRN_OK;
  });
}

// start_child and start_child_with: `call` names the host function in
// refusals.
cairn_result StartChild(cairn_step_ctx* ctx, const char* call, const char* workflow,
                        cairn_bytes input_json, ChildOptions options) {
  const std::string name(call);
  if (IsEmpty(workflow)) return PluginMistake(ctx, name + ": empty workflow name");
  if (!IsUtf8(workflow)) return PluginMistake(ctx, name + ": the workflow name is not valid UTF-8");
  std::optional<Json> input = ParseJson(input_json, /*empty_is_null=*/true);
  if (input && input->is_null() && input_json.len == 0) input = Json::object();
  if (!input || !input->is_object()) {
    return PluginMistake(
        ctx, name + ": the input of a child of '" + workflow + "' is not a JSON object");
  }
  ctx->outcome.children.push_back({workflow, std::move(*input), options});
  return CAIRN_OK;
}

cairn_result HostStartChild(cairn_step_ctx* ctx, const char* workflow, cairn_bytes input_json) {
  return HostCall(ctx, "start_child", [&] {
    return StartChild(ctx, "start_child", workflow, input_json, ChildOptions{});
  });
}

cairn_result HostStartChildWith(cairn_step_ctx* ctx, const char* workflow, cairn_bytes input_json,
                                uint32_t flags) {
  return HostCall(ctx, "start_child_with", [&] {
    constexpr uint32_t kKnown =
        CAIRN_CHILD_CANCEL_WHEN_PARENT_FAILS | CAIRN_CHILD_CANCEL_WHEN_FIRST_DONE;
    if ((flags & ~kKnown) != 0) {
      return PluginMistake(ctx, "start_child_with: unknown flags " +
                                    std::to_string(flags & ~kKnown) +
                                    " (known: CAIRN_CHILD_CANCEL_WHEN_PARENT_FAILS, "
                                    "CAIRN_CHILD_CANCEL_WHEN_FIRST_DONE)");
    }
    ChildOptions options;
    options.cancel_when_parent_fails = (flags & CAIRN_CHILD_CANCEL_WHEN_PARENT_FAILS) != 0;
    options.cancel_when_first_done = (flags & CAIRN_CHILD_CANCEL_WHEN_FIRST_DONE) != 0;
    return StartChild(ctx, "start_child_with", workflow, input_json, options);
  });
}

cairn_result HostWaitChildren(cairn_step_ctx* ctx, cairn_child_wait mode, const char* event,
                              int64_t timeout_ms) {
  return HostCall(ctx, "wait_children", [&] {
    ChildWait wait;
    switch (RawValue(mode)) {
      case CAIRN_CHILDREN_ALL:
        wait = ChildWait::kAll;
        break;
      case CAIRN_CHILDREN_FIRST:
        wait = ChildWait::kFirst;
        break;
      default:
        return PluginMistake(ctx, "wait_children: unknown mode " + std::to_string(RawValue(mode)));
    }
    if (ctx->outcome.children.empty()) {
      return PluginMistake(ctx,
                           "wait_children: the step started no child run (call start_child "
                           "first, in the same invocation)");
    }
    if (!IsUtf8(event)) {
      return PluginMistake(ctx, "wait_children: the event name is not valid UTF-8");
    }
    ChooseOutcome(ctx, OutcomeKind::kWait);
    ctx->outcome.wait_children = wait;
    ctx->outcome.wait_event = IsEmpty(event) ? "children" : event;
    if (timeout_ms >= 0) ctx->outcome.wait_timeout_ms = timeout_ms;
    return CAIRN_OK;
  });
}

// The idempotency calls share their refusals: no store, a bad key. Returns
// the refusal's message, or "" when the call may go ahead.
std::string IdempotencyRefusal(cairn_step_ctx* ctx, const char* call, const char* key) {
  if (ctx->call->idempotency == nullptr) {
    return std::string(call) + ": this host offers no idempotency store to step '" + *ctx->step +
           "'";
  }
  if (IsEmpty(key)) return std::string(call) + ": empty key";
  if (!IsUtf8(key)) return std::string(call) + ": the key is not valid UTF-8";
  return "";
}

// Runs one idempotency call: a refused argument (an error of kind
// kInvalidArgument: a key, time or result the database refused) is
// CAIRN_ERROR, any other failure (the database) CAIRN_RETRY; last_error says
// which.
template <typename Body>
cairn_result IdempotencyCall(cairn_step_ctx* ctx, const char* call, Body&& body) {
  try {
    return body();
  } catch (const Error& e) {
    ctx->last_error = std::string(call) + ": " + e.what();
    return e.kind() == ErrorKind::kInvalidArgument ? CAIRN_ERROR : CAIRN_RETRY;
  } catch (const std::exception& e) {
    ctx->last_error = std::string(call) + ": " + e.what();
    return CAIRN_RETRY;
  }
}

cairn_result HostIdempotencyClaim(cairn_step_ctx* ctx, const char* key, int64_t lease_ms,
                                  cairn_bytes* out_state_json) {
  return HostCall(ctx, "idempotency_claim", [&] {
    if (out_state_json == nullptr) {
      ctx->last_error = "idempotency_claim: out_state_json is NULL";
      return CAIRN_ERROR;
    }
    *out_state_json = cairn_bytes{"", 0};
    ctx->last_error = IdempotencyRefusal(ctx, "idempotency_claim", key);
    if (ctx->last_error.empty() && lease_ms < 0) {
      ctx->last_error = "idempotency_claim: negative lease " + std::to_string(lease_ms);
    }
    if (!ctx->last_error.empty()) return CAIRN_ERROR;
    return IdempotencyCall(ctx, "idempotency_claim", [&] {
      const IdempotencyClaim claim =
          ctx->call->idempotency->Claim(key, std::chrono::milliseconds(lease_ms));
      ctx->rows.push_back(DumpJson(IdempotencyClaimToJson(claim)));
      const std::string& state = ctx->rows.back();
      *out_state_json = cairn_bytes{state.data(), state.size()};
      return CAIRN_OK;
    });
  });
}

cairn_result HostIdempotencyComplete(cairn_step_ctx* ctx, const char* key, cairn_bytes result_json,
                                     int64_t ttl_ms) {
  return HostCall(ctx, "idempotency_complete", [&] {
    ctx->last_error = IdempotencyRefusal(ctx, "idempotency_complete", key);
    if (ctx->last_error.empty() && ttl_ms < 0) {
      ctx->last_error = "idempotency_complete: negative ttl " + std::to_string(ttl_ms);
    }
    std::optional<Json> result = ParseJson(result_json, /*empty_is_null=*/true);
    if (ctx->last_error.empty() && !result) {
      ctx->last_error = "idempotency_complete: the result is not valid JSON";
    }
    if (!ctx->last_error.empty()) return CAIRN_ERROR;
    return IdempotencyCall(ctx, "idempotency_complete", [&] {
      if (ctx->call->idempotency->Complete(key, *result, std::chrono::milliseconds(ttl_ms))) {
        return CAIRN_OK;
      }
      ctx->last_error = std::string("idempotency_complete: run ") + ctx->call->run_id +
                        " no longer holds key '" + key +
                        "' (its claim expired and was taken, or it was completed or failed)";
      return CAIRN_RETRY;
    });
  });
}

cairn_result HostIdempotencyFail(cairn_step_ctx* ctx, const char* key, const char* error) {
  return HostCall(ctx, "idempotency_fail", [&] {
    ctx->last_error = IdempotencyRefusal(ctx, "idempotency_fail", key);
    if (!ctx->last_error.empty()) return CAIRN_ERROR;
    return IdempotencyCall(ctx, "idempotency_fail", [&] {
      if (ctx->call->idempotency->Fail(key, IsEmpty(error) ? "failed" : Utf8Text(error))) {
        return CAIRN_OK;
      }
      ctx->last_error = std::string("idempotency_fail: run ") + ctx->call->run_id +
                        " no longer holds key '" + key + "'";
      return CAIRN_RETRY;
    });
  });
}

const char* HostLastError(cairn_step_ctx* ctx) {
  return ctx == nullptr ? "" : ctx->last_error.c_str();
}

const cairn_host_api kHostApi = {
    .struct_size = sizeof(cairn_host_api),
    .abi_major = CAIRN_ABI_MAJOR,
    .abi_minor = CAIRN_ABI_MINOR,
    .log = &HostLog,
    .set_context = &HostSetContext,
    .next = &HostNext,
    .jump = &HostJump,
    .wait = &HostWait,
    .sleep_ms = &HostSleepMs,
    .sleep_until = &HostSleepUntil,
    .complete = &HostComplete,
    .fail = &HostFail,
    .sql_exec = &HostSqlExec,
    .last_error = &HostLastError,
    .signal = &HostSignal,
    .start_child = &HostStartChild,
    .wait_children = &HostWaitChildren,
    .idempotency_claim = &HostIdempotencyClaim,
    .idempotency_complete = &HostIdempotencyComplete,
    .idempotency_fail = &HostIdempotencyFail,
    .start_child_with = &HostStartChildWith,
};

}  // namespace

const cairn_host_api& HostApi() { return kHostApi; }

void SetLoadingFile(const std::string* file) { tls_loading_file = file; }

}  // namespace cairn::plugins
