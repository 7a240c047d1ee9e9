// `cairn idempotency show KEY`: one key of the idempotency store and its
// record (status, owner, expiry, stored result or error), in a namespace.
// Lines for people, --json for scripts; an unknown key is not found (exit 3).
#include <iomanip>
#include <iostream>

#include "cli.hpp"

namespace cairn::cli {

namespace {

Json RecordToJson(const IdempotencyRecord& record) {
  auto optional = [](const auto& value) { return value ? Json(*value) : Json(nullptr); };
  return {{"namespace", record.namespace_name},
          {"key", record.key},
          {"status", record.status},
          {"owner", optional(record.owner)},
          {"claims", record.claims},
          {"expires_at", record.expires_at},
          {"expired", record.expired},
          {"created_at", record.created_at},
          {"claimed_at", record.claimed_at},
          {"completed_at", optional(record.completed_at)},
          {"result", optional(record.result)},
          {"error", optional(record.error)}};
}

int ShowKey(const po::variables_map& vm) {
  const std::string key = vm["key"].as<std::string>();
  const std::string ns = vm["namespace"].as<std::string>();
  store::Connection connection(DatabaseOptions(vm, "cairn idempotency"));
  const auto record =
      connection.Transact([&](store::Tx& tx) { return store::GetIdempotencyRecord(tx, ns, key); });
  if (!record) {
    throw NotFoundError("no idempotency key \"" + key + "\" in namespace \"" + ns +
                        "\" (never claimed, or expired and removed by retention)");
  }
  const Json object = RecordToJson(*record);
  if (vm.count("json")) {
    std::cout << object.dump() << "\n";
    return kExitOk;
  }
  for (const auto& [field, value] : object.items()) {
    if (value.is_null()) continue;
    std::cout << std::left << std::setw(14) << field
              << Printable(value.is_string() ? value.get<std::string>() : value.dump()) << "\n";
  }
  return kExitOk;
}

}  // namespace

po::options_description IdempotencyOptions() {
  po::options_description options("options");
  options.add_options()("namespace", po::value<std::string>()->default_value("default"),
                        "the key's namespace (a plugin's keys are in its run's namespace)")(
      "json", "print a JSON object");
  options.add(ConnectionOptions());
  return options;
}

int RunIdempotency(const std::vector<std::string>& args) {
  auto vm = Parse("idempotency", args);
  const std::string action = vm["action"].as<std::string>();
  if (action == "show") return ShowKey(vm);
  throw UsageError("cairn idempotency: unknown action \"" + Printable(action) + "\": give show");
}

}  // namespace cairn::cli
