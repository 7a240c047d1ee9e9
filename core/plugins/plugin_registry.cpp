// The plugin registry: dlopen of trusted paths, the ABI handshake, and the
// steps each plugin registers. Plugins are never dlclose'd once registered:
// steps, descriptors and host-table pointers the plugin kept must stay valid
// for the life of the process, and unloading a library that started threads
// or registered atexit handlers is undefined in practice.
#include "plugin_registry.hpp"

#include <cairn/plugin.h>
#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <utility>

#include "plugin_step.hpp"
#include "plugin_trust.hpp"
#include "step_context.hpp"

namespace cairn {
namespace {

namespace fs = std::filesystem;

std::string Text(const char* s) { return s == nullptr ? std::string() : std::string(s); }

std::string VersionText(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// Closes a library on every error path until the registry keeps it.
struct LibraryHandle {
  explicit LibraryHandle(void* opened) : handle(opened) {}
  LibraryHandle(const LibraryHandle&) = delete;
  LibraryHandle& operator=(const LibraryHandle&) = delete;
  ~LibraryHandle() {
    if (handle != nullptr) ::dlclose(handle);
  }
  void* Keep() { return std::exchange(handle, nullptr); }
  void* handle;
};

// Calls the plugin's entry point, which may log through the host table
// before it has a step context.
const cairn_plugin_descriptor* CallEntry(const std::string& subject, void* handle,
                                         const std::string& canonical) {
  ::dlerror();
  void* symbol = ::dlsym(handle, CAIRN_PLUGIN_ENTRY_SYMBOL);
  if (symbol == nullptr) {
    throw PluginError(subject + ": it does not export the entry point " +
                      CAIRN_PLUGIN_ENTRY_SYMBOL +
                      " (define it with CAIRN_PLUGIN from cairn/sdk.hpp, or with "
                      "CAIRN_PLUGIN_EXPORT from cairn/plugin.h)");
  }
  auto entry = reinterpret_cast<cairn_plugin_entry_fn>(symbol);
  const cairn_plugin_descriptor* descriptor = nullptr;
  plugins::SetLoadingFile(&canonical);
  try {
    descriptor = entry(&plugins::HostApi());
  } catch (...) {
    plugins::SetLoadingFile(nullptr);
    throw PluginError(subject + ": its entry point threw a C++ exception");
  }
  plugins::SetLoadingFile(nullptr);
  if (descriptor == nullptr) {
    throw PluginError(subject +
                      ": its entry point returned no descriptor (the plugin refused "
                      "to load; its log messages say why)");
  }
  return descriptor;
}

// The handshake: the same major ABI, a minor no newer than ours, and a
// descriptor at least as large as that ABI's.
void CheckDescriptor(const std::string& subject, const cairn_plugin_descriptor& d) {
  // The first three fields are the same in every ABI version.
  const std::string ours = VersionText(CAIRN_ABI_MAJOR, CAIRN_ABI_MINOR);
  const std::string theirs = VersionText(d.abi_major, d.abi_minor);
  if (d.abi_major != CAIRN_ABI_MAJOR) {
    throw PluginError(
        subject + ": built for plugin ABI " + theirs + ", but this cairn speaks ABI " + ours +
        "; rebuild the plugin against cairn's " + std::to_string(CAIRN_ABI_MAJOR) + ".x headers");
  }
  if (d.abi_minor > CAIRN_ABI_MINOR) {
    throw PluginError(subject + ": built for plugin ABI " + theirs +
                      ", newer than this cairn's ABI " + ours +
                      "; upgrade cairn or rebuild the plugin against these headers");
  }
  constexpr size_t kMinDescriptor =
      offsetof(cairn_plugin_descriptor, step_def_size) + sizeof(size_t);
  if (d.struct_size < kMinDescriptor) {
    throw PluginError(subject + ": its descriptor is " + std::to_string(d.struct_size) +
                      " bytes, smaller than the " + std::to_string(kMinDescriptor) +
                      " bytes of ABI " + theirs);
  }
  if (d.name == nullptr || *d.name == '\0') {
    throw PluginError(subject + ": its descriptor has no plugin name");
  }
  constexpr size_t kMinStepDef = offsetof(cairn_step_def, user_data) + sizeof(void*);
  if (d.step_count > 0 && (d.steps == nullptr || d.step_def_size < kMinStepDef)) {
    throw PluginError(subject + ": plugin '" + d.name + "' declares " +
                      std::to_string(d.step_count) + " steps but no valid step array");
  }
}

}  // namespace

struct PluginRegistry::Plugin {
  PluginInfo info;
  void* handle = nullptr;
};

PluginRegistry::PluginRegistry() = default;
PluginRegistry::~PluginRegistry() = default;

void PluginRegistry::Load(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      LoadDirectory(path);
    } else {
      LoadFile(path);
    }
  }
}

