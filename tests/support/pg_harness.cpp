// The harness's own PostgreSQL server: found, initialised (from a per-build
// template data folder when possible), started on a free 127.0.0.1 port,
// stopped and deleted. Process state lives in one leaked, mutex-guarded
// struct so exit handlers and the signal thread never see a destroyed object.
#include "pg_harness.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "child_process.hpp"

#ifndef CAIRN_PG_TEMPLATE_ROOT
#define CAIRN_PG_TEMPLATE_ROOT ""
#endif

namespace cairn::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kPortAttempts = 3;
constexpr auto kStartTimeout = std::chrono::seconds(60);
constexpr auto kStopTimeout = std::chrono::seconds(15);
// Bump when the initdb options change so stale templates are not reused.
constexpr const char* kTemplateFormat = "v2";

// The watchdog outlives a test binary that dies without cleaning up (SIGKILL,
// abort, segfault): it reads postmaster pids from a pipe whose write end only
// the test process holds, and at EOF stops the last pid (unless it is 0, the
// "already stopped" mark) and deletes the folder. $1 is the data folder, $2
// the harness's temporary folder.
constexpr const char* kWatchdogScript = R"sh(
trap '' INT TERM HUP QUIT
pid=
while IFS= read -r line; do pid=$line; done
if [ -z "$pid" ] && [ -f "$1/postmaster.pid" ]; then pid=$(head -n 1 "$1/postmaster.pid"); fi
case "$pid" in ''|*[!0-9]*) pid=0 ;; esac
if [ "$pid" -gt 1 ] && [ "$(cat /proc/$pid/comm 2>/dev/null)" = postgres ]; then
  kill -QUIT "$pid" 2>/dev/null
  i=0
  while [ -f "$1/postmaster.pid" ] && kill -0 "$pid" 2>/dev/null && [ $i -lt 150 ]; do
    sleep 0.1; i=$((i + 1))
  done
  kill -KILL "$pid" 2>/dev/null
fi
# A postmaster killed outright leaves its small System V segment behind; the
# shmid is the second field of line 7 of its lock file.
if [ -f "$1/postmaster.pid" ]; then
  shmid=$(sed -n 7p "$1/postmaster.pid" | awk '{print $2}')
  case "$shmid" in ''|*[!0-9]*) ;; *) ipcrm -m "$shmid" 2>/dev/null ;; esac
fi
rm -rf "$2"
)sh";

// Who the server processes run as: the current user, or the postgres system
// account when we are root (initdb and postgres refuse to run as root).
struct ServerUser {
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

struct ServerState {
  pid_t owner_pid = 0;  // the process that started the server
  std::string dir;      // the mkdtemp folder holding everything below
  std::string data_dir;
  std::string socket_dir;
  std::string log_path;
  std::string bindir;
  ServerUser user;
  int port = 0;
  pid_t postmaster = 0;
  int watchdog_fd = -1;
  bool stopped = false;
};

// Leaked on purpose: exit handlers and the signal thread may run after static
// destructors would have started.
std::mutex& StateMutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
ServerState& State() {
  static auto* state = new ServerState;
  return *state;
}
std::mutex& StartMutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}

std::string ErrnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

bool IsExecutable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

bool HasServerBinaries(const std::string& dir) {
  return !dir.empty() && IsExecutable(dir + "/initdb") && IsExecutable(dir + "/postgres");
}

