// The steps the engine runs, as the daemon's configuration says to run them:
// each plugin's steps either in step processes (process isolation, the
// default: a crashing or hanging step takes down only its own process) or on
// threads of the daemon (for trusted plugins, where the few microseconds of a
// process hop per step matter). Built at start-up; Find and List are then
// safe from any thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plugin_registry.hpp"
#include "step.hpp"
#include "step_processes.hpp"

namespace cairn {

enum class Isolation { kProcess, kThread };
const char* ToString(Isolation isolation);  // "process" | "thread"

struct PluginCatalogOptions {
  std::vector<std::string> paths;  // plugin files and directories
  Isolation isolation = Isolation::kProcess;
  std::map<std::string, Isolation> by_plugin;  // plugin name -> its isolation
  plugins::StepProcessOptions processes;       // plugin_paths is filled from paths
};

class PluginCatalog : public StepCatalog {
 public:
  // Loads the plugins (in a step process first, when any plugin runs in
  // one, so that the daemon never runs their code). Throws PluginError for a
  // plugin that does not load and for by_plugin naming a plugin there is not.
  explicit PluginCatalog(PluginCatalogOptions options);
  ~PluginCatalog() override;

  std::shared_ptr<Step> Find(const std::string& step_name) const override;
  std::vector<PluginInfo> List() const;
  Isolation IsolationOf(const std::string& plugin) const;
  // The step processes, or nullptr when every plugin runs on threads.
  const plugins::StepProcesses* processes() const { return processes_.get(); }

 private:
  PluginCatalogOptions options_;
  std::shared_ptr<plugins::StepProcesses> processes_;
  PluginRegistry threads_;
  std::vector<PluginInfo> plugins_;
  std::map<std::string, Isolation> step_isolation_;
};

}  // namespace cairn
