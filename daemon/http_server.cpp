// See http_server.hpp. civetweb does the HTTP; this file maps paths to
// handlers, resolves the listen address into civetweb's form and turns its
// start-up log into an error that names the configuration key.
#include "http_server.hpp"

#include <CivetServer.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
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
  out += "Cache-Control: no-store\r\nConnection: close\r\nX-Content-Type-Options: nosniff\r\n";
  for (const auto& [name, value] : response.headers) out += name + ": " + value + "\r\n";
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

std::string HttpRequest::Header(const std::string& lower_case_name) const {
  auto found = headers.find(lower_case_name);
  return found == headers.end() ? std::string() : found->second;
}

// One handler for every route: answers its exact path, 404 below it, 405
// for methods other than GET and HEAD. With a RequestHandler, every request
// goes to it instead.
class HttpServer::Handler : public CivetHandler {
 public:
  Handler(const std::map<std::string, HttpHandler>& routes, const RequestHandler& request_handler,
          size_t max_body_bytes)
      : routes_(routes), request_handler_(request_handler), max_body_bytes_(max_body_bytes) {}

  bool handleGet(CivetServer* /*server*/, mg_connection* connection) override {
    if (request_handler_) return Forward(connection, false);
    Answer(connection, false);
    return true;
  }
  bool handleHead(CivetServer* /*server*/, mg_connection* connection) override {
    if (request_handler_) return Forward(connection, true);
    Answer(connection, true);
    return true;
  }
  bool handlePost(CivetServer* /*server*/, mg_connection* connection) override {
    return request_handler_ ? Forward(connection, false) : NotAllowed(connection);
  }
  bool handlePut(CivetServer* /*server*/, mg_connection* connection) override {
    return request_handler_ ? Forward(connection, false) : NotAllowed(connection);
  }
  bool handleDelete(CivetServer* /*server*/, mg_connection* connection) override {
    return request_handler_ ? Forward(connection, false) : NotAllowed(connection);
  }
  bool handlePatch(CivetServer* /*server*/, mg_connection* connection) override {
    return request_handler_ ? Forward(connection, false) : NotAllowed(connection);
  }
  bool handleOptions(CivetServer* /*server*/, mg_connection* connection) override {
    return request_handler_ ? Forward(connection, false) : NotAllowed(connection);
  }

 private:
  // Reads the request (its body up to the bound) and answers what the
  // RequestHandler says.
  bool Forward(mg_connection* connection, bool head) const {
    const mg_request_info* info = mg_get_request_info(connection);
    HttpRequest request;
    request.method = info->request_method != nullptr ? info->request_method : "";
    request.path = info->local_uri != nullptr ? info->local_uri : "";
    request.query = info->query_string != nullptr ? info->query_string : "";
    for (int i = 0; i < info->num_headers; ++i) {
      std::string name = info->http_headers[i].name;
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      request.headers[name] = info->http_headers[i].value;
    }
    const bool has_body = request.method != "GET" && request.method != "HEAD";
    if (has_body && info->content_length < 0 && !request.Header("transfer-encoding").empty()) {
      Send(connection,
           {411, "text/plain; charset=utf-8", "a request body needs Content-Length\n", {}}, head);
      return true;
    }
    if (info->content_length > 0 && static_cast<size_t>(info->content_length) > max_body_bytes_) {
      Send(connection,
           {413,
            "text/plain; charset=utf-8",
            "request body of " + std::to_string(info->content_length) +
                " bytes is over the limit of " + std::to_string(max_body_bytes_) + " bytes\n",
            {}},
           head);
      return true;
    }
    if (info->content_length > 0) {
      request.body.resize(static_cast<size_t>(info->content_length));
      size_t got = 0;
      while (got < request.body.size()) {
        const int n = mg_read(connection, request.body.data() + got, request.body.size() - got);
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
      if (got < request.body.size()) return true;  // the client went away mid-body
    }
    HttpResponse response;
    try {
      response = request_handler_(request);
    } catch (const std::exception& e) {
      response = {500, "text/plain; charset=utf-8", std::string(e.what()) + "\n", {}};
    }
    Send(connection, response, head);
    return true;
  }

  void Answer(mg_connection* connection, bool head) const {
    const mg_request_info* request = mg_get_request_info(connection);
    const std::string path = request->local_uri != nullptr ? request->local_uri : "";
    auto route = routes_.find(path);
    if (route == routes_.end()) {
      Send(connection, {404, "text/plain; charset=utf-8", "not found\n", {}}, head);
      return;
    }
    HttpResponse response;
    try {
      response = route->second();
    } catch (const std::exception& e) {
      response = {500, "text/plain; charset=utf-8", std::string(e.what()) + "\n", {}};
    }
    Send(connection, response, head);
  }

  static bool NotAllowed(mg_connection* connection) {
    Send(connection, {405, "text/plain; charset=utf-8", "only GET and HEAD\n", {}}, false,
         "Allow: GET, HEAD\r\n");
    return true;
  }

  const std::map<std::string, HttpHandler>& routes_;
  const RequestHandler& request_handler_;
  size_t max_body_bytes_;
};

HttpServer::HttpServer(HttpServerOptions options, std::map<std::string, HttpHandler> routes)
    : options_(std::move(options)), routes_(std::move(routes)) {}

HttpServer::HttpServer(HttpServerOptions options, RequestHandler handler)
    : options_(std::move(options)), request_handler_(std::move(handler)) {}

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
  handler_ = std::make_unique<Handler>(routes_, request_handler_, options_.max_body_bytes);
  if (request_handler_) {
    server_->addHandler("/", *handler_);  // "/" is a prefix of every path
  } else {
    for (const auto& [path, route] : routes_) server_->addHandler(path, *handler_);
  }
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
