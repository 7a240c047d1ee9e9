/* The cairn plugin C ABI: the only contract between the cairn host and a step
 * plugin. Pure C99 (also valid C++); no C++ type ever crosses it, so a plugin
 * built with another compiler or standard library works. This header is the
 * plugin author's reference; C++ authors usually write against cairn/sdk.hpp,
 * which is built on top of it.
 *
 * Shape (after PostgreSQL's magic block, SQLite's api routines and Envoy's
 * dynamic-module abi.h):
 *
 *   - A plugin is a shared object exporting ONE symbol, cairn_plugin_entry
 *     (CAIRN_PLUGIN_ENTRY_SYMBOL). The host calls it once after dlopen and gets
 *     back a descriptor: its own size, the ABI version it was built for, the
 *     plugin's name and version, and an array of steps.
 *   - The host refuses a descriptor whose abi_major differs from its own or
 *     whose abi_minor is newer than its own. Within one major, structs and the
 *     host table only ever grow at the end (append-only), so a plugin built for
 *     minor N runs on any host with minor >= N, and every host function the
 *     plugin's header declares is present.
 *   - A step is a function pointer plus a user_data pointer. It receives the
 *     call (run id, step name, attempt, input and context as JSON) and an
 *     opaque context handle, and chooses its outcome by calling functions of
 *     the host table (next, jump, wait, wait_children, sleep, complete, fail)
 *     on that handle. From ABI 1.3 it can make an effect outside the
 *     database once across attempts with the idempotency store
 *     (idempotency_claim, idempotency_complete, idempotency_fail). From
 *     ABI 1.4 a child run it starts may ask to be cancelled along with its
 *     parent (start_child_with), and a compensation learns which step of
 *     the workflow it undoes (cairn_step_call.compensates).
 *     It returns a small result code (CAIRN_OK / CAIRN_RETRY / CAIRN_ERROR);
 *     details travel through host calls, never through the return value.
 *   - JSON crosses as UTF-8 bytes {data, len}; names, codes and messages as
 *     NUL-terminated UTF-8 strings.
 *
 * OWNERSHIP (the rule for everything below): each side frees only what it
 * allocated. Memory the host passes to the plugin is host-owned and valid
 * until the step function returns, unless a note says otherwise; the plugin
 * copies what it wants to keep. Memory the plugin passes to the host (strings,
 * JSON, the descriptor) is plugin-owned; the host copies what it keeps before
 * the host call returns, except the descriptor and everything it points to,
 * which the plugin keeps valid and unchanged for the life of the process.
 *
 * THREADS: the host calls step functions concurrently from several executor
 * threads, possibly the same step at once; step functions must be reentrant.
 * A cairn_step_ctx belongs to one invocation: use it only on the thread that
 * received it and only before the step function returns.
 */
#ifndef CAIRN_PLUGIN_H
#define CAIRN_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes. A change that breaks existing
 * plugins bumps the major; an append to a struct or to the host table bumps
 * the minor. */
#define CAIRN_ABI_MAJOR 1
#define CAIRN_ABI_MINOR 4

/* The one symbol a plugin exports. */
#define CAIRN_PLUGIN_ENTRY_SYMBOL "cairn_plugin_entry"

/* cairn and its plugins are built with -fvisibility=hidden so that libraries
 * bundled into a plugin never clash with the host's; the entry point alone is
 * given default visibility. */
#if defined(_WIN32)
#define CAIRN_PLUGIN_EXPORT __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define CAIRN_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define CAIRN_PLUGIN_EXPORT
#endif

/* Result of a step function and of host calls. Details (error code, message)
 * travel through host calls, never through this value.
 *   CAIRN_OK     success. For a step: the outcome it chose through the host
 *                table stands; a step that chose none means "next".
 *   CAIRN_RETRY  a transient failure. For a step: the step failed and may be
 *                retried by the step's retry policy; the code and message come
 *                from the step's last fail() call, or a generic message.
 *   CAIRN_ERROR  a permanent failure. For a step: the step failed and is not
 *                retried; code and message as for CAIRN_RETRY. For a host
 *                call: the call was refused (bad argument, not allowed here);
 *                last_error() says why.
 * OWNERSHIP: a plain value. */
