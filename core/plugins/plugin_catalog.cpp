// See plugin_catalog.hpp.
#include "plugin_catalog.hpp"

#include <algorithm>

namespace cairn {

namespace {

bool AnyProcess(const std::map<std::string, Isolation>& isolation) {
  return std::any_of(isolation.begin(), isolation.end(),
                     [](const auto& entry) { return entry.second == Isolation::kProcess; });
}

}  // namespace

const char* ToString(Isolation isolation) {
  return isolation == Isolation::kProcess ? "process" : "thread";
}

PluginCatalog::PluginCatalog(PluginCatalogOptions options) : options_(std::move(options)) {
  const bool any_process = options_.isolation == Isolation::kProcess ||
                           AnyProcess(options_.by_plugin) || AnyProcess(options_.by_workflow);
  if (any_process) {
    options_.processes.plugin_paths = options_.paths;
    processes_ = plugins::StepProcesses::Start(options_.processes);
    plugins_ = processes_->plugins();
  } else {
    threads_.Load(options_.paths);
    plugins_ = threads_.List();
  }
  for (const PluginInfo& info : plugins_) {
    for (const std::string& step : info.steps) plugin_of_step_[step] = info.name;
  }
  if (any_process) {
    // In the daemon too: the plugins some step runs on a thread, for
    // workflows isolation_by_workflow does not name or for one it puts on
    // threads.
    std::set<std::string> in_daemon;
    for (const PluginInfo& info : plugins_) {
      if (IsolationOf(info.name) == Isolation::kThread) in_daemon.insert(info.name);
    }
    for (const auto& [workflow, steps] : options_.workflow_steps) {
      for (const std::string& step : steps) {
        auto plugin = plugin_of_step_.find(step);
        if (plugin != plugin_of_step_.end() &&
            IsolationOf(plugin->second, workflow) == Isolation::kThread) {
          in_daemon.insert(plugin->second);
        }
      }
    }
    for (const PluginInfo& info : plugins_) {
      if (in_daemon.count(info.name) > 0) threads_.LoadFile(info.file);
    }
  }
  for (const auto& entry : options_.by_plugin) {
    // Not a structured binding: clang 14 (clang-tidy, the fuzz build) cannot
    // capture one in a lambda.
    const std::string& plugin = entry.first;
    const bool loaded = std::any_of(plugins_.begin(), plugins_.end(),
                                    [&](const PluginInfo& info) { return info.name == plugin; });
    if (!loaded) {
      throw PluginError("plugins.isolation_by_plugin names plugin '" + plugin +
                        "', which no plugin directory holds");
    }
  }
}

PluginCatalog::~PluginCatalog() = default;

std::shared_ptr<Step> PluginCatalog::Find(const std::string& step_name,
                                          const std::string& workflow) const {
  auto plugin = plugin_of_step_.find(step_name);
  if (plugin == plugin_of_step_.end()) return nullptr;
  return IsolationOf(plugin->second, workflow) == Isolation::kThread ? threads_.Find(step_name)
                                                                     : processes_->Find(step_name);
}

std::string PluginCatalog::Unrunnable(const std::string& step_name,
                                      const std::string& workflow) const {
  auto plugin = plugin_of_step_.find(step_name);
  if (plugin == plugin_of_step_.end()) {
    return "unknown plugin step \"" + step_name + "\" (no loaded plugin registers it)";
  }
  if (Find(step_name, workflow) != nullptr) return "";
  // Loading a plugin into a running daemon is not done: its code would run
  // beside steps in flight, and a reload could not be undone if it failed.
  return "plugin step \"" + step_name + "\" runs on a thread in workflow " + workflow +
         " (plugins.isolation_by_workflow), but its plugin '" + plugin->second +
         "' was not loaded in the daemon when it started: restart the daemon to run it";
}

std::vector<PluginInfo> PluginCatalog::List() const { return plugins_; }

Isolation PluginCatalog::IsolationOf(const std::string& plugin, const std::string& workflow) const {
  if (auto it = options_.by_workflow.find(workflow); it != options_.by_workflow.end()) {
    return it->second;
  }
  auto it = options_.by_plugin.find(plugin);
  return it == options_.by_plugin.end() ? options_.isolation : it->second;
}

}  // namespace cairn
