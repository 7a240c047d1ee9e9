// See plugin_trust.hpp.
#include "plugin_trust.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

#include "plugin_registry.hpp"

namespace cairn::plugins {
namespace {

namespace fs = std::filesystem;

std::string ModeText(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Checks owner and write permission of one path component, already
// lstat'ed into st.
void CheckComponent(const std::string& subject, const fs::path& path, const struct stat& st,
                    bool sticky_ok) {
  const uid_t euid = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != euid) {
    throw PluginError(subject + ": " + path.string() + " is owned by uid " +
                      std::to_string(st.st_uid) + ", not by root or by cairn's user (uid " +
                      std::to_string(euid) +
                      "); plugins load only from paths that nobody else controls");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    if (sticky_ok && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) != 0) return;
    const char* who = (st.st_mode & S_IWOTH) != 0 ? "others" : "its group";
    throw PluginError(subject + ": " + std::string(S_ISDIR(st.st_mode) ? "directory " : "file ") +
                      path.string() + " is writable by " + who + " (mode " + ModeText(st.st_mode) +
                      "); plugins load only from paths that nobody but " +
                      "root or cairn's user can write (" +
                      ((st.st_mode & S_ISVTX) != 0 ? std::string("use a directory of cairn's own")
                                                   : "chmod go-w " + path.string()) +
                      ")");
  }
}

}  // namespace

fs::path ResolveTrusted(const std::string& subject, const std::string& path, TrustedKind kind) {
  if (path.empty()) throw PluginError(subject + ": empty path");
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  if (ec) throw PluginError(subject + ": cannot make the path absolute: " + ec.message());

  // Components still to walk, the next one at the back.
  std::vector<std::string> pending;
  auto push_components = [&pending](const fs::path& p) {
    std::vector<std::string> parts;
    for (const fs::path& part : p.relative_path()) {
      if (!part.empty()) parts.push_back(part.string());
    }
    pending.insert(pending.end(), parts.rbegin(), parts.rend());
  };
  push_components(absolute);

  fs::path current = "/";
  struct stat st {};
  if (::lstat("/", &st) != 0) throw PluginError(subject + ": cannot stat /");
  if (pending.empty()) {
    throw PluginError(subject + ": / is not a plugin " +
                      (kind == TrustedKind::kFile ? "file" : "directory"));
  }
  CheckComponent(subject, current, st, /*sticky_ok=*/true);

  int symlinks = 0;
  while (!pending.empty()) {
    const std::string part = pending.back();
    pending.pop_back();
    if (part == ".") continue;
    if (part == "..") {
      current = current.parent_path();  // current is resolved: its parent is real
      continue;
    }
    const fs::path next = current / part;
    if (::lstat(next.c_str(), &st) != 0) {
      const int err = errno;
      throw PluginError(
          subject + ": " + (err == ENOENT ? "no such file or directory: " : "cannot stat ") +
          next.string() + (err == ENOENT ? "" : std::string(": ") + std::strerror(err)));
    }
    if (S_ISLNK(st.st_mode)) {
      if (++symlinks > 40) throw PluginError(subject + ": too many levels of symbolic links");
      std::vector<char> buf(PATH_MAX + 1);
      const ssize_t n = ::readlink(next.c_str(), buf.data(), buf.size() - 1);
      if (n < 0) throw PluginError(subject + ": cannot read symlink " + next.string());
      const fs::path target(std::string(buf.data(), static_cast<size_t>(n)));
      if (target.is_absolute()) current = "/";
      push_components(target);
      continue;
    }
    const bool last = pending.empty();
    if (!last || kind == TrustedKind::kDirectory) {
      if (!S_ISDIR(st.st_mode))
        throw PluginError(subject + ": " + next.string() + " is not a directory");
    } else if (!S_ISREG(st.st_mode)) {
      throw PluginError(subject + ": " + next.string() + " is not a regular file");
    }
    CheckComponent(subject, next, st, /*sticky_ok=*/!last);
    current = next;
  }
  if (current == "/") {
    throw PluginError(subject + ": / is not a plugin " +
                      (kind == TrustedKind::kFile ? "file" : "directory"));
  }
  return current;
}

}  // namespace cairn::plugins
