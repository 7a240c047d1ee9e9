// Private to the plugin room: the host side of the opaque cairn_step_ctx
// handle of cairn/plugin.h. One lives on the stack of each step invocation
// (plugin_step.cpp); the host functions (host_api.cpp) fill its outcome from
// the plugin's calls. Used by the invoking thread only.
#pragma once

#include <cairn/plugin.h>

#include <deque>
#include <exception>
#include <string>

#include "step.hpp"

struct cairn_step_ctx {
  const cairn::StepCall* call = nullptr;
  const std::string* plugin = nullptr;
  const std::string* step = nullptr;
  cairn::StepOutcome outcome;
  // A host call with arguments no correct plugin passes: the step fails
  // permanently with code "plugin_error", whatever it returns.
  std::string plugin_error;
  // The database failed a statement of this step: the transaction is aborted;
  // the adapter rethrows this once the plugin returns.
  std::exception_ptr transaction_error;
  std::string last_error;
  // Buffers handed out by sql_exec and idempotency_claim, valid until the
  // step returns. A deque never moves its elements, so earlier buffers stay
  // valid.
  std::deque<std::string> rows;
};

namespace cairn::plugins {

// The host function table every plugin receives, at its entry point and in
// every step call.
const cairn_host_api& HostApi();

// JSON text for a plugin: invalid UTF-8 is replaced, never thrown over.
inline std::string DumpJson(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// The plugin file whose entry point runs on this thread while it is being
// loaded (nullptr otherwise), for log messages it writes with a NULL ctx.
void SetLoadingFile(const std::string* file);

}  // namespace cairn::plugins