typedef enum cairn_result { CAIRN_OK = 0, CAIRN_RETRY = 1, CAIRN_ERROR = 2 } cairn_result;

/* Log severities for host->log. OWNERSHIP: a plain value. */
typedef enum cairn_log_level {
  CAIRN_LOG_DEBUG = 0,
  CAIRN_LOG_INFO = 1,
  CAIRN_LOG_WARN = 2,
  CAIRN_LOG_ERROR = 3
} cairn_log_level;

/* Which child runs host->wait_children waits for (ABI 1.2): all the child runs
 * the step started, or the first of them to finish.
 * OWNERSHIP: a plain value. */
typedef enum cairn_child_wait { CAIRN_CHILDREN_ALL = 0, CAIRN_CHILDREN_FIRST = 1 } cairn_child_wait;

/* When a child run started with host->start_child_with is cancelled along
 * with its parent (ABI 1.4), as bits of its `flags`; 0 asks for neither
 * (start_child's behaviour). Cancelling the parent always cancels its
 * unfinished children, whatever they asked.
 *   CAIRN_CHILD_CANCEL_WHEN_PARENT_FAILS: when the parent fails, however it
 *     does (a step failing for good, a crash, its deadline, a wait timing
 *     out), in the transaction that fails it.
 *   CAIRN_CHILD_CANCEL_WHEN_FIRST_DONE: when the parent waits for the first
 *     of its children (CAIRN_CHILDREN_FIRST) and another child is that first:
 *     in the commit of the parent's step that resumes with its summary.
 * OWNERSHIP: a plain value. */
typedef enum cairn_child_flag {
  CAIRN_CHILD_CANCEL_WHEN_PARENT_FAILS = 1u << 0,
  CAIRN_CHILD_CANCEL_WHEN_FIRST_DONE = 1u << 1
} cairn_child_flag;

/* A byte buffer, used for UTF-8 JSON text. Not NUL-terminated in general, but
 * every buffer the HOST hands out also has data[len] == '\0', for the
 * convenience of C JSON parsers.
 * OWNERSHIP: owned by whichever side filled it in; see each use. The struct
 * itself is passed by value and owns nothing. */
typedef struct cairn_bytes {
  const char* data;
  size_t len;
} cairn_bytes;

/* One invocation of a step, seen from the plugin: the handle every outcome
 * and sql call takes. Its layout is private to the host.
 * OWNERSHIP: host-owned; valid only during the step function call that
 * received it, on that thread. Never free or keep it. */
typedef struct cairn_step_ctx cairn_step_ctx;

struct cairn_host_api; /* defined below */

/* What the host passes to a step function. Fields after context exist only
 * when struct_size covers them (a host of an older minor passes a shorter
 * struct): read them only after checking struct_size.
 * OWNERSHIP: the struct and every pointer in it are host-owned and valid until
 * the step function returns. */
typedef struct cairn_step_call {
  size_t struct_size;                /* sizeof(cairn_step_call) in the host */
  const struct cairn_host_api* host; /* the host table (same as at entry) */
  const char* run_id;                /* the run (stack) being executed */
  const char* workflow;              /* its workflow definition name */
  const char* step;                  /* the step's name in the workflow definition; for a
                                        compensation, the plugin step it runs (compensate:) */
  int32_t attempt;                   /* 1 on the first try, then 2, 3... */
  int32_t transactional;             /* nonzero: sql_exec is available */
  cairn_bytes input;                 /* the run's input: a JSON object */
  cairn_bytes context;               /* the run's context: a JSON object */
  /* ---- ABI 1.4 ---- */
  const char* compensates; /* for a compensation, the name of the workflow step it
                              undoes (the step whose compensate: named it); NULL for
                              a forward step */
} cairn_step_call;

