// See pgbouncer.hpp.
#include "pgbouncer.hpp"

#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
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
      << "logfile = " << dir_.path().string() << "/pgbouncer.log\n"
      << "pidfile = " << dir_.path().string() << "/pgbouncer.pid\n";
  const std::string config = dir_.Write("pgbouncer.ini", ini.str());
  const bool root = ::geteuid() == 0;
  if (root) {
    const passwd* pw = ::getpwnam("postgres");
    if (pw == nullptr) throw std::runtime_error("running as root without a postgres account");
    if (::chown(dir_.path().c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      throw std::runtime_error("cannot hand " + dir_.path().string() + " to the postgres account");
    }
  }
  std::vector<std::string> argv{binary, config};
  if (root) argv = {"/usr/sbin/runuser", "-u", "postgres", "--", binary, config};
  child_.emplace(argv, process::ChildEnvironment(), dir_.path() / "output.log");
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
  if (!child_) return;
  child_->Signal(SIGTERM);
  if (!child_->Wait(std::chrono::seconds(5))) child_->Kill();
  // runuser forwards the signal; make sure no pgbouncer is left behind.
  std::ifstream pidfile(dir_.path().string() + "/pgbouncer.pid");
  pid_t bouncer = 0;
  if (pidfile >> bouncer && bouncer > 1) ::kill(bouncer, SIGKILL);
}

std::string PgBouncer::Log() const {
  std::string log;
  for (const char* name : {"/output.log", "/pgbouncer.log"}) {
    std::ifstream in(dir_.path().string() + name);
    std::stringstream text;
    text << in.rdbuf();
    log += text.str();
  }
  return log;
}

}  // namespace cairn::test
