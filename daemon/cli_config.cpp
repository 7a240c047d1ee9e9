// `cairn config check` and `cairn config show`: what a daemon started with
// the same file, drop-ins, environment and flags would run with, found out
// without a database. check loads the configuration, the plugins and the
// workflows exactly as `cairn run` does and stops there; show prints every
// key with its effective value and the layer it came from, secrets masked.
#include <iostream>

#include "cli.hpp"

namespace cairn::cli {

po::options_description ConfigOptions() {
  po::options_description options("options");
  options.add_options()("json",
                        "show: print a JSON array of {key, value, source, env, reloadable}")(
      "concurrency", po::value<int>()->value_name("N"), "as for cairn run")(
      "worker-id", po::value<std::string>()->value_name("ID"), "as for cairn run")(
      "log-level", po::value<std::string>()->value_name("LEVEL"), "as for cairn run");
  options.add(ConnectionOptions());
  return options;
}

namespace {

int CheckConfig(const po::variables_map& vm) {
  const DaemonConfig config = LoadDaemonConfig(vm);
  const PluginsAndWorkflows checked = LoadPluginsAndWorkflows(config);
  const DefinitionSet& definitions = checked.definitions;
  const PluginCatalog& plugins = *checked.plugins;
  if (definitions.empty()) {
    throw InvalidArgumentError("no workflow definitions found in workflows.paths");
  }
  for (const ScheduleDefinition& schedule : config.schedules) {
    // Another daemon of the fleet may define it: the schedule then fires
    // there, so this is a warning, as it is at run time.
    if (definitions.Find(schedule.workflow) == nullptr) {
      std::cerr << "cairn config: warning: schedule " << Printable(schedule.name)
                << " starts workflow " << Printable(schedule.workflow)
                << ", which these workflow files do not define\n";
    }
  }
  size_t steps = 0;
  const std::vector<PluginInfo> loaded = plugins.List();
  for (const PluginInfo& plugin : loaded) steps += plugin.steps.size();
  std::cout << "config ok: " << Printable(config.source.empty() ? "defaults" : config.source)
            << ": " << loaded.size() << " plugin(s), " << steps << " step(s), "
            << definitions.size() << " workflow definition(s), " << config.schedules.size()
            << " schedule(s)\n";
  return kExitOk;
}

int ShowConfig(const po::variables_map& vm) {
  const Json shown = cairn::ShowConfig(LoadDaemonConfig(vm));
  if (vm.count("json")) {
    std::cout << shown.dump() << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const Json& entry : shown) {
    const Json& value = entry["value"];
    rows.push_back({entry["key"].get<std::string>(),
                    value.is_string() ? value.get<std::string>() : value.dump(),
                    entry["source"].get<std::string>(), entry["env"].get<std::string>()});
  }
  PrintTable({"KEY", "VALUE", "SOURCE", "ENVIRONMENT"}, rows);
  return kExitOk;
}

}  // namespace

int RunConfig(const std::vector<std::string>& args) {
  auto vm = Parse("config", args);
  const std::string action = vm["action"].as<std::string>();
  if (action == "check") return CheckConfig(vm);
  if (action == "show") return ShowConfig(vm);
  throw UsageError("cairn config: unknown action \"" + Printable(action) +
                   "\": give check or show");
}

}  // namespace cairn::cli
