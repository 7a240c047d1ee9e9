// The plugin loader: trust checks on the path, dlopen, the ABI handshake, and
// the adapter from a C step (cairn/plugin.h) to cairn::Step with the host
// function table behind it. No exception crosses into plugin code: every host
// function catches everything. Plugins are never dlclose'd once registered:
// steps, descriptors and host-table pointers the plugin kept must stay valid
// for the life of the process, and unloading a library that started threads
// or registered atexit handlers is undefined in practice.
#include "plugin_loader.hpp"

#include <cairn/plugin.h>
#include <dlfcn.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <optional>
#include <set>
#include <string_view>

// The host side of the opaque handle: one per step invocation, on the stack
// of PluginStep::Invoke. Host functions fill `outcome` from the plugin's calls.
struct cairn_step_ctx {
  const cairn::StepCall* call = nullptr;
  const std::string* plugin = nullptr;
  const std::string* step = nullptr;
  cairn::StepOutcome outcome;
  // A host call with arguments no correct plugin passes: the step fails
  // permanently with code "plugin_error", whatever it returns.
  std::string plugin_error;
  // The database failed a statement of this step: the transaction is aborted;
  // Invoke rethrows this once the plugin returns.
  std::exception_ptr transaction_error;
  std::string last_error;
  // Row buffers handed out by sql_exec, valid until the step returns. A deque
  // never moves its elements, so earlier buffers stay valid.
  std::deque<std::string> rows;
};

