// See metrics_server.hpp.
#include "metrics_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace cairn {

namespace {

constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";
constexpr std::string_view kTextContentType = "text/plain; charset=utf-8";

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Internal Server Error";
  }
}

HttpResponse Text(int status, std::string body) {
  return {status, std::string(kTextContentType), std::move(body)};
}

// Splits "host:port" / "[v6]:port" / ":port". The config validated the shape.
void SplitListen(const std::string& listen, std::string& host, std::string& port) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) {
    throw std::runtime_error("metrics.listen: \"" + listen + "\" is not host:port");
  }
  host = listen.substr(0, colon);
  port = listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
}

std::string AddressOf(const sockaddr_storage& address, uint16_t& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(address);
    inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof(text));
    port = ntohs(a.sin6_port);
    return "[" + std::string(text) + "]:" + std::to_string(port);
  }
  const auto& a = reinterpret_cast<const sockaddr_in&>(address);
  inet_ntop(AF_INET, &a.sin_addr, text, sizeof(text));
  port = ntohs(a.sin_port);
  return std::string(text) + ":" + std::to_string(port);
}

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Sends everything or gives up (the socket's send timeout bounds each call).
void SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t sent = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return;
    data.remove_prefix(static_cast<std::size_t>(sent));
  }
}

// Answers a request cut short (too large, too slow), then discards what the
// client still sends for a moment: closing with unread data would reset the
// connection and could lose the answer.
void RefuseAndDrain(int fd, int status, std::string body) {
  SendAll(fd, SerializeResponse({status, std::string(kTextContentType), std::move(body)}));
  ::shutdown(fd, SHUT_WR);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  char buffer[4096];
  std::size_t drained = 0;
  while (drained < 256 * 1024) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd pfd{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) return;
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
    if (got <= 0) return;
    drained += static_cast<std::size_t>(got);
  }
}

}  // namespace

HttpResponse RouteMetricsRequest(std::string_view method, std::string_view target,
                                 Metrics& metrics) {
  // The query string plays no part (Prometheus may add one).
  if (auto query = target.find('?'); query != std::string_view::npos) {
    target = target.substr(0, query);
  }
  const bool known = target == "/metrics" || target == "/healthz";
  if (!known) return Text(404, "not found; try /metrics or /healthz\n");
  const bool head = method == "HEAD";
  if (method != "GET" && !head) return Text(405, "only GET and HEAD\n");
  HttpResponse response;
  if (target == "/metrics") {
    response = {200, std::string(kMetricsContentType), metrics.Render()};
  } else {
    const bool healthy = metrics.Healthy();
    response = Text(healthy ? 200 : 503, metrics.HealthDetail() + "\n");
  }
  response.head = head;
  return response;
}

std::string SerializeResponse(const HttpResponse& response) {
  std::string out =
      "HTTP/1.1 " + std::to_string(response.status) + " " + Reason(response.status) + "\r\n";
  if (!response.content_type.empty()) out += "Content-Type: " + response.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  if (response.status == 405) out += "Allow: GET, HEAD\r\n";
  out += "Cache-Control: no-store\r\nConnection: close\r\n\r\n";
  if (!response.head) out += response.body;
  return out;
}

MetricsServer::MetricsServer(MetricsServerOptions options, Metrics& metrics)
    : options_(std::move(options)), metrics_(metrics) {}

MetricsServer::~MetricsServer() { Stop(); }

void MetricsServer::Start() {
  if (thread_.joinable()) return;
  std::string host, port;
  SplitListen(options_.listen, host, port);
  const std::string where = "metrics.listen: cannot listen on " + options_.listen + ": ";

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    throw std::runtime_error(where + gai_strerror(rc));
  }
  // The first address that binds wins (for "localhost", ::1 or 127.0.0.1).
  std::string error = "no address";
  int fd = -1;
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 16) == 0) break;
    error = std::strerror(errno);
    CloseFd(fd);
  }
  ::freeaddrinfo(found);
  if (fd < 0) {
    throw std::runtime_error(where + error +
                             " (use another host:port, or \"\" to disable metrics)");
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  address_ = AddressOf(bound, port_);

  if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error("metrics server: pipe: " + reason);
  }
  listen_fd_ = fd;
  thread_ = std::thread([this] { Serve(); });
  spdlog::info("metrics: serving /metrics and /healthz on http://{}", address_);
}

void MetricsServer::Stop() {
  if (!thread_.joinable()) return;
  const char byte = 1;
  [[maybe_unused]] ssize_t ignored = ::write(wake_pipe_[1], &byte, 1);
  thread_.join();
  CloseFd(listen_fd_);
  CloseFd(wake_pipe_[0]);
  CloseFd(wake_pipe_[1]);
}

void MetricsServer::Serve() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("metrics server: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      // ECONNABORTED, EMFILE...: nothing to answer; try the next one.
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        spdlog::warn("metrics server: accept: {}", std::strerror(errno));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      continue;
    }
    try {
      Handle(client);
    } catch (const std::exception& e) {
      spdlog::warn("metrics server: {}", e.what());
    }
    ::close(client);
  }
}

void MetricsServer::Handle(int fd) {
  timeval send_timeout{static_cast<time_t>(options_.io_timeout.count() / 1000),
                       static_cast<suseconds_t>((options_.io_timeout.count() % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));

  // Read the request head (line and headers) within the deadline and size
  // bound. A GET carries no body, so the head is all there is to read.
  const auto deadline = std::chrono::steady_clock::now() + options_.io_timeout;
  std::string request;
  std::size_t head_end = std::string::npos;
  char buffer[2048];
  while (head_end == std::string::npos) {
    if (request.size() > options_.max_request_bytes) {
      RefuseAndDrain(fd, 431, "request too large\n");
      return;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      RefuseAndDrain(fd, 408, "request timeout\n");
      return;
    }
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    const int ready = ::poll(fds, 2, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0 || fds[1].revents != 0) return;  // stopping
    if (ready == 0) continue;                      // the deadline check answers
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return;  // the client went away
    request.append(buffer, static_cast<std::size_t>(got));
    head_end = request.find("\r\n\r\n");
    if (head_end == std::string::npos) head_end = request.find("\n\n");  // lenient
  }
  if (head_end > options_.max_request_bytes) {
    RefuseAndDrain(fd, 431, "request too large\n");
    return;
  }

  // Request line: METHOD SP target SP HTTP/1.x
  const std::string_view head(request.data(), head_end);
  const std::string_view line = head.substr(0, head.find_first_of("\r\n"));
  const auto first_space = line.find(' ');
  const auto second_space =
      first_space == std::string_view::npos ? first_space : line.find(' ', first_space + 1);
  if (second_space == std::string_view::npos ||
      line.substr(second_space + 1).rfind("HTTP/1.", 0) != 0) {
    SendAll(fd, SerializeResponse(Text(400, "bad request\n")));
    return;
  }
  const std::string_view method = line.substr(0, first_space);
  const std::string_view target = line.substr(first_space + 1, second_space - first_space - 1);
  SendAll(fd, SerializeResponse(RouteMetricsRequest(method, target, metrics_)));
  ::shutdown(fd, SHUT_WR);
}

}  // namespace cairn
