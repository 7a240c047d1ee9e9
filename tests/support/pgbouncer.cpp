// See pgbouncer.hpp.
#include "pgbouncer.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "pg_harness.hpp"

namespace cairn::test {

PgBouncer::PgBouncer(const std::string& upstream_url, const std::string& pool_mode)
    : dir_("cairn-pgbouncer") {
  const std::string binary = "/usr/sbin/pgbouncer";
  if (::access(binary.c_str(), X_OK) != 0) {
    throw std::runtime_error("no " + binary + ": install pgbouncer (scripts/install-deps.sh)");
  }
  std::smatch m;
  if (!std::regex_search(upstream_url, m, std::regex(R"(://([^@/]+)@([^:/]+):(\d+)/([^?]+))"))) {
    throw std::runtime_error("cannot read user, host and port from " + upstream_url);
  }
  const std::string user = m[1], host = m[2], port = m[3], database = m[4];
  const int listen_port = FindFreePort();
  std::ostringstream ini;
  ini << "[databases]\n"
      << database << " = host=" << host << " port=" << port << " user=" << user
      << " dbname=" << database << "\n"
      << "[pgbouncer]\n"
      << "listen_addr = 127.0.0.1\n"
      << "listen_port = " << listen_port << "\n"
      << "unix_socket_dir =\n"
      << "auth_type = any\n"
      << "pool_mode = " << pool_mode << "\n"
      << "max_client_conn = 200\n"
      << "default_pool_size = 20\n"
      << "ignore_startup_parameters = extra_float_digits,options\n"
      << "logfile = " << dir_.path() << "/pgbouncer.log\n"
      << "pidfile = " << dir_.path() << "/pgbouncer.pid\n";
  const std::string config = dir_.Write("pgbouncer.ini", ini.str());
  const bool root = ::geteuid() == 0;
  if (root) {
    const passwd* pw = ::getpwnam("postgres");
    if (pw == nullptr) throw std::runtime_error("running as root without a postgres account");
    if (::chown(dir_.path().c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      throw std::runtime_error("cannot hand " + dir_.path() + " to the postgres account");
    }
  }
  const std::string output = dir_.path() + "/output.log";
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    RestoreChildSignalMask();
    const int fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    if (root) {
      ::execl("/usr/sbin/runuser", "runuser", "-u", "postgres", "--", binary.c_str(),
              config.c_str(), static_cast<char*>(nullptr));
    } else {
      ::execl(binary.c_str(), "pgbouncer", config.c_str(), static_cast<char*>(nullptr));
    }
    ::_exit(127);
  }
  url_ = "postgresql://" + user + "@127.0.0.1:" + std::to_string(listen_port) + "/" + database;
  const bool up = PollUntil(
      [&] {
        try {
          return RunPsqlAt(url_, "SELECT 1") == "1";
        } catch (const std::exception&) {
          return false;
        }
      },
      std::chrono::seconds(15), std::chrono::milliseconds(100));
  if (!up) throw std::runtime_error("pgbouncer did not accept connections:\n" + Log());
}

PgBouncer::~PgBouncer() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 100 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (::waitpid(pid_, &status, WNOHANG) == 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  }
  // runuser forwards the signal; make sure no pgbouncer is left behind.
  std::ifstream pidfile(dir_.path() + "/pgbouncer.pid");
  pid_t bouncer = 0;
  if (pidfile >> bouncer && bouncer > 1) ::kill(bouncer, SIGKILL);
}

std::string PgBouncer::Log() const {
  std::string log;
  for (const char* name : {"/output.log", "/pgbouncer.log"}) {
    std::ifstream in(dir_.path() + name);
    std::stringstream text;
    text << in.rdbuf();
    log += text.str();
  }
  return log;
}

}  // namespace cairn::test