void PluginRegistry::LoadDirectory(const std::string& directory) {
  const std::string subject = "plugin directory " + directory;
  // The directory itself gets the strict rule, sticky or not: anyone who may
  // create entries in it could add a plugin (say, a hard link to some
  // root-owned library).
  const fs::path dir =
      plugins::ResolveTrusted(subject, directory, plugins::TrustedKind::kDirectory);

  std::vector<fs::path> files;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".so" && entry.is_regular_file(ec)) {
      files.push_back(entry.path());
    }
  }
  if (ec) throw PluginError(subject + ": cannot list it: " + ec.message());
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) LoadFile(file.string());
}

void PluginRegistry::LoadFile(const std::string& path) {
  const std::string subject = "plugin " + path;
  // Every check happens before dlopen, which runs the plugin's constructors.
  const std::string canonical =
      plugins::ResolveTrusted(subject, path, plugins::TrustedKind::kFile).string();
  for (const auto& loaded : plugins_) {
    if (loaded->info.file == canonical) return;
  }

  LibraryHandle library{::dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL)};
  if (library.handle == nullptr) {
    const char* error = ::dlerror();
    throw PluginError(subject + ": dlopen failed: " + (error ? error : "unknown error"));
  }
  const cairn_plugin_descriptor* d = CallEntry(subject, library.handle, canonical);
  CheckDescriptor(subject, *d);
  const std::string name = d->name;
  for (const auto& loaded : plugins_) {
    if (loaded->info.name == name) {
      throw PluginError(subject + ": plugin name '" + name + "' is already used by " +
                        loaded->info.file);
    }
  }

  auto plugin = std::make_shared<Plugin>();
  plugin->info.name = name;
  plugin->info.version = Text(d->version);
  plugin->info.file = canonical;
  plugin->info.abi_major = static_cast<int>(d->abi_major);
  plugin->info.abi_minor = static_cast<int>(d->abi_minor);
  std::map<std::string, std::shared_ptr<Step>> steps = StepsOf(subject, *d, plugin->info);

  // All checks passed: from here nothing throws, and the library stays open
  // for the life of the process.
  plugin->handle = library.Keep();
  steps_.merge(steps);
  plugins_.push_back(std::move(plugin));
  spdlog::debug("loaded plugin {} {} from {} ({} steps)", name, plugins_.back()->info.version,
                canonical, plugins_.back()->info.steps.size());
}

std::map<std::string, std::shared_ptr<Step>> PluginRegistry::StepsOf(
    const std::string& subject, const cairn_plugin_descriptor& d, PluginInfo& info) const {
  std::map<std::string, std::shared_ptr<Step>> steps;
  const auto* base = reinterpret_cast<const unsigned char*>(d.steps);
  for (size_t i = 0; i < d.step_count; ++i) {
    const auto* def = reinterpret_cast<const cairn_step_def*>(base + i * d.step_def_size);
    if (def->name == nullptr || *def->name == '\0' || def->invoke == nullptr) {
      throw PluginError(subject + ": step #" + std::to_string(i) + " of plugin '" + info.name +
                        "' has no name or no function");
    }
    const std::string step_name = def->name;
    if (steps.count(step_name) > 0) {
      throw PluginError(subject + ": plugin '" + info.name + "' registers step '" + step_name +
                        "' twice");
    }
    if (auto existing = steps_.find(step_name); existing != steps_.end()) {
      std::string other_file;
      for (const auto& loaded : plugins_) {
        if (loaded->info.name == existing->second->plugin()) other_file = loaded->info.file;
      }
      throw PluginError(subject + ": step '" + step_name + "' of plugin '" + info.name + "' (" +
                        info.file + ") is already registered by plugin '" +
                        existing->second->plugin() + "' (" + other_file + ")");
    }
    steps.emplace(step_name,
                  plugins::MakePluginStep(step_name, info.name, def->invoke, def->user_data));
    info.steps.push_back(step_name);
  }
  return steps;
}

std::shared_ptr<Step> PluginRegistry::Find(const std::string& step_name) const {
  auto it = steps_.find(step_name);
  return it == steps_.end() ? nullptr : it->second;
}

std::vector<PluginInfo> PluginRegistry::List() const {
  std::vector<PluginInfo> out;
  out.reserve(plugins_.size());
  for (const auto& plugin : plugins_) out.push_back(plugin->info);
  return out;
}

std::vector<std::string> PluginRegistry::StepNames() const {
  std::vector<std::string> names;
  names.reserve(steps_.size());
  for (const auto& [name, step] : steps_) names.push_back(name);
  return names;
}

}  // namespace cairn
