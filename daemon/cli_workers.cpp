// `cairn workers`: the fleet as the database sees it — each worker's host,
// pid, version, queues, slots and heartbeat, whether it is live, dead (it
// stopped heartbeating without stopping) or stopped, and the runs it holds.
// A table for people, --json for scripts.
#include <iostream>

#include "cli.hpp"
#include "records_json.hpp"

namespace cairn::cli {

namespace {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

}  // namespace

po::options_description WorkersOptions() {
  po::options_description options("options");
  options.add_options()("json", "print a JSON array");
  options.add(ConnectionOptions());
  return options;
}

int RunWorkers(const std::vector<std::string>& args) {
  auto vm = Parse("workers", args);
  store::Connection connection(DatabaseOptions(vm, "cairn workers"));
  const auto workers = connection.Transact([](store::Tx& tx) { return store::ListWorkers(tx); });

  if (vm.count("json")) {
    Json out = Json::array();
    for (const auto& w : workers) {
      out.push_back(WorkerToJson(w));
    }
    std::cout << out.dump() << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& w : workers) {
    std::string running = std::to_string(w.running.size());
    for (const auto& run : w.running) {
      running += " " + run.value("workflow", "") + ":" + run.value("step", "");
    }
    rows.push_back({w.worker.id, w.state, w.worker.hostname, std::to_string(w.worker.pid),
                    w.worker.version, Join(w.worker.queues), std::to_string(w.worker.concurrency),
                    std::to_string(w.heartbeat_age_ms / 1000) + "s ago", running});
  }
  PrintTable(
      {"WORKER", "STATE", "HOST", "PID", "VERSION", "QUEUES", "SLOTS", "HEARTBEAT", "RUNNING"},
      rows);
  return kExitOk;
}

}  // namespace cairn::cli
