// Private to the store's .cpp files: the libpqxx session behind Connection and
// Tx, named-query execution, error translation and row decoding. Nothing
// outside core/store*.cpp includes this header.
#pragma once

#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "store.hpp"

// libpqxx binds std::optional parameters as NULL when empty.

namespace cairn::store {

struct Connection::Impl {
  ConnectionOptions options;
  std::string quoted_schema;
  std::unique_ptr<pqxx::connection> connection;
  std::unordered_set<std::string> prepared;
  std::unordered_map<std::string, int> stack_holds;  // run id -> re-entrant count

  // Prepares the named query on this session the first time it is used.
  const std::string& Prepare(const std::string& name);
};

struct Tx::Impl {
  Connection::Impl& session;
  pqxx::transaction_base& work;
  bool roll_back = false;  // see Tx::RollBackOnReturn

  // Executes the embedded query `name` with bound parameters; errors are
  // translated, naming the query.
  template <typename... Args>
  pqxx::result Exec(const std::string& name, Args&&... args) {
    try {
      return work.exec_prepared(session.Prepare(name), std::forward<Args>(args)...);
    } catch (...) {
      RethrowTranslated(name);
    }
  }

  [[noreturn]] static void RethrowTranslated(const std::string& operation);
};

inline Tx::Impl& Internal(Tx& tx) { return tx.impl(); }

// Calls a run's SQL API function (cancel_run, retry_run...) whose outcome
// column says 'unknown' for a run that does not exist; returns its row.
template <typename... Args>
pqxx::row RunApiCall(Tx& tx, const std::string& name, const std::string& run_id, Args&&... args) {
  pqxx::row row = Internal(tx).Exec(name, run_id, std::forward<Args>(args)...)[0];
  if (std::string_view(row["outcome"].c_str()) == "unknown") {
    throw NotFoundError("run " + run_id + " does not exist");
  }
  return row;
}

// ListRuns through `query`, a keyset query over (created_at, id) taking the
// filter, the cursor and the limit as list_runs does (oldest or newest first).
RunPage ListRunsWith(Tx& tx, const std::string& query, const RunFilter& filter, int limit,
                     const std::optional<std::string>& cursor);

// Translates the exception in flight (a libpqxx or std exception) into a
// cairn::Error, classifying by SQLSTATE. Errors already translated pass through.
[[noreturn]] void RethrowTranslated(const std::string& operation);

// PostgreSQL array literals of bound parameters (text[], boolean[]); every
// text element is quoted and escaped.
std::string ArrayLiteral(const std::vector<std::string>& values);
std::string ArrayLiteral(const std::vector<bool>& values);

// Row decoding.
std::optional<std::string> OptionalText(const pqxx::field& field);
std::optional<Json> OptionalJson(const pqxx::field& field);
Json JsonField(const pqxx::field& field);
Run DecodeRun(const pqxx::row& row);
// A run with the columns lock_stack_and_load_run adds: past_deadline and the
// resume_* columns of the wait it resumes from.
RunForExecution DecodeRunForExecution(const pqxx::row& row);
// A run a slot claimed for itself (claim_runs with its stack lock): the
// lock is counted as a hold of the session before the row is decoded.
ClaimedNextRun TakeClaimedNextRun(Tx::Impl& tx, const pqxx::row& row);
RunEvent DecodeEvent(const pqxx::row& row);
WaitRecord DecodeWait(const pqxx::row& row);

}  // namespace cairn::store