/* A step function.
 *   user_data  the pointer from the step's cairn_step_def, unchanged.
 *   call       the invocation (see cairn_step_call).
 *   ctx        the handle to pass to host calls.
 * Choose the outcome with host->next/jump/wait/wait_children/sleep_ms/
 * sleep_until/complete/fail (the last call wins) and set context fields with
 * host->set_context (and, from ABI 1.1 and 1.2, send signals with
 * host->signal and start child runs with host->start_child), then return
 * CAIRN_OK; or return CAIRN_RETRY / CAIRN_ERROR to fail (after host->fail()
 * for a specific code and message). The step body may run more
 * than once for one checkpoint (at-least-once): make external side effects
 * idempotent (the idempotency store, ABI 1.3), or use sql_exec in a
 * transactional step.
 * C++ plugins: no exception may leave this function (the SDK makes sure).
 * OWNERSHIP: see cairn_step_call and cairn_step_ctx; the function returns
 * nothing the host must free. */
typedef cairn_result (*cairn_step_fn)(void* user_data, const cairn_step_call* call,
                                      cairn_step_ctx* ctx);

/* One step a plugin provides. Step names are global: two loaded plugins
 * registering the same step name are a start-up error.
 * OWNERSHIP: plugin-owned, read by the host; must stay valid and unchanged
 * for the life of the process (usually a static array). */
typedef struct cairn_step_def {
  const char* name;     /* non-empty UTF-8, unique among all loaded plugins */
  cairn_step_fn invoke; /* non-NULL */
  void* user_data;      /* passed back to invoke; may be NULL */
} cairn_step_def;

/* What cairn_plugin_entry returns. The first three fields are fixed for
 * every ABI version (the host reads them before it trusts anything else).
 * OWNERSHIP: plugin-owned, including every string and the steps array; must
 * stay valid and unchanged for the life of the process (usually static). */
typedef struct cairn_plugin_descriptor {
  size_t struct_size;          /* sizeof(cairn_plugin_descriptor) as the plugin was built */
  uint32_t abi_major;          /* CAIRN_ABI_MAJOR as the plugin was built */
  uint32_t abi_minor;          /* CAIRN_ABI_MINOR as the plugin was built */
  const char* name;            /* plugin name, e.g. "example"; unique among loaded plugins */
  const char* version;         /* plugin version, free text, e.g. "1.0.0" */
  const cairn_step_def* steps; /* step_count elements ... */
  size_t step_count;
  size_t step_def_size; /* ... each sizeof(cairn_step_def) as the plugin was
                           built: the host walks the array with this stride,
                           so cairn_step_def may grow in a later minor */
  /* ABI 1.1 and later append fields here. */
} cairn_plugin_descriptor;

/* The host function table. Passed to the entry point and in every call. All
 * functions are safe to call concurrently for different ctx values. Functions
 * that take a ctx need the ctx of the current invocation; log also accepts
 * NULL (for messages from the entry point).
 * OWNERSHIP: the table is host-owned and valid for the life of the process.
 * Arguments the plugin passes are plugin-owned: the host copies what it keeps
 * before returning. */
