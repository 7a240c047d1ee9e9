// Store operations only the web console (cairn console) needs: its session
// settings, the runs page newest first, a run's children, the registered
// definitions with the runs pinned to them, and reading a typed time. Same
// rules as store.hpp: free functions on the caller's Tx, plain structs in
// and out, database time only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model.hpp"
#include "store.hpp"

namespace cairn::store {

// Sets up a console session: every statement planned for its own
// parameters, so that the optional filters of the console's queries can use
// their indexes; with read_only, every transaction of the session is read
// only (the server refuses writes).
void SetUpConsoleSession(Tx& tx, bool read_only);

// ListRuns newest first: the same filter, page size and cursor rules.
RunPage ListRunsNewestFirst(Tx& tx, const RunFilter& filter, int limit = kMaxRunPage,
                            const std::optional<std::string>& cursor = std::nullopt);

// Runs per status, each counted up to `cap` (a count of cap means at least
// that many), so that the cost stays flat however many runs there are.
std::vector<std::pair<RunStatus, int64_t>> CountRunsUpTo(Tx& tx, int64_t cap);

// A time as the database reads it ("2026-12-01 10:00", "yesterday"), as
// timestamptz text in UTC. InvalidArgumentError when it is not a time.
std::string ReadDatabaseTime(Tx& tx, const std::string& text);

struct ChildRun {
  std::string id;
  std::string workflow;
  RunStatus status = RunStatus::kReady;
  std::string created_at;
};
inline constexpr int kMaxChildrenShown = 200;
// The runs this run started, oldest first, at most `limit`.
std::vector<ChildRun> ChildrenOfRun(Tx& tx, const std::string& run_id,
                                    int limit = kMaxChildrenShown);

struct DefinitionUse {
  std::string hash;
  std::string workflow;
  int version = 0;
  std::string first_step;
  std::string registered_at;
  Json definition;
  // Runs pinned to this hash that still need it: ready, running, waiting,
  // compensating, or compensation_failed (a retry resumes them).
  int64_t pinned = 0;
};
// Every registered definition, by workflow, newest version first.
std::vector<DefinitionUse> ListDefinitionUse(Tx& tx);

}  // namespace cairn::store