std::string ReadCommandOutput(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
  ::pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// The server binaries: $CAIRN_PG_BINDIR, pg_config --bindir, Debian's
// PostgreSQL 15 folder, the newest /usr/lib/postgresql/*/bin, then $PATH.
std::string FindBinDir() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("CAIRN_PG_BINDIR")) candidates.push_back(env);
  candidates.push_back(ReadCommandOutput("pg_config --bindir 2>/dev/null"));
  candidates.push_back("/usr/lib/postgresql/15/bin");
  glob_t found{};
  if (::glob("/usr/lib/postgresql/*/bin", 0, nullptr, &found) == 0) {
    std::vector<std::pair<int, std::string>> versions;
    for (size_t i = 0; i < found.gl_pathc; ++i) {
      std::string path = found.gl_pathv[i];
      std::string version = fs::path(path).parent_path().filename().string();
      versions.emplace_back(std::atoi(version.c_str()), path);
    }
    std::sort(versions.rbegin(), versions.rend());
    for (auto& [version, path] : versions) candidates.push_back(path);
  }
  ::globfree(&found);
  if (const char* path = std::getenv("PATH")) {
    std::stringstream parts(path);
    for (std::string dir; std::getline(parts, dir, ':');) candidates.push_back(dir);
  }
  for (const auto& dir : candidates) {
    if (HasServerBinaries(dir)) return dir;
  }
  throw std::runtime_error(
      "cannot find PostgreSQL server binaries (initdb, postgres): install postgresql-15 "
      "(scripts/install-deps.sh), set CAIRN_PG_BINDIR, or set CAIRN_TEST_DATABASE_URL");
}

ServerUser FindServerUser() {
  ServerUser user;
  user.uid = ::geteuid();
  user.gid = ::getegid();
  if (user.uid != 0) return user;
  const passwd* pw = ::getpwnam("postgres");
  if (pw == nullptr) {
    throw std::runtime_error(
        "running as root, but there is no 'postgres' system account to run the test server "
        "as (initdb refuses root): install postgresql-15 or set CAIRN_TEST_DATABASE_URL");
  }
  user.switch_user = true;
  user.uid = pw->pw_uid;
  user.gid = pw->pw_gid;
  return user;
}

void ChownToServerUser(const std::string& path, const ServerUser& user) {
  if (user.switch_user && ::chown(path.c_str(), user.uid, user.gid) != 0) {
    throw std::runtime_error(ErrnoText("chown " + path));
  }
}

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is the executable's path
  std::string output_path;        // stdout and stderr, appended; "" for /dev/null
  std::string cwd;
  const ServerUser* user = nullptr;  // switch to this user when set and needed
  bool new_session = false;          // not in our process group: no terminal ^C
  bool detach = false;               // double fork: not our child, not our descendant
  int stdin_fd = -1;                 // -1 for /dev/null
};

[[noreturn]] void ChildFail(const char* what) {
  // Only async-signal-safe calls between fork and exec.
  const char* reason = std::strerror(errno);
  (void)!::write(2, "cairn test harness: ", 20);
  (void)!::write(2, what, std::strlen(what));
  (void)!::write(2, ": ", 2);
  (void)!::write(2, reason, std::strlen(reason));
  (void)!::write(2, "\n", 1);
  ::_exit(127);
}

void ExecChild(const SpawnSpec& spec, char* const* argv) {
  if (spec.stdin_fd >= 0) {
    if (::dup2(spec.stdin_fd, 0) < 0) ChildFail("dup2 stdin");
  } else {
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd < 0 || ::dup2(null_fd, 0) < 0) ChildFail("open /dev/null");
  }
  const char* out = spec.output_path.empty() ? "/dev/null" : spec.output_path.c_str();
  int out_fd = ::open(out, O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (out_fd < 0) ChildFail(out);
  if (::dup2(out_fd, 1) < 0 || ::dup2(out_fd, 2) < 0) ChildFail("dup2 output");
  // Descriptors of the test (sockets, pipes read by a test) must not leak into
  // a server that outlives them.
  if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
    for (int fd = 3; fd < 65536; ++fd) ::close(fd);
  }
  if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) ChildFail("chdir");
  if (spec.new_session) ::setsid();
  RestoreChildSignalMask();
  if (spec.user != nullptr && spec.user->switch_user) {
    gid_t gid = spec.user->gid;
    if (::setgroups(1, &gid) != 0 || ::setgid(gid) != 0 || ::setuid(spec.user->uid) != 0) {
      ChildFail("switch to the postgres user");
    }
  }
  ::execv(argv[0], argv);
  ChildFail(argv[0]);
}

