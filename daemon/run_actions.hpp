// The three operator actions on runs (signal a wait, cancel a run, retry a
// failed run) done through the store, with what came of each in words and as
// an exit code. `cairn signal`, `cancel` and `retry` print these words; the
// console shows them. One Connection per call, used by the calling thread.
#pragma once

#include <chrono>
#include <string>

#include "store.hpp"

namespace cairn::cli {

struct ActionOutcome {
  int exit_code = 0;    // a cli::ExitCode: 0 done, 5 nothing to do, 3/4/6 refused
  std::string outcome;  // one word for scripts: "delivered", "already_delivered", ...
  std::string message;  // a sentence for people; raw text (keys and ids unescaped)
  bool done() const { return exit_code == 0; }
};

// Delivers payload to the wait with this correlation key (`cairn signal`).
// retention_text is how --inbox-retention was given, for the message.
ActionOutcome SignalWait(store::Connection& connection, const std::string& key, const Json& payload,
                         std::chrono::milliseconds inbox_retention,
                         const std::string& retention_text);
// Cancels the run (`cairn cancel`). NotFoundError for an unknown run.
ActionOutcome CancelRunNow(store::Connection& connection, const std::string& run_id,
                           const std::string& reason);
// Retries a failed run at its failed step (`cairn retry`). NotFoundError for
// an unknown run.
ActionOutcome RetryRunNow(store::Connection& connection, const std::string& run_id);

}  // namespace cairn::cli