namespace cairn {
namespace {

namespace fs = std::filesystem;

// The plugin file whose entry point is running on this thread, for log
// messages the plugin writes from there (with a NULL ctx).
thread_local const std::string* tls_loading_file = nullptr;

std::string DumpJson(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string Text(const char* s) { return s == nullptr ? std::string() : std::string(s); }

// ---- Statement guard rail for sql_exec --------------------------------------
//
// Not a sandbox (plugin code runs in the daemon's process and could do
// anything); it turns the likely mistakes into clear errors: transaction
// control, session-level state that would leak onto the connection, and
// several statements in one string.

bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Scans `sql` lexically (quotes, dollar quotes, comments); returns the first
// two words of the statement and whether anything follows a ';'.
struct StatementShape {
  std::string first;
  std::string second;
  bool several = false;
};

StatementShape Shape(std::string_view sql) {
  StatementShape shape;
  bool after_semicolon = false;
  int words = 0;
  size_t i = 0;
  const size_t n = sql.size();
  auto note_token = [&] {
    if (after_semicolon) shape.several = true;
  };
  while (i < n) {
    const char c = sql[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '-' && i + 1 < n && sql[i + 1] == '-') {
      while (i < n && sql[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < n && sql[i + 1] == '*') {
      int depth = 1;
      i += 2;
      while (i < n && depth > 0) {
        if (sql[i] == '/' && i + 1 < n && sql[i + 1] == '*') {
          ++depth;
          i += 2;
        } else if (sql[i] == '*' && i + 1 < n && sql[i + 1] == '/') {
          --depth;
          i += 2;
        } else {
          ++i;
        }
      }
    } else if (c == ';') {
      after_semicolon = true;
      ++i;
    } else if (c == '\'' || c == '"') {
      note_token();
      const bool backslash_escapes = c == '\'' && i > 0 &&
                                     (sql[i - 1] == 'e' || sql[i - 1] == 'E') &&
                                     (i < 2 || !IsWordChar(sql[i - 2]));
      ++i;
      while (i < n) {
        if (backslash_escapes && sql[i] == '\\') {
          i += 2;
        } else if (sql[i] == c) {
          if (i + 1 < n && sql[i + 1] == c) {
            i += 2;  // doubled quote
          } else {
            ++i;
            break;
          }
        } else {
          ++i;
        }
      }
      ++words;  // a quoted token ends the leading words
    } else if (c == '$' && i + 1 < n && !std::isdigit(static_cast<unsigned char>(sql[i + 1]))) {
      // Dollar quote $tag$ ... $tag$ (a $1 parameter is handled below).
      size_t j = i + 1;
      while (j < n && IsWordChar(sql[j])) ++j;
      if (j < n && sql[j] == '$') {
        note_token();
        const std::string_view tag = sql.substr(i, j - i + 1);
        const size_t end = sql.find(tag, j + 1);
        i = end == std::string_view::npos ? n : end + tag.size();
        ++words;
      } else {
        note_token();
        i = j;
      }
    } else if (IsWordChar(c)) {
      note_token();
      size_t j = i;
      while (j < n && (IsWordChar(sql[j]) || sql[j] == '$')) ++j;
      std::string word(sql.substr(i, j - i));
      std::transform(word.begin(), word.end(), word.begin(),
                     [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
      if (words == 0) shape.first = word;
      if (words == 1) shape.second = word;
      ++words;
      i = j;
    } else {
      note_token();
      ++words;
      ++i;
    }
  }
  return shape;
}

// Why a statement is refused, or nothing.
std::optional<std::string> RefusalOf(std::string_view sql) {
  const StatementShape shape = Shape(sql);
  if (shape.several) {
    return std::string("several statements in one sql_exec call; pass one statement per call");
  }
  if (shape.first.empty()) return std::string("empty statement");
  static const std::set<std::string, std::less<>> kTransactionControl = {
      "abort", "begin", "commit", "end", "release", "rollback", "savepoint", "start"};
  static const std::set<std::string, std::less<>> kSessionState = {
      "checkpoint", "copy",    "deallocate", "discard",  "listen",
      "load",       "prepare", "reset",      "unlisten", "vacuum"};
  if (kTransactionControl.count(shape.first) > 0) {
    return "transaction control (" + shape.first +
           ") is refused: the step runs inside cairn's checkpoint transaction, which cairn "
           "commits or rolls back";
  }
  if (kSessionState.count(shape.first) > 0 ||
      (shape.first == "set" && shape.second != "local" && shape.second != "constraints")) {
    return "'" + shape.first +
           "' is refused in a step: it changes session state of a shared connection or "
           "cannot run in a transaction (SET LOCAL is allowed)";
  }
  return std::nullopt;
}

// ---- The host function table ------------------------------------------------

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
    switch (level) {
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
    spdlog::log(spd, "plugin {} run={} workflow={} step={} attempt={}: {}", *ctx->plugin,
                ctx->call->run_id, ctx->call->workflow, *ctx->step, ctx->call->attempt, message);
  } catch (...) {
    // Logging must never take the step down.
  }
}

cairn_result HostSetContext(cairn_step_ctx* ctx, const char* key, cairn_bytes json) {
  if (ctx == nullptr) return CAIRN_ERROR;
  try {
    ctx->last_error.clear();
    if (key == nullptr || *key == '\0') return PluginMistake(ctx, "set_context: empty key");
    std::optional<Json> value = ParseJson(json, /*empty_is_null=*/false);
    if (!value) {
      return PluginMistake(
          ctx, std::string("set_context: the value of '") + key + "' is not valid JSON");
    }
    ctx->outcome.context_updates[key] = std::move(*value);
    return CAIRN_OK;
  } catch (const std::exception& e) {
    return PluginMistake(ctx, std::string("set_context: ") + e.what());
  } catch (...) {
    return CAIRN_ERROR;
  }
}

cairn_result HostNext(cairn_step_ctx* ctx) {
  if (ctx == nullptr) return CAIRN_ERROR;
  try {
    ChooseOutcome(ctx, OutcomeKind::kNext);
    return CAIRN_OK;
  } catch (...) {
    return CAIRN_ERROR;
  }
}

cairn_result HostJump(cairn_step_ctx* ctx, const char* step) {
  if (ctx == nullptr) return CAIRN_ERROR;
  try {
    ctx->last_error.clear();
    if (step == nullptr || *step == '\0') return PluginMistake(ctx, "jump: empty step name");
    ChooseOutcome(ctx, OutcomeKind::kJump);
    ctx->outcome.jump_to = step;
    return CAIRN_OK;
  } catch (...) {
    return CAIRN_ERROR;
  }
}

cairn_result HostWait(cairn_step_ctx* ctx, const char* event, const char* key, int64_t timeout_ms) {
  if (ctx == nullptr) return CAIRN_ERROR;
  try {
    ctx->last_error.clear();
    if (event == nullptr || *event == '\0') return PluginMistake(ctx, "wait: empty event name");
    if (key == nullptr || *key == '\0') return PluginMistake(ctx, "wait: empty correlation key");
    ChooseOutcome(ctx, OutcomeKind::kWait);
    ctx->outcome.wait_event = event;
    ctx->outcome.wait_key = key;
    if (timeout_ms >= 0) ctx->outcome.wait_timeout_ms = timeout_ms;
    return CAIRN_OK;
  } catch (...) {
    return CAIRN_ERROR;
  }
}

cairn_result HostSleepMs(cairn_step_ctx* ctx, int64_t ms) {
  if (ctx == nullptr) return CAIRN_ERROR;
  try {
    ctx->last_error.clear();
    if (ms < 0) return PluginMistake(ctx, "sleep_ms: negative duration " + std::to_string(ms));
    ChooseOutcome(ctx, OutcomeKind::kSleep);
    ctx->outcome.sleep_ms = ms;
    return CAIRN_OK;
  } catch (...) {
    return CAIRN_ERROR;
  }
}

cairn_result HostSleepUntil(cairn_step_ctx* ctx, const char* timestamptz) {
  if (ctx == nullptr) return CAIRN_ERROR;
  try {
    ctx->last_error.clear();
    if (timestamptz == nullptr || *timestamptz == '\0') {
      return PluginMistake(ctx, "sleep_until: empty timestamp");
    }
    ChooseOutcome(ctx, OutcomeKind::kSleep);
    ctx->outcome.sleep_until = timestamptz;
    return CAIRN_OK;
  } catch (...) {
    return CAIRN_ERROR;
  }
}

cairn_result HostComplete(cairn_step_ctx* ctx, cairn_bytes output_json) {
  if (ctx == nullptr) return CAIRN_ERROR;
  try {
    ctx->last_error.clear();
    std::optional<Json> output = ParseJson(output_json, /*empty_is_null=*/true);
    if (!output) return PluginMistake(ctx, "complete: the output is not valid JSON");
    ChooseOutcome(ctx, OutcomeKind::kComplete);
    ctx->outcome.output = std::move(*output);
    return CAIRN_OK;
  } catch (const std::exception& e) {
    return PluginMistake(ctx, std::string("complete: ") + e.what());
  } catch (...) {
    return CAIRN_ERROR;
  }
}

cairn_result HostFail(cairn_step_ctx* ctx, int retryable, const char* code, const char* message) {
  if (ctx == nullptr) return CAIRN_ERROR;
  try {
    ctx->last_error.clear();
    ChooseOutcome(ctx, OutcomeKind::kFail);
    ctx->outcome.retryable = retryable != 0;
    ctx->outcome.error_code = Text(code);
    ctx->outcome.error_message = message != nullptr && *message != '\0' ? message : "step failed";
    return CAIRN_OK;
  } catch (...) {
    return CAIRN_ERROR;
  }
}

cairn_result HostSqlExec(cairn_step_ctx* ctx, const char* sql, cairn_bytes params_json,
                         cairn_bytes* out_rows_json) {
  if (ctx == nullptr) return CAIRN_ERROR;
  try {
    ctx->last_error.clear();
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
    if (sql == nullptr || *sql == '\0') {
      ctx->last_error = "sql_exec: empty statement";
      return CAIRN_ERROR;
    }
    std::optional<Json> params = ParseJson(params_json, /*empty_is_null=*/true);
    if (params && params->is_null()) params = Json::array();
    if (!params || !params->is_array()) {
      ctx->last_error = "sql_exec: params must be a JSON array";
      return CAIRN_ERROR;
    }
    if (std::optional<std::string> refusal = RefusalOf(sql)) {
      ctx->last_error = "sql_exec: " + *refusal;
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
  } catch (...) {
    return CAIRN_ERROR;
  }
}

cairn_result HostSignal(cairn_step_ctx* ctx, const char* key, cairn_bytes payload_json) {
  if (ctx == nullptr) return CAIRN_ERROR;
  try {
    ctx->last_error.clear();
    if (key == nullptr || *key == '\0') return PluginMistake(ctx, "signal: empty correlation key");
    std::optional<Json> payload = ParseJson(payload_json, /*empty_is_null=*/true);
    if (!payload) return PluginMistake(ctx, "signal: the payload is not valid JSON");
    if (payload->is_null()) payload = Json::object();
    ctx->outcome.signals.emplace_back(key, std::move(*payload));
    return CAIRN_OK;
  } catch (const std::exception& e) {
    return PluginMistake(ctx, std::string("signal: ") + e.what());
  } catch (...) {
    return CAIRN_ERROR;
  }
}

cairn_result HostStartChild(cairn_step_ctx* ctx, const char* workflow, cairn_bytes input_json) {
  if (ctx == nullptr) return CAIRN_ERROR;
  try {
    ctx->last_error.clear();
    if (workflow == nullptr || *workflow == '\0') {
      return PluginMistake(ctx, "start_child: empty workflow name");
    }
    std::optional<Json> input = ParseJson(input_json, /*empty_is_null=*/true);
    if (input && input->is_null() && input_json.len == 0) input = Json::object();
    if (!input || !input->is_object()) {
      return PluginMistake(ctx, std::string("start_child: the input of a child of '") + workflow +
                                    "' is not a JSON object");
    }
    ctx->outcome.children.emplace_back(workflow, std::move(*input));
    return CAIRN_OK;
  } catch (const std::exception& e) {
    return PluginMistake(ctx, std::string("start_child: ") + e.what());
  } catch (...) {
    return CAIRN_ERROR;
  }
}

cairn_result HostWaitChildren(cairn_step_ctx* ctx, cairn_child_wait mode, const char* event,
                              int64_t timeout_ms) {
  if (ctx == nullptr) return CAIRN_ERROR;
  try {
    ctx->last_error.clear();
    ChildWait wait;
    switch (mode) {
      case CAIRN_CHILDREN_ALL:
        wait = ChildWait::kAll;
        break;
      case CAIRN_CHILDREN_FIRST:
        wait = ChildWait::kFirst;
        break;
      default:
        return PluginMistake(
            ctx, "wait_children: unknown mode " + std::to_string(static_cast<int>(mode)));
    }
    if (ctx->outcome.children.empty()) {
      return PluginMistake(ctx,
                           "wait_children: the step started no child run (call start_child "
                           "first, in the same invocation)");
    }
    ChooseOutcome(ctx, OutcomeKind::kWait);
    ctx->outcome.wait_children = wait;
    ctx->outcome.wait_event = event != nullptr && *event != '\0' ? event : "children";
    if (timeout_ms >= 0) ctx->outcome.wait_timeout_ms = timeout_ms;
    return CAIRN_OK;
  } catch (const std::exception& e) {
    return PluginMistake(ctx, std::string("wait_children: ") + e.what());
  } catch (...) {
    return CAIRN_ERROR;
  }
}

const char* HostLastError(cairn_step_ctx* ctx) {
  return ctx == nullptr ? "" : ctx->last_error.c_str();
}

// Append-only: a new function goes at the end, with a minor ABI bump.
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
};

// ---- The adapter ------------------------------------------------------------

class PluginStep final : public Step {
 public:
  PluginStep(std::string name, std::string plugin, cairn_step_fn invoke, void* user_data)
      : name_(std::move(name)),
        plugin_(std::move(plugin)),
        invoke_(invoke),
        user_data_(user_data) {}

  const std::string& name() const override { return name_; }
  const std::string& plugin() const override { return plugin_; }

  StepOutcome Invoke(const StepCall& call) override {
    const std::string input = call.input != nullptr ? DumpJson(*call.input) : "{}";
    const std::string context = call.context != nullptr ? DumpJson(*call.context) : "{}";
    const std::string& step = call.step.empty() ? name_ : call.step;

    cairn_step_call c{};
    c.struct_size = sizeof(cairn_step_call);
    c.host = &kHostApi;
    c.run_id = call.run_id.c_str();
    c.workflow = call.workflow.c_str();
    c.step = step.c_str();
    c.attempt = call.attempt;
    c.transactional = call.sql != nullptr ? 1 : 0;
    c.input = cairn_bytes{input.data(), input.size()};
    c.context = cairn_bytes{context.data(), context.size()};

    cairn_step_ctx ctx;
    ctx.call = &call;
    ctx.plugin = &plugin_;
    ctx.step = &step;

    cairn_result result = CAIRN_OK;
    bool escaped = false;
    try {
      result = invoke_(user_data_, &c, &ctx);
    } catch (...) {
      // Only a C++ plugin that bypasses the SDK can get here, and unwinding
      // through its frames may already have gone wrong; contain what we can.
      escaped = true;
    }

    if (ctx.transaction_error) std::rethrow_exception(ctx.transaction_error);

    StepOutcome outcome = std::move(ctx.outcome);
    auto fail = [&](bool retryable, std::string code, std::string message) {
      Json updates = std::move(outcome.context_updates);
      outcome = StepOutcome{};
      outcome.context_updates = std::move(updates);
      outcome.kind = OutcomeKind::kFail;
      outcome.retryable = retryable;
      outcome.error_code = std::move(code);
      outcome.error_message = std::move(message);
    };
    if (escaped) {
      fail(true, "exception",
           "step '" + name_ + "' of plugin '" + plugin_ + "' let an exception escape into cairn");
    } else if (!ctx.plugin_error.empty()) {
      fail(false, "plugin_error",
           "step '" + name_ + "' of plugin '" + plugin_ +
               "' misused the host API: " + ctx.plugin_error);
    } else if (result == CAIRN_OK) {
      // The chosen outcome stands; none chosen is kNext (the default).
    } else if (result == CAIRN_RETRY || result == CAIRN_ERROR) {
      const bool retryable = result == CAIRN_RETRY;
      if (outcome.kind == OutcomeKind::kFail) {
        outcome.retryable = retryable;
      } else {
        std::string message = "step returned " +
                              std::string(retryable ? "CAIRN_RETRY" : "CAIRN_ERROR") +
                              " without calling fail()";
        if (!ctx.last_error.empty()) message += " (last host error: " + ctx.last_error + ")";
        fail(retryable, "step_error", std::move(message));
      }
    } else {
      fail(false, "plugin_error",
           "step '" + name_ + "' of plugin '" + plugin_ + "' returned an unknown result " +
               std::to_string(static_cast<int>(result)));
    }
    return outcome;
  }

 private:
  std::string name_;
  std::string plugin_;
  cairn_step_fn invoke_;
  void* user_data_;
};

// ---- Trust checks -----------------------------------------------------------

std::string ModeText(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Checks owner and write permission of one path component, already
// lstat'ed into st.
void CheckComponent(const std::string& subject, const fs::path& path, const struct stat& st,
                    bool sticky_ok) {
  const uid_t euid = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != euid) {
    throw PluginError(subject + ": " + path.string() + " is owned by uid " +
                      std::to_string(st.st_uid) + ", not by root or by cairn's user (uid " +
                      std::to_string(euid) +
                      "); plugins load only from paths that nobody else controls");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    if (sticky_ok && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) != 0) return;
    const char* who = (st.st_mode & S_IWOTH) != 0 ? "others" : "its group";
    throw PluginError(subject + ": " + std::string(S_ISDIR(st.st_mode) ? "directory " : "file ") +
                      path.string() + " is writable by " + who + " (mode " + ModeText(st.st_mode) +
                      "); plugins load only from paths that nobody but " +
                      "root or cairn's user can write (" +
                      ((st.st_mode & S_ISVTX) != 0 ? std::string("use a directory of cairn's own")
                                                   : "chmod go-w " + path.string()) +
                      ")");
  }
}

enum class Want { kFile, kDirectory };

// Resolves `path` component by component, as the kernel would, and checks
// every directory it passes through (including those a symlink leads
// through) before looking inside it, so no symlink read on the way lives in
// a directory others can write. Returns the canonical path, which is what
// gets listed or dlopen'ed: a symlink swapped after the check changes nothing.
// The final component (a file, or the plugin directory itself) gets the
// strict rule: no sticky exception.
fs::path ResolveTrusted(const std::string& subject, const std::string& path, Want want) {
  if (path.empty()) throw PluginError(subject + ": empty path");
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  if (ec) throw PluginError(subject + ": cannot make the path absolute: " + ec.message());

  // Components still to walk, the next one at the back.
  std::vector<std::string> pending;
  auto push_components = [&pending](const fs::path& p) {
    std::vector<std::string> parts;
    for (const fs::path& part : p.relative_path()) {
      if (!part.empty()) parts.push_back(part.string());
    }
    pending.insert(pending.end(), parts.rbegin(), parts.rend());
  };
  push_components(absolute);

  fs::path current = "/";
  struct stat st {};
  if (::lstat("/", &st) != 0) throw PluginError(subject + ": cannot stat /");
  if (pending.empty()) {
    throw PluginError(subject + ": / is not a plugin " +
                      (want == Want::kFile ? "file" : "directory"));
  }
  CheckComponent(subject, current, st, /*sticky_ok=*/true);

  int symlinks = 0;
  while (!pending.empty()) {
    const std::string part = pending.back();
    pending.pop_back();
    if (part == ".") continue;
    if (part == "..") {
      current = current.parent_path();  // current is resolved: its parent is real
      continue;
    }
    const fs::path next = current / part;
    if (::lstat(next.c_str(), &st) != 0) {
      const int err = errno;
      throw PluginError(
          subject + ": " + (err == ENOENT ? "no such file or directory: " : "cannot stat ") +
          next.string() + (err == ENOENT ? "" : std::string(": ") + std::strerror(err)));
    }
    if (S_ISLNK(st.st_mode)) {
      if (++symlinks > 40) throw PluginError(subject + ": too many levels of symbolic links");
      std::vector<char> buf(PATH_MAX + 1);
      const ssize_t n = ::readlink(next.c_str(), buf.data(), buf.size() - 1);
      if (n < 0) throw PluginError(subject + ": cannot read symlink " + next.string());
      const fs::path target(std::string(buf.data(), static_cast<size_t>(n)));
      if (target.is_absolute()) current = "/";
      push_components(target);
      continue;
    }
    const bool last = pending.empty();
    if (!last || want == Want::kDirectory) {
      if (!S_ISDIR(st.st_mode))
        throw PluginError(subject + ": " + next.string() + " is not a directory");
    } else if (!S_ISREG(st.st_mode)) {
      throw PluginError(subject + ": " + next.string() + " is not a regular file");
    }
    CheckComponent(subject, next, st, /*sticky_ok=*/!last);
    current = next;
  }
  if (current == "/") {
    throw PluginError(subject + ": / is not a plugin " +
                      (want == Want::kFile ? "file" : "directory"));
  }
  return current;
}

std::string VersionText(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace

struct PluginRegistry::Plugin {
  PluginInfo info;
  void* handle = nullptr;
};

PluginRegistry::PluginRegistry() = default;
PluginRegistry::~PluginRegistry() = default;

void PluginRegistry::Load(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      LoadDirectory(path);
    } else {
      LoadFile(path);
    }
  }
}

void PluginRegistry::LoadDirectory(const std::string& directory) {
  const std::string subject = "plugin directory " + directory;
  // The directory itself gets the strict rule, sticky or not: anyone who may
  // create entries in it could add a plugin (say, a hard link to some
  // root-owned library).
  const fs::path dir = ResolveTrusted(subject, directory, Want::kDirectory);

  std::vector<fs::path> files;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".so" && entry.is_regular_file(ec)) {
      files.push_back(entry.path());
    }
  }
  if (ec) throw PluginError(subject + ": cannot list it: " + ec.message());
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) LoadFile(file.string());
}

void PluginRegistry::LoadFile(const std::string& path) {
  const std::string subject = "plugin " + path;
  // Every check happens before dlopen, which runs the plugin's constructors.
  const std::string canonical = ResolveTrusted(subject, path, Want::kFile).string();
  for (const auto& loaded : plugins_) {
    if (loaded->info.file == canonical) return;
  }

  void* handle = ::dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    throw PluginError(subject + ": dlopen failed: " + (error ? error : "unknown error"));
  }
  // On any error below the library is closed again: nothing of it is
  // registered yet.
  struct Closer {
    void* handle;
    ~Closer() {
      if (handle != nullptr) ::dlclose(handle);
    }
  } closer{handle};

