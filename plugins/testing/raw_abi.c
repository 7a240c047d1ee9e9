/* Steps written against the raw C ABI that do what the SDK never does, so the
 * loader test can check how the host treats them: failure returns without
 * fail(), invalid JSON, unknown result codes, several outcome calls, several
 * sql_exec buffers, child runs (ABI 1.2, options from 1.4) and their misuse. Built into
 * <build>/plugins/fixtures/raw_abi.so. */
#include <cairn/plugin.h>
#include <string.h>

static cairn_bytes Bytes(const char* text) {
  cairn_bytes b;
  b.data = text;
  b.len = strlen(text);
  return b;
}

static cairn_result RetryWithoutFail(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  (void)u;
  (void)call;
  (void)ctx;
  return CAIRN_RETRY;
}

static cairn_result ErrorWithoutFail(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  (void)u;
  (void)call;
  (void)ctx;
  return CAIRN_ERROR;
}

/* complete() with invalid JSON is refused, and the step then fails
 * permanently even though it returns CAIRN_OK. */
static cairn_result BadJson(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  (void)u;
  if (call->host->complete(ctx, Bytes("{not json")) != CAIRN_ERROR) return CAIRN_OK;
  if (call->host->last_error(ctx)[0] == '\0') return CAIRN_RETRY; /* must say why */
  return CAIRN_OK;
}

static cairn_result UnknownResult(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  (void)u;
  (void)call;
  (void)ctx;
  return (cairn_result)7;
}

/* fail() then CAIRN_OK: the fail() outcome stands (its own retryability). */
static cairn_result FailThenOk(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  (void)u;
  call->host->fail(ctx, 0, "declined", "card declined");
  return CAIRN_OK;
}

/* Several outcome calls: the last wins; context fields set meanwhile stay. */
static cairn_result LastWins(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  const cairn_host_api* host = call->host;
  (void)u;
  host->set_context(ctx, "a", Bytes("1"));
  host->jump(ctx, "elsewhere");
  host->set_context(ctx, "a", Bytes("2"));
  host->set_context(ctx, "b", Bytes("null"));
  host->complete(ctx, Bytes("{\"n\":3}"));
  return CAIRN_OK;
}

/* Two sql_exec calls: the first buffer must still be intact after the second.
 * Sets context "first" and "second" to the raw row JSON of each call, and
 * "nul_terminated" to whether the host's buffers end with a NUL. */
static cairn_result TwoQueries(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  const cairn_host_api* host = call->host;
  cairn_bytes first, second;
  cairn_result r;
  int terminated;
  (void)u;
  r = host->sql_exec(ctx, "SELECT 1 AS one", Bytes("[]"), &first);
  if (r != CAIRN_OK) {
    host->fail(ctx, r == CAIRN_RETRY, "sql", host->last_error(ctx));
    return r;
  }
  r = host->sql_exec(ctx, "SELECT $1::int AS two", Bytes("[2]"), &second);
  if (r != CAIRN_OK) {
    host->fail(ctx, r == CAIRN_RETRY, "sql", host->last_error(ctx));
    return r;
  }
  terminated = first.data[first.len] == '\0' && second.data[second.len] == '\0' &&
               call->input.data[call->input.len] == '\0' &&
               call->context.data[call->context.len] == '\0';
  host->set_context(ctx, "first", first);
  host->set_context(ctx, "second", second);
  host->set_context(ctx, "nul_terminated", Bytes(terminated ? "true" : "false"));
  return CAIRN_OK;
}

/* sql_exec after a database error: the second call must be refused too; the
 * step then claims success, which the host must not believe. */
static cairn_result IgnoresSqlError(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  const cairn_host_api* host = call->host;
  cairn_bytes rows;
  (void)u;
  if (host->sql_exec(ctx, "INSERT INTO t VALUES (1)", Bytes(""), &rows) != CAIRN_RETRY) {
    return CAIRN_ERROR;
  }
  if (host->sql_exec(ctx, "SELECT 1", Bytes(""), &rows) != CAIRN_RETRY) return CAIRN_ERROR;
  host->next(ctx);
  return CAIRN_OK;
}

/* Refuses to go on when a host call gave an unexpected result: fails the step
 * with code "unexpected" and the call's name as message. */
#define EXPECT_RESULT(call_expr, expected, what) \
  do {                                           \
    if ((call_expr) != (expected)) {             \
      host->fail(ctx, 0, "unexpected", (what));  \
      return CAIRN_ERROR;                        \
    }                                            \
  } while (0)

