// A libpq session of a test's own, for what must outlive one statement
// (advisory locks, many statements from one thread in a race) or what the
// server says besides results (its notices). Not thread-safe: one session
// per thread.
#pragma once

#include <libpq-fe.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cairn::test {

class PgSession {
 public:
  explicit PgSession(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string error = PQerrorMessage(conn_);
      PQfinish(conn_);
      throw std::runtime_error("connect: " + error);
    }
    PQsetNoticeProcessor(conn_, &PgSession::Collect, &notices_);
  }
  ~PgSession() { PQfinish(conn_); }
  PgSession(const PgSession&) = delete;
  PgSession& operator=(const PgSession&) = delete;

  // The first value of the statement's result ("" for no row or NULL);
  // params bind to $1, $2, ... Throws with PostgreSQL's message.
  std::string Value(const std::string& sql, const std::vector<std::string>& params = {}) {
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p.c_str());
    PGresult* result = PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                                    values.data(), nullptr, nullptr, 0);
    ExecStatusType status = PQresultStatus(result);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
      std::string error = PQresultErrorMessage(result);
      PQclear(result);
      throw std::runtime_error("SQL failed: " + error + " in: " + sql);
    }
    std::string value;
    if (status == PGRES_TUPLES_OK && PQntuples(result) > 0 && !PQgetisnull(result, 0, 0)) {
      value = PQgetvalue(result, 0, 0);
    }
    PQclear(result);
    return value;
  }

  // The notices the server sent since the last call (warnings, and debug
  // messages when client_min_messages asks for them), oldest first.
  std::vector<std::string> TakeNotices() { return std::exchange(notices_, {}); }

 private:
  static void Collect(void* notices, const char* message) {
    static_cast<std::vector<std::string>*>(notices)->emplace_back(message);
  }

  PGconn* conn_;
  std::vector<std::string> notices_;
};

}  // namespace cairn::test