// Starts spec.argv; returns the child's pid (0 for a detached process).
pid_t Spawn(const SpawnSpec& spec) {
  std::vector<char*> argv;
  for (const auto& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(ErrnoText("fork"));
  if (pid == 0) {
    if (spec.detach) {
      pid_t grandchild = ::fork();
      if (grandchild != 0) ::_exit(grandchild < 0 ? 127 : 0);
    }
    ExecChild(spec, argv.data());
  }
  if (spec.detach) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return 0;
  }
  return pid;
}

// Runs a command to completion; throws with its output when it fails.
void Run(SpawnSpec spec, const std::string& what) {
  pid_t pid = Spawn(spec);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(ErrnoText("waitpid " + what));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error(
        what + " failed (status " + std::to_string(status) + ")" +
        (spec.output_path.empty() ? std::string() : ":\n" + process::ReadFile(spec.output_path)));
  }
}

std::string LocalConninfo(int port) {
  return "host=127.0.0.1 port=" + std::to_string(port) +
         " user=postgres dbname=postgres connect_timeout=2";
}

// Waits for a child to exit; SIGKILLs it after the timeout. Returns false if
// it was not our child any more (someone else reaped it).
bool WaitForExit(pid_t pid, Clock::duration timeout) {
  auto deadline = Clock::now() + timeout;
  int status = 0;
  for (;;) {
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return true;
    if (done < 0 && errno != EINTR) return false;
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void TellWatchdog(const ServerState& state, pid_t pid) {
  if (state.watchdog_fd < 0) return;
  std::string line = std::to_string(pid) + "\n";
  (void)!::write(state.watchdog_fd, line.data(), line.size());
}

void StartWatchdog(ServerState& state) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(ErrnoText("pipe2"));
  SpawnSpec spec;
  spec.argv = {"/bin/sh", "-c", kWatchdogScript, "cairn-pg-watchdog", state.data_dir, state.dir};
  spec.cwd = "/";
  spec.new_session = true;
  spec.detach = true;
  spec.stdin_fd = fds[0];
  try {
    Spawn(spec);
  } catch (...) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw;
  }
  ::close(fds[0]);
  state.watchdog_fd = fds[1];
}

