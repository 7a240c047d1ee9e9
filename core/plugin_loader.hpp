// Loads step plugins (shared objects speaking the C ABI of cairn/plugin.h)
// and adapts each of their steps to cairn::Step. This is the only code that
// calls dlopen. Loading is a start-up affair: every problem is a PluginError
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

class PluginRegistry {
 public:
  PluginRegistry();
  ~PluginRegistry();
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
  // checked: the file must be a regular file, and it and every directory up
  // to / must be owned by root or by this process's euid and not writable by
  // group or others. The one exception is an ancestor directory with the
  // sticky bit set (such as /tmp): there nobody but an entry's owner may
  // rename or delete the entry, so the entries below it on our path, which
  // the rule above already restricts to root or euid, cannot be swapped.
  // The file is then opened with RTLD_NOW | RTLD_LOCAL.
  void LoadFile(const std::string& path);

  // The step registered under `step_name`, or nullptr when there is none.
  std::shared_ptr<Step> Find(const std::string& step_name) const;

  // Loaded plugins, in load order.
  std::vector<PluginInfo> List() const;

  // Every registered step name, sorted.
  std::vector<std::string> StepNames() const;

 private:
  struct Plugin;

  std::vector<std::shared_ptr<Plugin>> plugins_;
  std::map<std::string, std::shared_ptr<Step>> steps_;
};

}  // namespace cairn
