// A real PgBouncer (Debian's pgbouncer package) in front of the harness's
// PostgreSQL, for tests of how cairn behaves behind a connection pooler. It
// runs in the foreground as a child of the test (as the postgres account when
// the test runs as root: PgBouncer refuses root), with its config and log in
// a folder of its own, and is stopped when destroyed.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "daemon_process.hpp"

namespace cairn::test {

class PgBouncer {
 public:
  // pool_mode: "session", "transaction" or "statement". Throws when the
  // binary is missing or it does not accept connections.
  PgBouncer(const std::string& upstream_url, const std::string& pool_mode);
  ~PgBouncer();
  PgBouncer(const PgBouncer&) = delete;
  PgBouncer& operator=(const PgBouncer&) = delete;

  // A libpq URI that connects through the pooler to the upstream database.
  const std::string& url() const { return url_; }
  std::string Log() const;

 private:
  TempDir dir_;
  std::string url_;
  std::optional<process::ChildProcess> child_;
};

}  // namespace cairn::test