  ::dlerror();
  void* symbol = ::dlsym(handle, CAIRN_PLUGIN_ENTRY_SYMBOL);
  if (symbol == nullptr) {
    throw PluginError(subject + ": it does not export the entry point " +
                      CAIRN_PLUGIN_ENTRY_SYMBOL +
                      " (define it with CAIRN_PLUGIN from cairn/sdk.hpp, or with "
                      "CAIRN_PLUGIN_EXPORT from cairn/plugin.h)");
  }
  auto entry = reinterpret_cast<cairn_plugin_entry_fn>(symbol);

  const cairn_plugin_descriptor* d = nullptr;
  tls_loading_file = &canonical;
  try {
    d = entry(&kHostApi);
  } catch (...) {
    tls_loading_file = nullptr;
    throw PluginError(subject + ": its entry point threw a C++ exception");
  }
  tls_loading_file = nullptr;
  if (d == nullptr) {
    throw PluginError(subject +
                      ": its entry point returned no descriptor (the plugin refused "
                      "to load; its log messages say why)");
  }

  // The first three fields are the same in every ABI version.
  const std::string ours = VersionText(CAIRN_ABI_MAJOR, CAIRN_ABI_MINOR);
  const std::string theirs = VersionText(d->abi_major, d->abi_minor);
  if (d->abi_major != CAIRN_ABI_MAJOR) {
    throw PluginError(
        subject + ": built for plugin ABI " + theirs + ", but this cairn speaks ABI " + ours +
        "; rebuild the plugin against cairn's " + std::to_string(CAIRN_ABI_MAJOR) + ".x headers");
  }
  if (d->abi_minor > CAIRN_ABI_MINOR) {
    throw PluginError(subject + ": built for plugin ABI " + theirs +
                      ", newer than this cairn's ABI " + ours +
                      "; upgrade cairn or rebuild the plugin against these headers");
  }
  constexpr size_t kMinDescriptor =
      offsetof(cairn_plugin_descriptor, step_def_size) + sizeof(size_t);
  if (d->struct_size < kMinDescriptor) {
    throw PluginError(subject + ": its descriptor is " + std::to_string(d->struct_size) +
                      " bytes, smaller than the " + std::to_string(kMinDescriptor) +
                      " bytes of ABI " + theirs);
  }
  if (d->name == nullptr || *d->name == '\0') {
    throw PluginError(subject + ": its descriptor has no plugin name");
  }
  const std::string name = d->name;
  constexpr size_t kMinStepDef = offsetof(cairn_step_def, user_data) + sizeof(void*);
  if (d->step_count > 0 && (d->steps == nullptr || d->step_def_size < kMinStepDef)) {
    throw PluginError(subject + ": plugin '" + name + "' declares " +
                      std::to_string(d->step_count) + " steps but no valid step array");
  }
  for (const auto& loaded : plugins_) {
    if (loaded->info.name == name) {
      throw PluginError(subject + ": plugin name '" + name + "' is already used by " +
                        loaded->info.file);
    }
  }

