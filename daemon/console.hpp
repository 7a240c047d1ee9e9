// The web console behind `cairn console`: turns one HTTP request into one
// response. Pages (HTML) and their JSON twins under /api/v1 read through the
// store; the actions (signal, cancel, retry) go through run_actions, as the
// CLI's do, and only with the access token: a session cookie from the login
// form plus the form's CSRF token, or an Authorization: Bearer header for
// scripts. Without a token the console is read-only, and so are its
// database sessions. Handle is called from many civetweb threads at once:
// the sessions and the connection pool are guarded by mutexes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "http_server.hpp"
#include "store.hpp"

namespace cairn::console {

struct ConsoleOptions {
  store::ConnectionOptions database;
  // The access token that enables actions; absent: read-only.
  std::optional<std::string> token;
  // Database sessions open at once (a request waits for a free one).
  int connections = 4;
  std::chrono::hours session_lifetime{8};
  size_t max_sessions = 1000;  // sign-ins kept; the oldest goes first
};

// The largest request body the console reads (a signal's payload, form
// encoded, fits; more is refused before it is read).
size_t MaxRequestBodyBytes();

// The headers every console response carries: a Content-Security-Policy
// that allows scripts and styles from the console itself only (no inline
// script or style), no framing, no referrer.
std::vector<std::pair<std::string, std::string>> SecurityHeaders();

class Console {
 public:
  explicit Console(ConsoleOptions options);
  ~Console();
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;

  HttpResponse Handle(const HttpRequest& request);
  // Reads the schema once, so that an unreachable database or a schema that
  // was never migrated is a start-up error, not a broken first page.
  void Probe();

  bool read_only() const { return !options_.token.has_value(); }

 private:
  class Pool;
  struct Session {
    std::string csrf;
    std::chrono::steady_clock::time_point expires;
  };
  struct Request;

  HttpResponse Route(Request& request);
  HttpResponse Page(Request& request, const std::string& resource);
  HttpResponse FormAction(Request& request, const std::string& resource);
  HttpResponse ApiAction(Request& request, const std::string& resource);
  HttpResponse Login(Request& request);
  HttpResponse Logout(Request& request);

  std::optional<Session> FindSession(const HttpRequest& request);
  std::string NewSession();
  bool TokenMatches(const std::string& offered) const;

  ConsoleOptions options_;
  std::unique_ptr<Pool> pool_;
  std::mutex sessions_mutex_;
  std::unordered_map<std::string, Session> sessions_;  // by cookie value
};

}  // namespace cairn::console
