/* Host calls with enum arguments, made from C as a plugin makes them: C
 * passes any int where the ABI takes an enum, which C++ code cannot do
 * without undefined behaviour of its own (plugin_abi_fuzzer.cpp). */
#include <cairn/plugin.h>

cairn_result FuzzWaitChildren(const cairn_host_api* host, cairn_step_ctx* ctx, int mode,
                              const char* event, int64_t timeout_ms) {
  return host->wait_children(ctx, (cairn_child_wait)mode, event, timeout_ms);
}

void FuzzLog(const cairn_host_api* host, cairn_step_ctx* ctx, int level, const char* message) {
  host->log(ctx, (cairn_log_level)level, message);
}