  auto plugin = std::make_shared<Plugin>();
  plugin->info.name = name;
  plugin->info.version = Text(d->version);
  plugin->info.file = canonical;
  plugin->info.abi_major = static_cast<int>(d->abi_major);
  plugin->info.abi_minor = static_cast<int>(d->abi_minor);

  std::map<std::string, std::shared_ptr<Step>> steps;
  const auto* base = reinterpret_cast<const unsigned char*>(d->steps);
  for (size_t i = 0; i < d->step_count; ++i) {
    const auto* def = reinterpret_cast<const cairn_step_def*>(base + i * d->step_def_size);
    if (def->name == nullptr || *def->name == '\0' || def->invoke == nullptr) {
      throw PluginError(subject + ": step #" + std::to_string(i) + " of plugin '" + name +
                        "' has no name or no function");
    }
    const std::string step_name = def->name;
    if (steps.count(step_name) > 0) {
      throw PluginError(subject + ": plugin '" + name + "' registers step '" + step_name +
                        "' twice");
    }
    if (auto existing = steps_.find(step_name); existing != steps_.end()) {
      std::string other_file;
      for (const auto& loaded : plugins_) {
        if (loaded->info.name == existing->second->plugin()) other_file = loaded->info.file;
      }
      throw PluginError(subject + ": step '" + step_name + "' of plugin '" + name + "' (" +
                        canonical + ") is already registered by plugin '" +
                        existing->second->plugin() + "' (" + other_file + ")");
    }
    steps.emplace(step_name,
                  std::make_shared<PluginStep>(step_name, name, def->invoke, def->user_data));
    plugin->info.steps.push_back(step_name);
  }

  closer.handle = nullptr;  // registered: kept open for the life of the process
  plugin->handle = handle;
  steps_.merge(steps);
  plugins_.push_back(std::move(plugin));
  spdlog::debug("loaded plugin {} {} from {} ({} steps)", name, plugins_.back()->info.version,
                canonical, plugins_.back()->info.steps.size());
}

std::shared_ptr<Step> PluginRegistry::Find(const std::string& step_name) const {
  auto it = steps_.find(step_name);
  return it == steps_.end() ? nullptr : it->second;
}

std::vector<PluginInfo> PluginRegistry::List() const {
  std::vector<PluginInfo> out;
  out.reserve(plugins_.size());
  for (const auto& plugin : plugins_) out.push_back(plugin->info);
  return out;
}

std::vector<std::string> PluginRegistry::StepNames() const {
  std::vector<std::string> names;
  names.reserve(steps_.size());
  for (const auto& [name, step] : steps_) names.push_back(name);
  return names;
}

}  // namespace cairn
