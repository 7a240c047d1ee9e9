/* The no-op plugin, for benchmarks: steps that do nothing, so a benchmark
 * measures cairn (claim, checkpoint, commit) and not step code. Written in
 * plain C99 against cairn/plugin.h alone, it is also the proof that the ABI
 * needs no C++ on the plugin side. Stateless, hence reentrant. */
#include <cairn/plugin.h>
#include <stdio.h>

/* Chooses no outcome: a step that returns CAIRN_OK without one means "next". */
static cairn_result Noop(void* user_data, const cairn_step_call* call, cairn_step_ctx* ctx) {
  (void)user_data;
  (void)call;
  (void)ctx;
  return CAIRN_OK;
}

/* Finishes the run with an empty object as output. */
static cairn_result NoopComplete(void* user_data, const cairn_step_call* call,
                                 cairn_step_ctx* ctx) {
  static const char kOutput[] = "{}";
  cairn_bytes output;
  (void)user_data;
  output.data = kOutput;
  output.len = sizeof kOutput - 1;
  return call->host->complete(ctx, output);
}

/* Waits, without a timeout, for event "bench" under the correlation key
 * "noop_wait:<run id>": what `cairn bench` signals to time signal to resume. */
static cairn_result NoopWait(void* user_data, const cairn_step_call* call, cairn_step_ctx* ctx) {
  char key[128];
  (void)user_data;
  if (snprintf(key, sizeof key, "noop_wait:%s", call->run_id) >= (int)sizeof key) {
    return CAIRN_ERROR;
  }
  return call->host->wait(ctx, "bench", key, -1);
}

/* OWNERSHIP: static, plugin-owned, alive for the process as the ABI requires. */
static const cairn_step_def kSteps[] = {
    {"noop", Noop, NULL},
    {"noop_complete", NoopComplete, NULL},
    {"noop_wait", NoopWait, NULL},
};

static const cairn_plugin_descriptor kDescriptor = {
    sizeof(cairn_plugin_descriptor),
    CAIRN_ABI_MAJOR,
    CAIRN_ABI_MINOR,
    "noop",
    "1.0.0",
    kSteps,
    sizeof kSteps / sizeof kSteps[0],
    sizeof(cairn_step_def),
};

CAIRN_PLUGIN_EXPORT const cairn_plugin_descriptor* cairn_plugin_entry(const cairn_host_api* host) {
  (void)host;
  return &kDescriptor;
}
