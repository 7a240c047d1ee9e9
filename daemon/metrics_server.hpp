// The metrics and health endpoint of `cairn run`: a minimal HTTP/1.1 server
// on a POSIX socket with one thread of its own. GET /metrics answers the
// Prometheus text format 0.0.4, GET /healthz "ok" (200) or why not (503),
// anything else 404. One connection at a time, each closed after its
// response; requests are bounded in size and must arrive within a timeout,
// so a slow or hostile client delays a scrape but cannot hold the server.
// Start and Stop are called from one thread; Metrics is shared and outlives
// the server.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>

#include "metrics.hpp"

namespace cairn {

struct MetricsServerOptions {
  // "host:port", "[v6-address]:port" or ":port" (every address). Port 0 picks
  // a free port (see MetricsServer::port()).
  std::string listen;
  std::chrono::milliseconds io_timeout{3000};  // to read the request, and per write
  std::size_t max_request_bytes = 8192;        // request line and headers
};

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  bool head = false;  // HEAD: headers only
};

// What the server answers to one parsed request line. Pure: no socket.
HttpResponse RouteMetricsRequest(std::string_view method, std::string_view target,
                                 Metrics& metrics);

// The bytes of a response, Connection: close.
std::string SerializeResponse(const HttpResponse& response);

class MetricsServer {
 public:
  MetricsServer(MetricsServerOptions options, Metrics& metrics);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds, listens and starts the thread. Throws std::runtime_error naming
  // the address when it cannot listen there.
  void Start();
  // Stops accepting, ends the thread. Idempotent.
  void Stop();

  uint16_t port() const { return port_; }
  // The bound address, "127.0.0.1:9464" or "[::1]:9464".
  const std::string& address() const { return address_; }

 private:
  void Serve();
  void Handle(int fd);

  MetricsServerOptions options_;
  Metrics& metrics_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};  // Stop writes a byte to end the accept loop
  uint16_t port_ = 0;
  std::string address_;
  std::thread thread_;
};

}  // namespace cairn
