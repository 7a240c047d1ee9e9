// See plugin_catalog.hpp.
#include "plugin_catalog.hpp"

#include <algorithm>

namespace cairn {

const char* ToString(Isolation isolation) {
  return isolation == Isolation::kProcess ? "process" : "thread";
}

PluginCatalog::PluginCatalog(PluginCatalogOptions options) : options_(std::move(options)) {
  auto isolation_of = [&](const std::string& plugin) {
    auto it = options_.by_plugin.find(plugin);
    return it == options_.by_plugin.end() ? options_.isolation : it->second;
  };
  bool any_process = options_.isolation == Isolation::kProcess;
  for (const auto& [plugin, isolation] : options_.by_plugin) {
    any_process = any_process || isolation == Isolation::kProcess;
  }
  if (any_process) {
    options_.processes.plugin_paths = options_.paths;
    processes_ = plugins::StepProcesses::Start(options_.processes);
    plugins_ = processes_->plugins();
    for (const PluginInfo& info : plugins_) {
      if (isolation_of(info.name) == Isolation::kThread) threads_.LoadFile(info.file);
    }
  } else {
    threads_.Load(options_.paths);
    plugins_ = threads_.List();
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
  for (const PluginInfo& info : plugins_) {
    for (const std::string& step : info.steps) step_isolation_[step] = isolation_of(info.name);
  }
}

PluginCatalog::~PluginCatalog() = default;

std::shared_ptr<Step> PluginCatalog::Find(const std::string& step_name) const {
  auto it = step_isolation_.find(step_name);
  if (it == step_isolation_.end()) return nullptr;
  return it->second == Isolation::kThread ? threads_.Find(step_name) : processes_->Find(step_name);
}

std::vector<PluginInfo> PluginCatalog::List() const { return plugins_; }

Isolation PluginCatalog::IsolationOf(const std::string& plugin) const {
  auto it = options_.by_plugin.find(plugin);
  return it == options_.by_plugin.end() ? options_.isolation : it->second;
}

}  // namespace cairn
