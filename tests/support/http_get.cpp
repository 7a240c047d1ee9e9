// See http_get.hpp.
#include "http_get.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

namespace cairn::test {

namespace {

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

}  // namespace

std::string HttpResult::Header(const std::string& name) const {
  const std::string lower = Lower(headers);
  const std::string wanted = "\r\n" + Lower(name) + ":";
  const auto at = lower.find(wanted);
  if (at == std::string::npos) return "";
  auto start = at + wanted.size();
  while (start < headers.size() && headers[start] == ' ') ++start;
  const auto end = headers.find("\r\n", start);
  return headers.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

HttpResult HttpGet(uint16_t port, const std::string& path) { return HttpSend(port, "GET", path); }

HttpResult HttpSend(uint16_t port, const std::string& method, const std::string& path,
                    const std::vector<std::string>& headers, const std::string& body) {
  HttpResult result;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return result;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return result;
  }
  // Connection: close, so that reading to the end of the stream ends.
  std::string request =
      method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  for (const auto& header : headers) request += header + "\r\n";
  if (method != "GET" && method != "HEAD") {
    request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "\r\n" + body;
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string response;
  char buffer[8192];
  ssize_t got = 0;
  while ((got = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) {
    response.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  if (response.rfind("HTTP/1.", 0) != 0 || response.size() < 12) return result;
  result.status = std::stoi(response.substr(9, 3));
  const auto end = response.find("\r\n\r\n");
  if (end != std::string::npos) {
    result.headers = response.substr(0, end);
    result.body = response.substr(end + 4);
  }
  return result;
}

}  // namespace cairn::test
