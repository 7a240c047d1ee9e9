// The HTTP side of `cairn run`: a civetweb server (CivetServer) answering a
// few fixed GET paths (/metrics, /healthz, /readyz) from handlers the daemon
// gives it. civetweb serves each connection on a worker thread of its own
// pool, so idle or slow clients hold a thread each (until the request
// timeout) but never delay another request while threads are free.
// It serves either a few fixed GET paths (the daemon's routes) or every
// request through one RequestHandler (the console, which also takes POSTs
// with bodies up to a bound). Start and Stop are called from one thread;
// handlers run on civetweb's threads and must be thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

class CivetServer;

namespace cairn {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // Further headers ("Set-Cookie", "Location", security headers).
  std::vector<std::pair<std::string, std::string>> headers;
};

// Answers one GET (or HEAD) of its path.
using HttpHandler = std::function<HttpResponse()>;

// One request as a RequestHandler sees it.
struct HttpRequest {
  std::string method;                          // "GET", "HEAD", "POST", ...
  std::string path;                            // decoded, without the query
  std::string query;                           // raw, without the '?'
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;                            // at most max_body_bytes

  // The header's value, or "" when the request has none.
  std::string Header(const std::string& lower_case_name) const;
};

// Answers every request (HEAD: the server drops the body).
using RequestHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  // "host:port" or ":port" (every address); a host name is resolved to its
  // first IPv4 address. IPv4 only: Debian 12's civetweb is built without
  // IPv6. Port 0 picks a free port.
  std::string listen;
  // The configuration key the address came from, for errors.
  std::string key = "listen";
  // Connections served at once (worker threads); more wait in the queue.
  int threads = 64;
  // A client must send its request within this, or its connection is closed.
  std::chrono::milliseconds request_timeout{5000};
  // With a RequestHandler: the largest request body read; a longer one is
  // answered 413 without reading it, one without Content-Length 411.
  size_t max_body_bytes = 0;
};

class HttpServer {
 public:
  // routes: exact path ("/metrics") -> handler. Other paths answer 404,
  // other methods 405.
  HttpServer(HttpServerOptions options, std::map<std::string, HttpHandler> routes);
  // Every path and method goes to `handler`.
  HttpServer(HttpServerOptions options, RequestHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts serving. Throws std::runtime_error naming the
  // key and the address when it cannot listen there.
  void Start();
  // Stops serving and joins civetweb's threads. Idempotent.
  void Stop();

  uint16_t port() const { return port_; }
  // The bound address, "127.0.0.1:9464" ("0.0.0.0:9464" for every address).
  const std::string& address() const { return address_; }

 private:
  class Handler;

  HttpServerOptions options_;
  std::map<std::string, HttpHandler> routes_;
  RequestHandler request_handler_;  // set: every request goes here, not to routes_
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<CivetServer> server_;
  uint16_t port_ = 0;
  std::string address_;
};

// The civetweb listening_ports value for a host:port address (resolving a
// host name). Throws std::runtime_error naming `key` when it cannot.
std::string CivetListeningPort(const std::string& listen, const std::string& key);

}  // namespace cairn
