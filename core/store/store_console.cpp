// See store_console.hpp: the console's queries (sql/queries/console_*.sql).
#include "store_console.hpp"

#include "store_internal.hpp"

namespace cairn::store {

void SetUpConsoleSession(Tx& tx, bool read_only) {
  Internal(tx).Exec("console_session", std::string(read_only ? "on" : ""));
}

RunPage ListRunsNewestFirst(Tx& tx, const RunFilter& filter, int limit,
                            const std::optional<std::string>& cursor) {
  return ListRunsWith(tx, "console_runs", filter, limit, cursor);
}

std::vector<std::pair<RunStatus, int64_t>> CountRunsUpTo(Tx& tx, int64_t cap) {
  std::vector<std::pair<RunStatus, int64_t>> counts;
  for (const auto& row : Internal(tx).Exec("console_status_counts", cap)) {
    counts.emplace_back(ParseRunStatus(row["status"].c_str()), row["runs"].as<int64_t>());
  }
  return counts;
}

std::string ReadDatabaseTime(Tx& tx, const std::string& text) {
  return Internal(tx).Exec("console_time", text)[0][0].c_str();
}

std::vector<ChildRun> ChildrenOfRun(Tx& tx, const std::string& run_id, int limit) {
  std::vector<ChildRun> children;
  for (const auto& row : Internal(tx).Exec("console_children", run_id, limit)) {
    children.push_back({row["id"].c_str(), row["workflow"].c_str(),
                        ParseRunStatus(row["status"].c_str()), row["created_at"].c_str()});
  }
  return children;
}

std::vector<DefinitionUse> ListDefinitionUse(Tx& tx) {
  std::vector<DefinitionUse> definitions;
  for (const auto& row : Internal(tx).Exec("console_definitions")) {
    definitions.push_back({row["hash"].c_str(), row["workflow"].c_str(), row["version"].as<int>(),
                           row["first_step"].c_str(), row["registered_at"].c_str(),
                           JsonField(row["definition"]), row["pinned"].as<int64_t>()});
  }
  return definitions;
}

}  // namespace cairn::store