// Starts the postmaster as our child (in its own session) and waits until it
// accepts connections. Returns false only when it lost a race for the port
// (worth retrying); otherwise *failure is empty on success.
bool StartPostmaster(ServerState& state, std::string* failure) {
  SpawnSpec spec;
  spec.argv = {state.bindir + "/postgres", "-D", state.data_dir, "-p", std::to_string(state.port),
               "-h", "127.0.0.1", "-k", state.socket_dir,
               // A throwaway cluster: durability is not what is under test here.
               "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=on",
               // Daemon tests open a connection per executor slot, per worker.
               "-c", "max_connections=200",
               // Keep dynamic shared memory inside the data folder, so nothing
               // is left in /dev/shm and Docker's small /dev/shm is no limit.
               "-c", "dynamic_shared_memory_type=mmap", "-c", "log_min_messages=warning"};
  spec.output_path = state.log_path;
  spec.cwd = state.dir;
  spec.user = &state.user;
  spec.new_session = true;
  pid_t pid = 0;
  {
    // Recorded under the lock at once, so a concurrent StopServer (the signal
    // thread) always knows what to stop.
    std::lock_guard lock(StateMutex());
    if (state.stopped) {
      *failure = "the harness is shutting down";
      return true;
    }
    pid = state.postmaster = Spawn(spec);
    TellWatchdog(state, pid);
  }
  const std::string conninfo = LocalConninfo(state.port);
  auto deadline = Clock::now() + kStartTimeout;
  for (;;) {
    int status = 0;
    pid_t exited = ::waitpid(pid, &status, WNOHANG);
    if (exited == pid || (exited < 0 && errno == ECHILD)) {
      std::lock_guard lock(StateMutex());
      if (state.postmaster == pid) state.postmaster = 0;
      std::string log = process::ReadFile(state.log_path);
      *failure = "postgres exited during start-up (status " + std::to_string(status) +
                 "); server log " + state.log_path + ":\n" + log;
      return log.find("Address already in use") == std::string::npos &&
             log.find("could not bind") == std::string::npos;
    }
    if (::PQping(conninfo.c_str()) == PQPING_OK) return true;
    if (Clock::now() > deadline) {
      *failure = "postgres did not accept connections within " +
                 std::to_string(kStartTimeout.count()) + "s; server log " + state.log_path + ":\n" +
                 process::ReadFile(state.log_path);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
}

void StopPostmasterLocked(ServerState& state) {
  if (state.postmaster <= 0) return;
  // Immediate shutdown: the data is thrown away, so skip the checkpoint.
  ::kill(state.postmaster, SIGQUIT);
  if (!WaitForExit(state.postmaster, kStopTimeout)) {
    // Reaped elsewhere: make sure it is gone anyway.
    ::kill(state.postmaster, SIGKILL);
  }
  state.postmaster = 0;
}

std::string ServerMajorVersion(const std::string& bindir) {
  // "postgres (PostgreSQL) 15.10 (Debian 15.10-0+deb12u1)" -> "15"
  std::string text = ReadCommandOutput("'" + bindir + "/postgres' --version 2>/dev/null");
  auto paren = text.find(") ");
  if (paren == std::string::npos) return "";
  std::string version = text.substr(paren + 2);
  auto end = version.find_first_not_of("0123456789");
  return version.substr(0, end);
}

// A per-build cache of a freshly initdb'ed cluster: copying it is several
// times faster than initdb, and gtest_discover_tests runs one process (so one
// server) per test. Any failure here just falls back to initdb.
std::string TemplatePath(const ServerState& state) {
  std::string root = CAIRN_PG_TEMPLATE_ROOT;
  if (const char* env = std::getenv("CAIRN_TEST_PG_TEMPLATE_ROOT")) root = env;
  if (root.empty()) return "";
  std::string major = ServerMajorVersion(state.bindir);
  if (major.empty()) return "";
  return root + "/pg" + major + "-uid" + std::to_string(::geteuid()) + "-" + kTemplateFormat;
}

void InitDataDir(ServerState& state) {
  const std::string template_path = TemplatePath(state);
  std::error_code missing;
  if (!template_path.empty() && fs::exists(template_path + "/global/pg_control", missing) &&
      fs::exists(template_path + "/postgresql.conf", missing)) {
    SpawnSpec copy;
    copy.argv = {"/bin/cp", "-a", template_path, state.data_dir};
    copy.output_path = state.dir + "/copy.log";
    try {
      Run(copy, "copying the template cluster");
      return;
    } catch (const std::exception&) {
      std::error_code ignored;
      fs::remove_all(state.data_dir, ignored);
    }
  }
  SpawnSpec initdb;
  // 1 MB WAL segments instead of 16: the cluster is a third smaller to copy.
  initdb.argv = {state.bindir + "/initdb",
                 "-D",
                 state.data_dir,
                 "--auth=trust",
                 "-U",
                 "postgres",
                 "--no-sync",
                 "-E",
                 "UTF8",
                 "--locale=C",
                 "--wal-segsize=1"};
  initdb.output_path = state.dir + "/initdb.log";
  initdb.cwd = state.dir;
  initdb.user = &state.user;
  Run(initdb, "initdb");
  if (template_path.empty()) return;
  // Publish the template atomically: copy to a staging name, then rename.
  std::error_code error;
  fs::create_directories(fs::path(template_path).parent_path(), error);
  if (error) return;
  std::string staging = template_path + ".staging-" + std::to_string(::getpid());
  SpawnSpec copy;
  copy.argv = {"/bin/cp", "-a", state.data_dir, staging};
  try {
    Run(copy, "saving the template cluster");
    if (::rename(staging.c_str(), template_path.c_str()) == 0) return;
  } catch (const std::exception&) {
  }
  fs::remove_all(staging, error);  // another process published first, or no space
}

std::string StartOwnedServer() {
  ServerState& state = State();
  std::string bindir = FindBinDir();
  ServerUser user = FindServerUser();
  // Root's server runs as postgres, which must traverse every parent: /tmp
  // is world-traversable, an arbitrary $TMPDIR may not be.
  std::string base = "/tmp";
  if (const char* tmp = std::getenv("TMPDIR");
      tmp != nullptr && *tmp != '\0' && !user.switch_user) {
    base = tmp;
  }
  std::string pattern = base + "/cairn-pg-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr)
    throw std::runtime_error(ErrnoText("mkdtemp " + pattern));
  {
    std::lock_guard lock(StateMutex());
    state.owner_pid = ::getpid();
    state.dir = buffer.data();
    state.data_dir = state.dir + "/data";
    state.socket_dir = state.dir + "/socket";
    state.log_path = state.dir + "/server.log";
    state.bindir = bindir;
    state.user = user;
  }
  static std::once_flag exit_hook;
  std::call_once(exit_hook, [] { std::atexit([] { internal::StopServer(); }); });
  try {
    ChownToServerUser(state.dir, user);
    StartWatchdog(state);
    if (::mkdir(state.socket_dir.c_str(), 0700) != 0) {
      throw std::runtime_error(ErrnoText("mkdir " + state.socket_dir));
    }
    ChownToServerUser(state.socket_dir, user);
    InitDataDir(state);
    std::string failure;
    for (int attempt = 0; attempt < kPortAttempts; ++attempt) {
      state.port = FindFreePort();
      failure.clear();
      if (StartPostmaster(state, &failure)) break;
    }
    if (!failure.empty()) throw std::runtime_error(failure);
  } catch (const std::exception& e) {
    std::string message = std::string("cannot start the test PostgreSQL server: ") + e.what();
    internal::StopServer();
    throw std::runtime_error(message);
  }
  return "postgresql://postgres@127.0.0.1:" + std::to_string(state.port) + "/postgres";
}

std::mutex& UrlMutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::optional<std::string>& Url() {
  static auto* url = new std::optional<std::string>;
  return *url;
}
std::string& UrlError() {
  static auto* error = new std::string;
  return *error;
}

struct PgConnCloser {
  void operator()(PGconn* conn) const { ::PQfinish(conn); }
};
struct PgResultCloser {
  void operator()(PGresult* result) const { ::PQclear(result); }
};

void IgnoreNotice(void*, const char*) {}

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

int FindFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(ErrnoText("socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::string error = ErrnoText("bind 127.0.0.1:0");
    ::close(fd);
    throw std::runtime_error(error);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

const std::string& DatabaseUrl() {
  std::lock_guard lock(UrlMutex());
  auto& url = Url();
  if (url) return *url;
  if (!UrlError().empty()) throw std::runtime_error(UrlError());
  if (const char* env = std::getenv("CAIRN_TEST_DATABASE_URL"); env != nullptr && *env != '\0') {
    url = env;
    return *url;
  }
  try {
    std::lock_guard start(StartMutex());
    url = StartOwnedServer();
  } catch (const std::exception& e) {
    // Remembered so later tests fail at once instead of each retrying a
    // minute-long start.
    UrlError() = e.what();
    throw;
  }
  return *url;
}

bool HarnessOwnsServer() {
  const char* env = std::getenv("CAIRN_TEST_DATABASE_URL");
  return env == nullptr || *env == '\0';
}

std::string UniqueSchemaName(std::string_view prefix) {
  static std::atomic<unsigned> counter{0};
  static const unsigned salt = std::random_device{}();
  if (prefix.empty() ||
      !(std::isalpha(static_cast<unsigned char>(prefix[0])) || prefix[0] == '_')) {
    throw std::invalid_argument("UniqueSchemaName: prefix \"" + std::string(prefix) +
                                "\" must start with a letter or underscore");
  }
  std::string lowered;
  for (char c : prefix) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') {
      throw std::invalid_argument("UniqueSchemaName: prefix \"" + std::string(prefix) +
                                  "\" may hold only letters, digits and underscores");
    }
    lowered += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  // A fresh random part per call too, so names stay unique across processes
  // whose pids were reused against an external server.
  thread_local std::mt19937 random(
      salt ^ static_cast<unsigned>(::getpid()) ^
      static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id())));
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, "_%d_%u_%06x", static_cast<int>(::getpid()),
                counter.fetch_add(1) + 1, static_cast<unsigned>(random() & 0xffffff));
  size_t room = 63 - std::strlen(suffix);
  if (lowered.size() > room) lowered.resize(room);
  return lowered + suffix;
}