/* ABI 1.2: two children, then a wait for the first of them. */
static cairn_result ChildrenFirst(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  const cairn_host_api* host = call->host;
  (void)u;
  EXPECT_RESULT(host->start_child(ctx, "child_wf", Bytes("{\"n\":1}")), CAIRN_OK, "start_child 1");
  EXPECT_RESULT(host->start_child(ctx, "other_wf", Bytes("")), CAIRN_OK, "start_child 2");
  EXPECT_RESULT(host->wait_children(ctx, CAIRN_CHILDREN_FIRST, "kids", 5000), CAIRN_OK,
                "wait_children");
  return CAIRN_OK;
}

/* ABI 1.2: a wait for all children with the default event and no timeout. */
static cairn_result ChildrenAll(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  const cairn_host_api* host = call->host;
  (void)u;
  EXPECT_RESULT(host->start_child(ctx, "child_wf", Bytes("{}")), CAIRN_OK, "start_child");
  EXPECT_RESULT(host->wait_children(ctx, CAIRN_CHILDREN_ALL, NULL, -1), CAIRN_OK, "wait_children");
  return CAIRN_OK;
}

/* Children survive a later outcome call (here next() after wait_children),
 * like context fields and signals. */
static cairn_result ChildThenNext(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  const cairn_host_api* host = call->host;
  (void)u;
  EXPECT_RESULT(host->start_child(ctx, "child_wf", Bytes("{\"n\":1}")), CAIRN_OK, "start_child");
  EXPECT_RESULT(host->wait_children(ctx, CAIRN_CHILDREN_ALL, "kids", 100), CAIRN_OK,
                "wait_children");
  EXPECT_RESULT(host->start_child(ctx, "child_wf", Bytes("{\"n\":2}")), CAIRN_OK, "start_child 2");
  host->next(ctx);
  return CAIRN_OK;
}

/* start_child, then fail(): the failure stands (the engine then starts no
 * child). */
static cairn_result ChildThenFail(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  const cairn_host_api* host = call->host;
  (void)u;
  EXPECT_RESULT(host->start_child(ctx, "child_wf", Bytes("{}")), CAIRN_OK, "start_child");
  host->fail(ctx, 1, "later", "failed after starting a child");
  return CAIRN_RETRY;
}

/* Plugin mistakes: each call must be refused with a reason; the step then
 * claims success, which the host must not believe. */
static cairn_result WaitWithoutChild(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  const cairn_host_api* host = call->host;
  (void)u;
  EXPECT_RESULT(host->wait_children(ctx, CAIRN_CHILDREN_ALL, "kids", -1), CAIRN_ERROR,
                "wait_children");
  if (host->last_error(ctx)[0] == '\0') return CAIRN_RETRY; /* must say why */
  host->next(ctx);
  return CAIRN_OK;
}

static cairn_result ChildNotObject(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  const cairn_host_api* host = call->host;
  (void)u;
  EXPECT_RESULT(host->start_child(ctx, "child_wf", Bytes("[1]")), CAIRN_ERROR, "start_child");
  if (host->last_error(ctx)[0] == '\0') return CAIRN_RETRY;
  return CAIRN_OK;
}

static cairn_result ChildNoWorkflow(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  const cairn_host_api* host = call->host;
  (void)u;
  EXPECT_RESULT(host->start_child(ctx, "", Bytes("{}")), CAIRN_ERROR, "start_child");
  if (host->last_error(ctx)[0] == '\0') return CAIRN_RETRY;
  return CAIRN_OK;
}

/* ABI 1.4: children with options (both, none), then one with an unknown
 * flag bit, which is refused. */
static cairn_result ChildrenWithOptions(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  const cairn_host_api* host = call->host;
  (void)u;
  EXPECT_RESULT(host->start_child_with(
                    ctx, "child_wf", Bytes("{\"n\":1}"),
                    CAIRN_CHILD_CANCEL_WHEN_PARENT_FAILS | CAIRN_CHILD_CANCEL_WHEN_FIRST_DONE),
                CAIRN_OK, "start_child_with both");
  EXPECT_RESULT(host->start_child_with(ctx, "other_wf", Bytes(""), 0), CAIRN_OK,
                "start_child_with none");
  EXPECT_RESULT(
      host->start_child_with(ctx, "child_wf", Bytes("{}"), CAIRN_CHILD_CANCEL_WHEN_FIRST_DONE),
      CAIRN_OK, "start_child_with first_done");
  EXPECT_RESULT(host->wait_children(ctx, CAIRN_CHILDREN_FIRST, "kids", -1), CAIRN_OK,
                "wait_children");
  return CAIRN_OK;
}

