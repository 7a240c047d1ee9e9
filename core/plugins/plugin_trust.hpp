// The trust checks a plugin path passes before dlopen runs any of its code:
// the file, or the plugin directory, and every directory on the way to it
// (symlinks followed as the kernel would) must be owned by root or by
// cairn's own user and writable by nobody else. Pure checks on the file
// system, safe from any thread.
#pragma once

#include <filesystem>
#include <string>

namespace cairn::plugins {

enum class TrustedKind { kFile, kDirectory };

// Resolves `path` component by component and checks every directory it
// passes through (including those a symlink leads through) before looking
// inside it, so no symlink read on the way lives in a directory others can
// write. An ancestor directory with the sticky bit set (such as /tmp) may be
// writable by others: nobody but an entry's owner may rename or delete the
// entry, so the entries below it on our path, already restricted to root or
// euid, cannot be swapped. The final component gets the strict rule: no
// sticky exception. Returns the canonical path, which is what gets listed or
// dlopen'ed: a symlink swapped after the check changes nothing. Throws
// PluginError naming `subject` and the offending component.
std::filesystem::path ResolveTrusted(const std::string& subject, const std::string& path,
                                     TrustedKind kind);

}  // namespace cairn::plugins
