// A scratch folder for the files a benchmark or a test hands to the
// processes it starts (configs, workflows, logs), removed with everything in
// it when the object goes.
#pragma once

#include <filesystem>
#include <string>

namespace cairn::process {

class TempDir {
 public:
  // A new folder "<prefix>-XXXXXX" under $TMPDIR (or /tmp), with `mode`:
  // owner only unless the caller needs others to traverse it.
  explicit TempDir(const std::string& prefix = "cairn",
                   std::filesystem::perms mode = std::filesystem::perms::owner_all);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes a file below the folder, creating the folders of `name`, and
  // returns its path. Throws when it cannot.
  std::filesystem::path Write(const std::string& name, const std::string& text) const;
  // The same, readable and writable by this user only: for files that carry
  // a database URL, which may hold a password.
  std::filesystem::path WritePrivate(const std::string& name, const std::string& text) const;

 private:
  std::filesystem::path WriteFile(const std::string& name, const std::string& text,
                                  bool owner_only) const;

  std::filesystem::path path_;
};

}  // namespace cairn::process
