// The plugin registry: loads step plugins (shared objects speaking the C ABI
// of cairn/plugin.h) and serves their steps to the engine as a StepCatalog.
// This room is the only code that calls dlopen: trust checks in
// plugin_trust, the host table in host_api, the C-to-C++ step adapter in
// plugin_step. Loading is a start-up affair: every problem is a PluginError
// naming the file. Once loading is done the registry is read-only, and Find
// and List are safe from any thread; Load* must not run concurrently with
// anything else on the same registry.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "errors.hpp"
#include "step.hpp"

struct cairn_plugin_descriptor;

namespace cairn {

// A plugin could not be loaded: missing file or directory, unsafe ownership
// or permissions, dlopen failure, no entry point, ABI mismatch, malformed
// descriptor, duplicate plugin or step name. The message names the file.
class PluginError : public Error {
 public:
  explicit PluginError(const std::string& message) : Error(ErrorKind::kInvalidArgument, message) {}
};

// What `cairn plugins` shows about one loaded plugin.
struct PluginInfo {
  std::string name;
  std::string version;
  std::string file;  // the canonical path that was dlopen'ed
  int abi_major = 0;
  int abi_minor = 0;
  std::vector<std::string> steps;  // in the plugin's order
};

class PluginRegistry : public StepCatalog {
 public:
  PluginRegistry();
  ~PluginRegistry() override;
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  // Loads every path in order: a directory loads each "*.so" directly in it
  // (not recursively, in name order); anything else is loaded as one file.
  void Load(const std::vector<std::string>& paths);

  // Loads every regular "*.so" file directly in `directory`, in name order.
  // The directory itself must be writable by nobody but its owner (root or
  // this process's euid), sticky or not. Plugins loaded before a failing one
  // stay loaded.
  void LoadDirectory(const std::string& directory);

  // Loads one plugin file. All or nothing: on error nothing of it is
  // registered. Loading a file that is already loaded (same canonical path)
  // does nothing.
  //
  // Before dlopen (which runs the plugin's constructors) the canonical path is
  // checked (plugin_trust.hpp): the file must be a regular file, and it and
  // every directory up to / must be owned by root or by this process's euid
  // and not writable by group or others, but for sticky ancestors such as
  // /tmp. The file is then opened with RTLD_NOW | RTLD_LOCAL.
  void LoadFile(const std::string& path);

  // The step registered under `step_name`, or nullptr when there is none.
  std::shared_ptr<Step> Find(const std::string& step_name) const;
  // The same for every workflow: a registry runs all its steps in-process.
  std::shared_ptr<Step> Find(const std::string& step_name,
                             const std::string& /*workflow*/) const override {
    return Find(step_name);
  }

  // Loaded plugins, in load order.
  std::vector<PluginInfo> List() const;

  // Every registered step name, sorted.
  std::vector<std::string> StepNames() const;

 private:
  struct Plugin;
  // The steps a descriptor registers, checked against each other and against
  // the steps already loaded; their names are appended to info.steps.
  std::map<std::string, std::shared_ptr<Step>> StepsOf(const std::string& subject,
                                                       const cairn_plugin_descriptor& d,
                                                       PluginInfo& info) const;

  std::vector<std::shared_ptr<Plugin>> plugins_;
  std::map<std::string, std::shared_ptr<Step>> steps_;
};

}  // namespace cairn