std::string RunPsqlAt(const std::string& url, const std::string& sql) {
  const char* keys[] = {"dbname", "connect_timeout", "application_name", nullptr};
  const char* values[] = {url.c_str(), "10", "cairn-test-harness", nullptr};
  std::unique_ptr<PGconn, PgConnCloser> conn(::PQconnectdbParams(keys, values, 1));
  if (conn == nullptr || ::PQstatus(conn.get()) != CONNECTION_OK) {
    throw std::runtime_error("cannot connect to " + url + ": " +
                             Trimmed(conn ? ::PQerrorMessage(conn.get()) : "out of memory"));
  }
  ::PQsetNoticeProcessor(conn.get(), IgnoreNotice, nullptr);
  std::unique_ptr<PGresult, PgResultCloser> result(::PQexec(conn.get(), sql.c_str()));
  ExecStatusType status = result ? ::PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    throw std::runtime_error(
        "SQL failed: " +
        Trimmed(result ? ::PQresultErrorMessage(result.get()) : ::PQerrorMessage(conn.get())) +
        "\n  in: " + sql);
  }
  if (status != PGRES_TUPLES_OK || ::PQntuples(result.get()) == 0 ||
      ::PQnfields(result.get()) == 0 || ::PQgetisnull(result.get(), 0, 0)) {
    return "";
  }
  return ::PQgetvalue(result.get(), 0, 0);
}

