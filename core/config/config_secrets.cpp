// Secrets of the daemon configuration: reading a secret file (the database
// URL's url_file or systemd credential) with its permission checks,
// resolving the database URL once every layer is read, and redacting
// passwords out of URLs for logs.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "config.hpp"
#include "config_keys.hpp"

namespace cairn {

namespace fs = std::filesystem;

namespace config {

std::string ModeText(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

std::string OthersMayText(mode_t mode) {
  const bool read = (mode & S_IROTH) != 0;
  const bool write = (mode & S_IWOTH) != 0;
  return std::string(read && write ? "readable and writable"
                     : read        ? "readable"
                                   : "writable") +
         " by others";
}

void ResolveDatabaseUrl(DaemonConfig& c) {
  const DatabaseUrlSource& source = c.database.url_source;
  auto fail = [&](const std::string& path, const std::string& problem) {
    throw ConfigError(source.layer, source.line, path, problem);
  };
  try {
    switch (source.kind) {
      case DatabaseUrlSource::kNone:
        return;
      case DatabaseUrlSource::kUrl:
        c.database.url = source.value;
        c.database.url_origin = source.origin;
        return;
      case DatabaseUrlSource::kFile:
        c.database.url = ReadSecretFile(source.value, "database URL file");
        c.database.url_origin = "file " + source.value;
        return;
      case DatabaseUrlSource::kCredential: {
        const char* dir = std::getenv("CREDENTIALS_DIRECTORY");
        if (dir == nullptr || *dir == '\0') {
          fail("database.url_credential",
               "credential \"" + source.value +
                   "\" requested but $CREDENTIALS_DIRECTORY is not set (run under systemd with "
                   "LoadCredential=" +
                   source.value + ":/path/to/secret, or set CAIRN_DATABASE_URL)");
        }
        c.database.url =
            ReadSecretFile(fs::path(dir) / source.value, "systemd credential " + source.value);
        c.database.url_origin = "systemd credential " + source.value;
        return;
      }
    }
  } catch (const ConfigError& e) {
    if (e.source() == source.layer) throw;
    fail(source.kind == DatabaseUrlSource::kFile ? "database.url_file" : "database.url_credential",
         e.what());
  }
}

}  // namespace config

std::string ReadSecretFile(const fs::path& file, const std::string& what) {
  constexpr std::size_t kMaxSecret = 64 * 1024;
  // O_NONBLOCK: opening a FIFO must not hang; a regular file ignores it.
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    throw ConfigError(
        file.string(), 0, "",
        what + ": " +
            (errno == ENOENT ? std::string("no such file")
                             : "cannot open for reading: " + std::string(std::strerror(errno))));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // The mode of the file that is read, not of whatever the path names later.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    throw ConfigError(file.string(), 0, "", what + ": not a regular file");
  }
  if ((st.st_mode & (S_IROTH | S_IWOTH)) != 0) {
    throw ConfigError(
        file.string(), 0, "",
        what + ": " + config::OthersMayText(st.st_mode) + " (mode " + config::ModeText(st.st_mode) +
            "); a secret must be for its owner and group alone: chmod o-rw " + file.string());
  }
  std::string secret(kMaxSecret + 1, '\0');
  std::size_t filled = 0;
  while (filled < secret.size()) {
    const ssize_t n = ::read(fd, secret.data() + filled, secret.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ConfigError(file.string(), 0, "", what + ": read error");
    if (n == 0) break;
    filled += static_cast<std::size_t>(n);
  }
  secret.resize(filled);
  if (secret.size() > kMaxSecret) {
    throw ConfigError(file.string(), 0, "", what + ": larger than 64 KiB");
  }
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) throw ConfigError(file.string(), 0, "", what + ": file is empty");
  return secret;
}

namespace {

// Where the passwords of a connection string are, as (offset, length) pairs
// in increasing order: a URI's user:password@ and every password=... (a
// query parameter or a key=value pair, possibly quoted).
std::vector<std::pair<std::size_t, std::size_t>> PasswordSpans(std::string_view url) {
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  if (const std::size_t scheme = url.find("://"); scheme != std::string_view::npos) {
    const std::size_t authority = scheme + 3;
    const std::size_t end = url.find_first_of("/?#", authority);
    const std::size_t at = url.rfind('@', end == std::string_view::npos ? url.size() : end);
    if (at != std::string_view::npos && at > authority) {
      const std::size_t colon = url.find(':', authority);
      if (colon != std::string_view::npos && colon < at) {
        spans.emplace_back(colon + 1, at - colon - 1);
      }
    }
  }
  std::size_t pos = 0;
  while ((pos = url.find("password", pos)) != std::string_view::npos) {
    std::size_t eq = pos + 8;
    while (eq < url.size() && url[eq] == ' ') ++eq;
    const bool at_key =
        pos == 0 || url[pos - 1] == '?' || url[pos - 1] == '&' || url[pos - 1] == ' ';
    if (!at_key || eq >= url.size() || url[eq] != '=') {
      pos += 8;
      continue;
    }
    std::size_t start = eq + 1;
    while (start < url.size() && url[start] == ' ') ++start;
    std::size_t stop = start;
    if (stop < url.size() && url[stop] == '\'') {
      ++stop;
      while (stop < url.size() && url[stop] != '\'') stop += url[stop] == '\\' ? 2 : 1;
      stop = std::min(stop + 1, url.size());
    } else {
      while (stop < url.size() && url[stop] != '&' && url[stop] != ' ') ++stop;
    }
    spans.emplace_back(start, stop - start);
    pos = stop;
  }
  return spans;
}

}  // namespace

std::string RedactDatabaseUrl(std::string_view url) {
  std::string out;
  std::size_t copied = 0;
  for (const auto& [start, length] : PasswordSpans(url)) {
    if (start < copied) continue;
    out.append(url.substr(copied, start - copied));
    out += "****";
    copied = start + length;
  }
  out.append(url.substr(std::min(copied, url.size())));
  return out;
}

bool DatabaseUrlHasPassword(std::string_view url) {
  for (const auto& [start, length] : PasswordSpans(url)) {
    if (length > 0) return true;
  }
  return false;
}

}  // namespace cairn
