// The steps the engine runs, as the daemon's configuration says to run them:
// each step either in a step process (process isolation, the default: a
// crashing or hanging step takes down only its own process) or on a thread
// of the daemon (for trusted plugins, where the few microseconds of a process
// hop per step matter), chosen per workflow, per plugin or for all. Built at
// start-up; Find, Unrunnable, List and IsolationOf are then safe from any
// thread.
#pragma once

#include <map>
#include <memory>
#include <set>
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
  std::map<std::string, Isolation> by_plugin;    // plugin name -> its isolation
  std::map<std::string, Isolation> by_workflow;  // workflow name -> its isolation
  // The plugin steps each workflow runs (its steps and compensations, in
  // every version): the plugins of a workflow run on threads are loaded in
  // the daemon too.
  std::map<std::string, std::set<std::string>> workflow_steps;
  plugins::StepProcessOptions processes;  // plugin_paths is filled from paths
};

class PluginCatalog : public StepCatalog {
 public:
  // Loads the plugins: in a step process first, when any step may run in
  // one, so that the daemon runs only the code of plugins some workflow runs
  // on threads. Throws PluginError for a plugin that does not load and for
  // by_plugin naming a plugin there is not.
  explicit PluginCatalog(PluginCatalogOptions options);
  ~PluginCatalog() override;

  // The step as runs of `workflow` run it; nullptr when Unrunnable says why.
  std::shared_ptr<Step> Find(const std::string& step_name,
                             const std::string& workflow) const override;
  // Why runs of `workflow` cannot run `step_name`, or "" when they can: no
  // plugin registers it, or the workflow runs it on a thread and its plugin
  // was not loaded in the daemon at start.
  std::string Unrunnable(const std::string& step_name, const std::string& workflow) const;
  std::vector<PluginInfo> List() const;
  // How runs of `workflow` run the steps of `plugin`, the one place that
  // decides: the most specific setting wins, the workflow's (by_workflow),
  // then the plugin's (by_plugin), then isolation. Without a workflow: as
  // for a workflow by_workflow does not name.
  Isolation IsolationOf(const std::string& plugin, const std::string& workflow = "") const;
  // The step processes, or nullptr when every step runs on threads.
  const plugins::StepProcesses* processes() const { return processes_.get(); }
  plugins::StepProcesses* processes() { return processes_.get(); }

 private:
  PluginCatalogOptions options_;
  std::shared_ptr<plugins::StepProcesses> processes_;
  PluginRegistry threads_;
  std::vector<PluginInfo> plugins_;
  std::map<std::string, std::string> plugin_of_step_;
};

}  // namespace cairn
