// Unit tests of the daemon's HTTP server (civetweb) on loopback: routing,
// status codes, methods, the bound address, a port in use, and that idle
// connections do not delay other requests. No database.
#include "http_server.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace cairn {
namespace {

using namespace std::chrono_literals;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

int Connect(int family, uint16_t port) {
  int fd = ::socket(family, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  int rc;
  if (family == AF_INET6) {
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_port = htons(port);
    address.sin6_addr = in6addr_loopback;
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  }
  if (rc != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` as is and returns everything the server sent until it
// closed the connection (or 2 s passed without data).
std::string Exchange(int family, uint16_t port, const std::string& request) {
  int fd = Connect(family, port);
  if (fd < 0) return "";
  timeval timeout{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string response;
  char buffer[4096];
  ssize_t got;
  while ((got = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, got);
  ::close(fd);
  return response;
}

std::string Request(const std::string& method, const std::string& path) {
  return method + " " + path + " HTTP/1.1\r\nHost: test\r\n\r\n";
}

std::string Get(uint16_t port, const std::string& path, int family = AF_INET) {
  return Exchange(family, port, Request("GET", path));
}

HttpServer TwoRoutes(const std::string& listen = "127.0.0.1:0") {
  HttpServerOptions options;
  options.listen = listen;
  options.key = "health.listen";
  return HttpServer(options, {{"/ok",
                               [] {
                                 return HttpResponse{200, "text/plain", "fine\n"};
                               }},
                              {"/down", [] {
                                 return HttpResponse{503, "text/plain", "no\n"};
                               }}});
}

TEST(HttpServer, AnswersEachRouteWithItsStatusBodyAndContentType) {
  HttpServer server = TwoRoutes();
  server.Start();
  ASSERT_GT(server.port(), 0);
  EXPECT_EQ(server.address(), "127.0.0.1:" + std::to_string(server.port()));
  const std::string ok = Get(server.port(), "/ok");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ok;
  EXPECT_TRUE(Contains(ok, "Content-Type: text/plain\r\n")) << ok;
  EXPECT_TRUE(Contains(ok, "Content-Length: 5\r\n")) << ok;
  EXPECT_EQ(ok.substr(ok.size() - 5), "fine\n");
  EXPECT_EQ(Get(server.port(), "/ok?from=prometheus").rfind("HTTP/1.1 200 ", 0), 0u);
  const std::string down = Get(server.port(), "/down");
  EXPECT_EQ(down.rfind("HTTP/1.1 503 ", 0), 0u) << down;
  EXPECT_EQ(down.substr(down.size() - 3), "no\n");
  server.Stop();
  server.Stop();  // idempotent
  EXPECT_EQ(Get(server.port(), "/ok"), "");
}

TEST(HttpServer, AnswersNotFoundForOtherPathsAndNotAllowedForOtherMethods) {
  HttpServer server = TwoRoutes();
  server.Start();
  EXPECT_EQ(Get(server.port(), "/").rfind("HTTP/1.1 404 ", 0), 0u) << Get(server.port(), "/");
  EXPECT_EQ(Get(server.port(), "/nope").rfind("HTTP/1.1 404 ", 0), 0u);
  EXPECT_EQ(Get(server.port(), "/ok/more").rfind("HTTP/1.1 404 ", 0), 0u);
  const std::string post = Exchange(AF_INET, server.port(), Request("POST", "/ok"));
  EXPECT_EQ(post.rfind("HTTP/1.1 405 ", 0), 0u) << post;
  EXPECT_TRUE(Contains(post, "Allow: GET, HEAD\r\n")) << post;
  const std::string head = Exchange(AF_INET, server.port(), Request("HEAD", "/ok"));
  EXPECT_EQ(head.rfind("HTTP/1.1 200 ", 0), 0u) << head;
  EXPECT_TRUE(Contains(head, "Content-Length: 5\r\n")) << head;
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << head;
  // Garbage gets a 400 (or a closed connection), and the server goes on.
  const std::string garbage = Exchange(AF_INET, server.port(), "garbage\r\n\r\n");
  EXPECT_TRUE(garbage.empty() || garbage.rfind("HTTP/1.0 400 ", 0) == 0) << garbage;
  EXPECT_EQ(Get(server.port(), "/ok").rfind("HTTP/1.1 200 ", 0), 0u);
}

TEST(HttpServer, AHandlerThatThrowsAnswers500AndTheServerGoesOn) {
  HttpServerOptions options;
  options.listen = "127.0.0.1:0";
  HttpServer server(options, {{"/boom", []() -> HttpResponse { throw std::runtime_error("x"); }},
                              {"/ok", [] {
                                 return HttpResponse{200, "text/plain", "ok\n"};
                               }}});
  server.Start();
  EXPECT_EQ(Get(server.port(), "/boom").rfind("HTTP/1.1 500 ", 0), 0u);
  EXPECT_EQ(Get(server.port(), "/ok").rfind("HTTP/1.1 200 ", 0), 0u);
}

TEST(HttpServer, APortInUseIsAnErrorNamingTheKeyAndTheAddress) {
  HttpServer first = TwoRoutes();
  first.Start();
  const std::string taken = "127.0.0.1:" + std::to_string(first.port());
  HttpServer second = TwoRoutes(taken);
  try {
    second.Start();
    FAIL() << "bound a port that is in use";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(Contains(e.what(), "health.listen: cannot listen on " + taken)) << e.what();
    EXPECT_TRUE(Contains(e.what(), "in use")) << e.what();
  }
  // The first one still serves.
  EXPECT_EQ(Get(first.port(), "/ok").rfind("HTTP/1.1 200 ", 0), 0u);
}

TEST(HttpServer, ResolvesHostNamesAndServesEveryAddressForAnEmptyHost) {
  EXPECT_EQ(CivetListeningPort("127.0.0.1:9464", "k"), "127.0.0.1:9464");
  EXPECT_EQ(CivetListeningPort(":9464", "k"), "9464");
  EXPECT_EQ(CivetListeningPort("localhost:9464", "k"), "127.0.0.1:9464");
  EXPECT_THROW(CivetListeningPort("no-such-host.invalid:9464", "metrics.listen"),
               std::runtime_error);
  HttpServer any = TwoRoutes(":0");
  any.Start();
  EXPECT_EQ(any.address(), "0.0.0.0:" + std::to_string(any.port()));
  EXPECT_EQ(Get(any.port(), "/ok").rfind("HTTP/1.1 200 ", 0), 0u);
}

TEST(HttpServer, RefusesIpv6AddressesNamingTheKey) {
  // Debian 12's civetweb is built without IPv6.
  try {
    CivetListeningPort("[::1]:9464", "metrics.listen");
    FAIL() << "accepted an IPv6 address";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(Contains(e.what(), "metrics.listen: cannot listen on [::1]:9464: IPv6"))
        << e.what();
  }
}

TEST(HttpServer, FiftyIdleConnectionsDoNotDelayARequest) {
  HttpServer server = TwoRoutes();
  server.Start();
  std::vector<int> idle;
  for (int i = 0; i < 50; ++i) {
    int fd = Connect(AF_INET, server.port());
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  std::this_thread::sleep_for(100ms);  // the server has taken them all up
  auto best = std::chrono::steady_clock::duration::max();
  for (int i = 0; i < 5; ++i) {
    const auto started = std::chrono::steady_clock::now();
    const std::string ok = Get(server.port(), "/ok");
    const auto took = std::chrono::steady_clock::now() - started;
    EXPECT_EQ(ok.rfind("HTTP/1.1 200 ", 0), 0u) << ok;
    EXPECT_LT(took, 1s);
    best = std::min(best, took);
  }
  EXPECT_LT(best, 100ms);
  for (int fd : idle) ::close(fd);
}

TEST(HttpServer, DropsAClientThatSendsNothingAfterTheRequestTimeout) {
  HttpServerOptions options;
  options.listen = "127.0.0.1:0";
  options.request_timeout = 300ms;
  HttpServer server(options, {{"/ok", [] { return HttpResponse{200, "text/plain", "ok\n"}; }}});
  server.Start();
  int fd = Connect(AF_INET, server.port());
  ASSERT_GE(fd, 0);
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const auto started = std::chrono::steady_clock::now();
  char buffer[256];
  while (::recv(fd, buffer, sizeof(buffer), 0) > 0) {
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, 4s);
  ::close(fd);
}

TEST(HttpServer, ARequestHandlerSeesEveryMethodWithItsHeadersQueryAndBody) {
  HttpServerOptions options;
  options.listen = "127.0.0.1:0";
  options.max_body_bytes = 64;
  HttpRequest seen;
  HttpServer server(options, [&seen](const HttpRequest& request) {
    seen = request;
    HttpResponse response{201, "text/plain", "got " + request.body, {{"X-Extra", "yes"}}};
    return response;
  });
  server.Start();
  const std::string answer =
      Exchange(AF_INET, server.port(),
               "POST /any/path?a=1&b=%20 HTTP/1.1\r\nHost: test\r\nX-Token: Secret\r\n"
               "Content-Length: 5\r\n\r\nhello");
  EXPECT_TRUE(Contains(answer, "HTTP/1.1 201")) << answer;
  EXPECT_TRUE(Contains(answer, "X-Extra: yes\r\n")) << answer;
  EXPECT_TRUE(Contains(answer, "got hello")) << answer;
  EXPECT_EQ(seen.method, "POST");
  EXPECT_EQ(seen.path, "/any/path");
  EXPECT_EQ(seen.query, "a=1&b=%20");
  EXPECT_EQ(seen.Header("x-token"), "Secret");
  EXPECT_EQ(seen.body, "hello");
  // A body over the bound is refused before the handler sees it.
  seen = HttpRequest{};
  const std::string refused = Exchange(
      AF_INET, server.port(),
      "POST /big HTTP/1.1\r\nHost: test\r\nContent-Length: 65\r\n\r\n" + std::string(65, 'x'));
  EXPECT_TRUE(Contains(refused, "HTTP/1.1 413")) << refused;
  EXPECT_TRUE(Contains(refused, "over the limit of 64 bytes")) << refused;
  EXPECT_EQ(seen.path, "");
  EXPECT_TRUE(Contains(Exchange(AF_INET, server.port(), Request("DELETE", "/x")), "HTTP/1.1 201"));
}

}  // namespace
}  // namespace cairn
