// See http_server.hpp. civetweb does the HTTP; this file maps paths to
// handlers, resolves the listen address into civetweb's form and turns its
// start-up log into an error that names the configuration key.
#include "http_server.hpp"

#include <CivetServer.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <mutex>
#include <stdexcept>
#include <vector>

namespace cairn {

namespace {

// civetweb reports start-up problems (a port in use) through log_message
// on the thread that starts it; Start collects them here.
thread_local std::vector<std::string>* start_messages = nullptr;

int LogMessage(const mg_connection* /*connection*/, const char* message) {
  if (start_messages != nullptr) {
    start_messages->emplace_back(message);
  } else {
    spdlog::warn("http: {}", message);
  }
  return 1;  // handled: civetweb prints nothing itself
}

void SplitListen(const std::string& listen, const std::string& key, std::string& host,
                 std::string& port) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) {
    throw std::runtime_error(key + ": \"" + listen + "\" is not host:port");
  }
  host = listen.substr(0, colon);
  port = listen.substr(colon + 1);
}

void Send(mg_connection* connection, const HttpResponse& response, bool head,
          std::string_view extra_headers = {}) {
  std::string out = "HTTP/1.1 " + std::to_string(response.status) + " " +
                    mg_get_response_code_text(connection, response.status) + "\r\n";
  out += "Content-Type: " + response.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  out += "Cache-Control: no-store\r\nConnection: close\r\n";
  out += extra_headers;
  out += "\r\n";
  if (!head) out += response.body;
  mg_write(connection, out.data(), out.size());
}

}  // namespace

std::string CivetListeningPort(const std::string& listen, const std::string& key) {
  std::string host, port;
  SplitListen(listen, key, host, port);
  if (host.empty()) return port;  // every IPv4 address
  if (host.front() == '[') {
    throw std::runtime_error(key + ": cannot listen on " + listen +
                             ": IPv6 addresses are not supported (the HTTP server is IPv4 only)");
  }
  // Debian 12's civetweb is built without IPv6: the first IPv4 address.
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
    throw std::runtime_error(key + ": cannot listen on " + listen + ": " + gai_strerror(rc));
  }
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr, text,
            sizeof(text));
  ::freeaddrinfo(found);
  return std::string(text) + ":" + port;
}

// One handler for every route: answers its exact path, 404 below it, 405
// for methods other than GET and HEAD.
class HttpServer::Handler : public CivetHandler {
 public:
  explicit Handler(const std::map<std::string, HttpHandler>& routes) : routes_(routes) {}

  bool handleGet(CivetServer* /*server*/, mg_connection* connection) override {
    Answer(connection, false);
    return true;
  }
  bool handleHead(CivetServer* /*server*/, mg_connection* connection) override {
    Answer(connection, true);
    return true;
  }
  bool handlePost(CivetServer* /*server*/, mg_connection* connection) override {
    return NotAllowed(connection);
  }
  bool handlePut(CivetServer* /*server*/, mg_connection* connection) override {
    return NotAllowed(connection);
  }
  bool handleDelete(CivetServer* /*server*/, mg_connection* connection) override {
    return NotAllowed(connection);
  }
  bool handlePatch(CivetServer* /*server*/, mg_connection* connection) override {
    return NotAllowed(connection);
  }
  bool handleOptions(CivetServer* /*server*/, mg_connection* connection) override {
    return NotAllowed(connection);
  }

 private:
  void Answer(mg_connection* connection, bool head) const {
    const mg_request_info* request = mg_get_request_info(connection);
    const std::string path = request->local_uri != nullptr ? request->local_uri : "";
    auto route = routes_.find(path);
    if (route == routes_.end()) {
      Send(connection, {404, "text/plain; charset=utf-8", "not found\n"}, head);
      return;
    }
    HttpResponse response;
    try {
      response = route->second();
    } catch (const std::exception& e) {
      response = {500, "text/plain; charset=utf-8", std::string(e.what()) + "\n"};
    }
    Send(connection, response, head);
  }

  static bool NotAllowed(mg_connection* connection) {
    Send(connection, {405, "text/plain; charset=utf-8", "only GET and HEAD\n"}, false,
         "Allow: GET, HEAD\r\n");
    return true;
  }

  const std::map<std::string, HttpHandler>& routes_;
};

HttpServer::HttpServer(HttpServerOptions options, std::map<std::string, HttpHandler> routes)
    : options_(std::move(options)), routes_(std::move(routes)) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Start() {
  if (server_) return;
  const std::string where = options_.key + ": cannot listen on " + options_.listen + ": ";
  const std::vector<std::string> civet_options = {
      "listening_ports",    CivetListeningPort(options_.listen, options_.key),
      "num_threads",        std::to_string(options_.threads),
      "request_timeout_ms", std::to_string(options_.request_timeout.count()),
      "enable_keep_alive",  "no",
  };
  CivetCallbacks callbacks;
  callbacks.log_message = LogMessage;
  std::vector<std::string> messages;
  start_messages = &messages;
  try {
    server_ = std::make_unique<CivetServer>(civet_options, &callbacks);
  } catch (const std::exception& e) {
    start_messages = nullptr;
    std::string reason;
    for (std::string message : messages) {
      while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
        message.pop_back();
      }
      reason += (reason.empty() ? "" : "; ") + message;
    }
    if (reason.empty()) reason = e.what();
    throw std::runtime_error(where + reason);
  }
  start_messages = nullptr;
  handler_ = std::make_unique<Handler>(routes_);
  for (const auto& [path, route] : routes_) server_->addHandler(path, *handler_);
  const auto ports = server_->getListeningPortsFull();
  port_ = ports.empty() ? 0 : static_cast<uint16_t>(ports.front().port);
  const std::string& bound = civet_options[1];
  const auto colon = bound.rfind(':');
  address_ = (colon == std::string::npos ? std::string("0.0.0.0") : bound.substr(0, colon)) + ":" +
             std::to_string(port_);
}

void HttpServer::Stop() {
  if (!server_) return;
  server_->close();
  server_.reset();
  handler_.reset();
}

}  // namespace cairn