static cairn_result ChildUnknownFlag(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  const cairn_host_api* host = call->host;
  (void)u;
  EXPECT_RESULT(host->start_child_with(ctx, "child_wf", Bytes("{}"), 1u << 7), CAIRN_ERROR,
                "start_child_with");
  if (host->last_error(ctx)[0] == '\0') return CAIRN_RETRY;
  return CAIRN_OK;
}

/* Host table sanity as seen by a plugin: sizes and versions. */
static cairn_result CheckHost(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  const cairn_host_api* host = call->host;
  int ok = host->struct_size >= sizeof(cairn_host_api) && host->abi_major == CAIRN_ABI_MAJOR &&
           (int64_t)host->abi_minor - (int64_t)CAIRN_ABI_MINOR >= 0 &&
           call->struct_size >= sizeof(cairn_step_call);
  (void)u;
  host->log(ctx, CAIRN_LOG_DEBUG, "check_host");
  host->set_context(ctx, "host_ok", Bytes(ok ? "true" : "false"));
  return CAIRN_OK;
}

/* Strings that are not UTF-8: a context key (refused: it could never be
 * stored), then fail() with a code and message (kept, repaired). */
static cairn_result InvalidUtf8Key(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  (void)u;
  if (call->host->set_context(ctx, "caf\xe9", Bytes("1")) != CAIRN_ERROR) return CAIRN_OK;
  if (call->host->last_error(ctx)[0] == '\0') return CAIRN_RETRY; /* must say why */
  return CAIRN_OK;
}

static cairn_result InvalidUtf8Failure(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  (void)u;
  call->host->fail(ctx, 0, "declined\xff", "card \xc3 declined");
  return CAIRN_ERROR;
}

/* Numbers that are no enumerator where the ABI takes an enum: C allows
 * them, and the host must neither misread them nor accept the mode. */
static cairn_result UnknownEnums(void* u, const cairn_step_call* call, cairn_step_ctx* ctx) {
  const cairn_host_api* host = call->host;
  (void)u;
  host->log(ctx, (cairn_log_level)7, "a log line at level 7");
  EXPECT_RESULT(host->start_child(ctx, "child_wf", Bytes("{}")), CAIRN_OK, "start_child");
  EXPECT_RESULT(host->wait_children(ctx, (cairn_child_wait)9, "", -1), CAIRN_ERROR,
                "wait_children");
  return CAIRN_OK;
}

static const cairn_step_def kSteps[] = {
    {"raw_retry_without_fail", RetryWithoutFail, NULL},
    {"raw_error_without_fail", ErrorWithoutFail, NULL},
    {"raw_bad_json", BadJson, NULL},
    {"raw_unknown_result", UnknownResult, NULL},
    {"raw_fail_then_ok", FailThenOk, NULL},
    {"raw_last_wins", LastWins, NULL},
    {"raw_two_queries", TwoQueries, NULL},
    {"raw_ignores_sql_error", IgnoresSqlError, NULL},
    {"raw_check_host", CheckHost, NULL},
    {"raw_children_first", ChildrenFirst, NULL},
    {"raw_children_all", ChildrenAll, NULL},
    {"raw_child_then_next", ChildThenNext, NULL},
    {"raw_child_then_fail", ChildThenFail, NULL},
    {"raw_wait_without_child", WaitWithoutChild, NULL},
    {"raw_child_not_object", ChildNotObject, NULL},
    {"raw_invalid_utf8_key", InvalidUtf8Key, NULL},
    {"raw_invalid_utf8_failure", InvalidUtf8Failure, NULL},
    {"raw_unknown_enums", UnknownEnums, NULL},
    {"raw_child_no_workflow", ChildNoWorkflow, NULL},
    {"raw_children_with_options", ChildrenWithOptions, NULL},
    {"raw_child_unknown_flag", ChildUnknownFlag, NULL},
};

static const cairn_plugin_descriptor kDescriptor = {
    sizeof(cairn_plugin_descriptor),
    CAIRN_ABI_MAJOR,
    CAIRN_ABI_MINOR,
    "raw_abi",
    "1.0.0",
    kSteps,
    sizeof kSteps / sizeof kSteps[0],
    sizeof(cairn_step_def),
};

CAIRN_PLUGIN_EXPORT const cairn_plugin_descriptor* cairn_plugin_entry(const cairn_host_api* host) {
  host->log(NULL, CAIRN_LOG_DEBUG, "raw_abi fixture loaded");
  return &kDescriptor;
}
