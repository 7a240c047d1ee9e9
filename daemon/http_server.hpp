// The HTTP side of `cairn run`: a civetweb server (CivetServer) answering a
// few fixed GET paths (/metrics, /healthz, /readyz) from handlers the daemon
// gives it. civetweb serves each connection on a worker thread of its own
// pool, so idle or slow clients hold a thread each (until the request
// timeout) but never delay another request while threads are free.
// Start and Stop are called from one thread; handlers run on civetweb's
// threads and must be thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

class CivetServer;

namespace cairn {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Answers one GET (or HEAD) of its path.
using HttpHandler = std::function<HttpResponse()>;

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
};

class HttpServer {
 public:
  // routes: exact path ("/metrics") -> handler. Other paths answer 404,
  // other methods 405.
  HttpServer(HttpServerOptions options, std::map<std::string, HttpHandler> routes);
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
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<CivetServer> server_;
  uint16_t port_ = 0;
  std::string address_;
};

// The civetweb listening_ports value for a host:port address (resolving a
// host name). Throws std::runtime_error naming `key` when it cannot.
std::string CivetListeningPort(const std::string& listen, const std::string& key);

}  // namespace cairn