std::string RunPsql(const std::string& sql) { return RunPsqlAt(DatabaseUrl(), sql); }

void RestartServer() {
  if (!HarnessOwnsServer()) {
    throw std::logic_error("RestartServer: the server is external (CAIRN_TEST_DATABASE_URL)");
  }
  DatabaseUrl();  // started, or throws
  std::lock_guard start(StartMutex());
  ServerState& state = State();
  {
    std::lock_guard lock(StateMutex());
    if (state.stopped) throw std::logic_error("RestartServer: the server was stopped");
    StopPostmasterLocked(state);
  }
  // The port was ours a moment ago; retry briefly in case the kernel is slow
  // to release it.
  std::string failure;
  for (int attempt = 0; attempt < 20; ++attempt) {
    failure.clear();
    if (StartPostmaster(state, &failure)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  if (!failure.empty()) throw std::runtime_error("RestartServer: " + failure);
}

const sigset_t& TestSignals() {
  static const sigset_t signals = [] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    return set;
  }();
  return signals;
}

void RestoreChildSignalMask() {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

void PgTest::SetUp() {
  schema_ = UniqueSchemaName();
  url_ = DatabaseUrl();
}

void PgTest::TearDown() {
  if (url_.empty() || schema_.empty()) return;
  try {
    // A bounded wait: a connection the test left inside a transaction must
    // fail this test, not hang the run.
    RunPsqlAt(url_, "SET lock_timeout = '20s'; DROP SCHEMA IF EXISTS \"" + schema_ + "\" CASCADE");
  } catch (const std::exception& e) {
    ADD_FAILURE() << "PgTest: cannot drop schema " << schema_ << ": " << e.what();
  }
}

namespace internal {

void StopServer() {
  std::lock_guard lock(StateMutex());
  ServerState& state = State();
  if (state.owner_pid != ::getpid() || state.stopped || state.dir.empty()) return;
  state.stopped = true;
  StopPostmasterLocked(state);
  std::error_code error;
  fs::remove_all(state.dir, error);
  if (error) {
    std::fprintf(stderr, "cairn test harness: cannot remove %s: %s\n", state.dir.c_str(),
                 error.message().c_str());
  }
  if (state.watchdog_fd >= 0) {
    TellWatchdog(state, 0);  // nothing left to stop
    ::close(state.watchdog_fd);
    state.watchdog_fd = -1;
  }
}

}  // namespace internal

}  // namespace cairn::test