typedef struct cairn_host_api {
  size_t struct_size; /* sizeof(cairn_host_api) in the host: >= the plugin's */
  uint32_t abi_major; /* the host's CAIRN_ABI_MAJOR */
  uint32_t abi_minor; /* the host's CAIRN_ABI_MINOR */

  /* Writes message to the daemon's log, tagged with the plugin, run, step and
   * attempt. ctx may be NULL. OWNERSHIP: message is plugin-owned. */
  void (*log)(cairn_step_ctx* ctx, cairn_log_level level, const char* message);

  /* Sets context field key to the JSON value json (any JSON value; the JSON
   * literal null removes the field). Applied with the step's outcome, unless
   * the step fails (a failed attempt's changes are discarded); one audit
   * event per changed field. Setting a key twice keeps the
   * last value. Returns CAIRN_ERROR for an empty key or invalid JSON (which
   * also fails the step permanently with code "plugin_error").
   * OWNERSHIP: key and json are plugin-owned; the host copies them. */
  cairn_result (*set_context)(cairn_step_ctx* ctx, const char* key, cairn_bytes json);

  /* Outcome: continue with the next step of the definition. This is also the
   * outcome of a step that returns CAIRN_OK without choosing one. */
  cairn_result (*next)(cairn_step_ctx* ctx);

  /* Outcome: continue with the named step of the definition.
   * OWNERSHIP: step is plugin-owned; the host copies it. */
  cairn_result (*jump)(cairn_step_ctx* ctx, const char* step);

  /* Outcome: park the run until event is signalled with correlation key key
   * (unique across waiting runs); the signal's payload is then available in
   * the context. timeout_ms < 0 waits forever.
   * OWNERSHIP: event and key are plugin-owned; the host copies them. */
  cairn_result (*wait)(cairn_step_ctx* ctx, const char* event, const char* key, int64_t timeout_ms);

  /* Outcome: continue with the next step after ms milliseconds (>= 0) of
   * database time. */
  cairn_result (*sleep_ms)(cairn_step_ctx* ctx, int64_t ms);

  /* Outcome: continue with the next step at a PostgreSQL timestamptz, given
   * as text, e.g. "2030-01-01 00:00:00+00" (compared with database time).
   * OWNERSHIP: timestamptz is plugin-owned; the host copies it. */
  cairn_result (*sleep_until)(cairn_step_ctx* ctx, const char* timestamptz);

  /* Outcome: finish the run successfully with output (any JSON value; len 0
   * means null). Returns CAIRN_ERROR for invalid JSON (and fails the step
   * permanently with code "plugin_error").
   * OWNERSHIP: output_json is plugin-owned; the host copies it. */
  cairn_result (*complete)(cairn_step_ctx* ctx, cairn_bytes output_json);

  /* Outcome: the step failed. retryable != 0 lets the step's retry policy try
   * again (unless code is listed as non-retryable in the definition); 0 fails
   * the run now. code is a short machine-readable word ("card_declined"),
   * message a sentence for people; either may be NULL. If the step then
   * returns CAIRN_RETRY or CAIRN_ERROR, the return value decides retryability.
   * OWNERSHIP: code and message are plugin-owned; the host copies them. */
  cairn_result (*fail)(cairn_step_ctx* ctx, int retryable, const char* code, const char* message);

  /* Runs one parameterized SQL statement inside the step's transaction: the
   * same transaction that commits the step's checkpoint, so its writes commit
   * exactly when the step's outcome does. Only for transactional steps
   * (call->transactional != 0). params_json is a JSON array bound to $1, $2,
   * ... (len 0 means no parameters); on CAIRN_OK *out_rows_json receives the
   * result rows as a JSON array of objects (column name -> value).
   * Returns CAIRN_ERROR when the call is refused before any SQL ran: the step
   * is not transactional, params are not a JSON array, or the statement is
   * transaction control (BEGIN, COMMIT, ROLLBACK, SAVEPOINT...) or otherwise
   * refused; the step may carry on. Returns CAIRN_RETRY when the database
   * reported an error: the transaction is then aborted, further sql_exec calls
   * fail, and the step's outcome is discarded (the host rolls back and
   * handles the database error as it handles a failed checkpoint).
   * last_error() has the reason in both cases.
   * OWNERSHIP: sql and params_json are plugin-owned. *out_rows_json is
   * host-owned and valid until the step function returns (each call gets its
   * own buffer); the plugin must not free it. */
  cairn_result (*sql_exec)(cairn_step_ctx* ctx, const char* sql, cairn_bytes params_json,
                           cairn_bytes* out_rows_json);

  /* The reason the last refused or failed host call on ctx gave, or "" when
   * none did.
   * OWNERSHIP: host-owned; valid until the next host call on ctx or the
   * return of the step function, whichever is first. */
  const char* (*last_error)(cairn_step_ctx* ctx);

  /* ---- ABI 1.1 ---- */

  /* Signals another run: delivers payload_json (a JSON value; len 0 means {})
   * to the wait with correlation key `key`, in the same transaction that
   * commits this step, so the signal is sent exactly when the step's outcome
   * commits (and not at all if the step fails). Delivery follows cairn
   * signal's rules: a duplicate changes nothing, a key nobody waits on yet is
   * kept in the inbox. Check struct_size before calling: a 1.0 host lacks it.
   * OWNERSHIP: key and payload_json are plugin-owned; the host copies them. */
  cairn_result (*signal)(cairn_step_ctx* ctx, const char* key, cairn_bytes payload_json);

  /* ---- ABI 1.2 ---- */

  /* Starts a child run of the newest registered definition of `workflow`
   * with input_json (a JSON object; len 0 means {}), in the same transaction
   * that commits this step, so the child starts exactly when the step's
   * outcome commits (and not at all if the step fails). The child's parent is
   * this run; cancelling the parent cancels its unfinished children. Calls
   * made before a later outcome call survive it, like context updates and
   * signals; several calls start several children, in call order. Returns
   * CAIRN_ERROR for an empty workflow name or input that is not a JSON object
   * (which also fails the step permanently with code "plugin_error"). An
   * unknown workflow is found only when the step commits: the step then
   * fails permanently. Check struct_size before calling: an older host lacks
   * it.
   * OWNERSHIP: workflow and input_json are plugin-owned; the host copies
   * them. */
  cairn_result (*start_child)(cairn_step_ctx* ctx, const char* workflow, cairn_bytes input_json);

  /* Outcome: park the run until all (CAIRN_CHILDREN_ALL) or the first
   * (CAIRN_CHILDREN_FIRST) of the child runs this step started (with
   * start_child, in this invocation) have finished; then the run continues
   * with the next step, and context[event] (event NULL or "" means
   * "children") is a JSON array of {"id", "workflow", "status", "output",
   * "error"} objects: every child in start order for CAIRN_CHILDREN_ALL, the
   * one that finished first for CAIRN_CHILDREN_FIRST. timeout_ms < 0 waits
   * forever; on timeout the step's on_wait_timeout applies, as for wait().
   * Returns CAIRN_ERROR when no child was started before the call, or for an
   * unknown mode (either also fails the step permanently with code
   * "plugin_error"). Check struct_size before calling: an older host lacks
   * it.
   * OWNERSHIP: event is plugin-owned; the host copies it. */
  cairn_result (*wait_children)(cairn_step_ctx* ctx, cairn_child_wait mode, const char* event,
                                int64_t timeout_ms);

  /* ---- ABI 1.3 ---- */

  /* The idempotency store: make an effect outside the database (a charge,
   * an e-mail) once across retries, timeouts and takeovers. Keys live in the
   * run's namespace and are owned by the run, the same owner on every
   * attempt. Each call commits at once, in a transaction of its own, never
   * in the step's (so a claim and a completion survive the step being
   * killed); times are database time. The C++ SDK's StepContext::once wraps
   * the three calls. Check struct_size before calling: an older host lacks
   * them.
   *
   * idempotency_claim claims key for lease_ms (>= 0) milliseconds and sets
   * *out_state_json to a JSON object:
   *   {"status": "claimed"}      the run holds the key now: make the effect,
   *                              then call idempotency_complete (or
   *                              idempotency_fail). "in_doubt": true when this
   *                              claim took over one that never completed or
   *                              failed (an earlier attempt of this run that
   *                              died or timed out, or another owner whose
   *                              claim expired): the effect may have happened.
   *                              "error" is the failure of a failed claim this
   *                              one replaced.
   *   {"status": "in_progress"}  another owner holds the key until
   *                              "expires_at" ("owner" says who).
   *   {"status": "completed"}    "result" is the stored result; do not make
   *                              the effect again.
   * Every state also carries "namespace", "key", "owner", "claims" (how
   * often the key was claimed) and "expires_at".
   * Returns CAIRN_ERROR, changing nothing, for an empty key, one over 512
   * bytes or not UTF-8, a negative lease, or a NULL out_state_json; and when
   * the host offers no idempotency store. Returns CAIRN_RETRY when the
   * database failed the call (the key is as it was, or claimed by this run
   * if the commit was lost: the next attempt's claim then says in_doubt).
   * last_error() has the reason in both cases.
   * OWNERSHIP: key is plugin-owned. *out_state_json is host-owned and valid
   * until the step function returns. */
  cairn_result (*idempotency_claim)(cairn_step_ctx* ctx, const char* key, int64_t lease_ms,
                                    cairn_bytes* out_state_json);

  /* Stores result_json (any JSON value; len 0 means null) as the result of
   * key, which this run holds in progress, and keeps it ttl_ms (>= 0)
   * milliseconds from now. Returns CAIRN_OK when stored; CAIRN_RETRY when
   * the run no longer holds the key (its claim expired and another owner
   * took it, or it was completed or failed) or the database failed the call;
   * CAIRN_ERROR, changing nothing, for an invalid key, result or ttl, or a
   * result over the max_idempotency_result_bytes limit.
   * OWNERSHIP: key and result_json are plugin-owned. */
  cairn_result (*idempotency_complete)(cairn_step_ctx* ctx, const char* key,
                                       cairn_bytes result_json, int64_t ttl_ms);

  /* Marks key, which this run holds in progress, failed with error (may be
   * NULL): the effect did not happen, and the next claim, by anyone, takes
   * the key at once. Returns CAIRN_OK when marked; CAIRN_RETRY when the run
   * no longer holds the key or the database failed the call; CAIRN_ERROR for
   * an invalid key.
   * OWNERSHIP: key and error are plugin-owned. */
  cairn_result (*idempotency_fail)(cairn_step_ctx* ctx, const char* key, const char* error);

  /* ---- ABI 1.4 ---- */

  /* start_child with options: flags is a bitwise OR of cairn_child_flag
   * values saying when the child is cancelled along with its parent (0: as
   * start_child). The child keeps what it asked for (`cairn show` lists
   * it); a child cancelled so records why in its history, and the parent a
   * "children_cancelled" event. Returns CAIRN_ERROR for what start_child
   * refuses, and for an unknown flag bit (either also fails the step
   * permanently with code "plugin_error"). Check struct_size before calling:
   * an older host lacks it.
   * OWNERSHIP: workflow and input_json are plugin-owned; the host copies
   * them. */
  cairn_result (*start_child_with)(cairn_step_ctx* ctx, const char* workflow,
                                   cairn_bytes input_json, uint32_t flags);

  /* ABI 1.5 and later append functions here. */
} cairn_host_api;

/* The entry point every plugin exports (name: CAIRN_PLUGIN_ENTRY_SYMBOL).
 * Called once per process, after dlopen and before any step, with the host
 * table. Returns the plugin's descriptor, or NULL to refuse to load (log why
 * with host->log(NULL, ...) first). Keep it cheap and free of side effects:
 * `cairn plugins` loads every plugin just to list it.
 * OWNERSHIP: host is host-owned and valid for the life of the process (it may
 * be kept). The returned descriptor is plugin-owned; see
 * cairn_plugin_descriptor. */
typedef const cairn_plugin_descriptor* (*cairn_plugin_entry_fn)(const cairn_host_api* host);

CAIRN_PLUGIN_EXPORT const cairn_plugin_descriptor* cairn_plugin_entry(const cairn_host_api* host);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CAIRN_PLUGIN_H */
