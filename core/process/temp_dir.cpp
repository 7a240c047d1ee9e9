#include "temp_dir.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "errors.hpp"

namespace cairn::process {

namespace fs = std::filesystem;

TempDir::TempDir(const std::string& prefix, fs::perms mode) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw Error(ErrorKind::kPermanent,
                "cannot create a folder like " + pattern + ": " + std::strerror(errno));
  }
  path_ = pattern;
  fs::permissions(path_, mode);
}

TempDir::~TempDir() {
  std::error_code ignored;
  // A test may have taken its own rights away to see a refusal.
  fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ignored);
  fs::remove_all(path_, ignored);
}

fs::path TempDir::Write(const std::string& name, const std::string& text) const {
  return WriteFile(name, text, false);
}

fs::path TempDir::WritePrivate(const std::string& name, const std::string& text) const {
  return WriteFile(name, text, true);
}

// A private file is never readable by others, not even between its
// creation and a chmod.
fs::path TempDir::WriteFile(const std::string& name, const std::string& text,
                            bool owner_only) const {
  fs::path file = path_ / name;
  std::error_code ignored;
  fs::create_directories(file.parent_path(), ignored);
  const auto fail = [&] {
    return Error(ErrorKind::kPermanent,
                 "cannot write " + file.string() + ": " + std::strerror(errno));
  };
  // 0666 less the umask, as any new file; a private one also when it existed.
  const int fd =
      ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, owner_only ? 0600 : 0666);
  if (fd < 0) throw fail();
  if (owner_only && ::fchmod(fd, 0600) != 0) {
    const Error error = fail();
    ::close(fd);
    throw error;
  }
  for (size_t written = 0; written < text.size();) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const Error error = fail();
      ::close(fd);
      throw error;
    }
    written += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) throw fail();
  return file;
}

}  // namespace cairn::process
