// See console.hpp. Each page is first built as JSON (what /api/v1 answers),
// then drawn as HTML from that JSON (console_html.cpp). Problems a client can
// fix (a bad filter, an unknown run, a bad payload) come back as 4xx with a
// sentence naming the problem, and change nothing.
#include "console.hpp"

#include <sys/random.h>

#include <algorithm>
#include <stdexcept>

#include "cli.hpp"
#include "console_assets.hpp"
#include "console_data.hpp"
#include "console_html.hpp"
#include "console_request.hpp"
#include "identifier.hpp"
#include "json_payload.hpp"
#include "records_json.hpp"
#include "run_actions.hpp"
#include "store_console.hpp"

namespace cairn::console {

namespace {

constexpr const char* kSessionCookie = "cairn_console";
constexpr size_t kMaxReasonBytes = 1000;

// Constant-time comparison, so the time a wrong guess takes says nothing
// about how much of it was right.
bool SameSecret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> buffer(bytes);
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::getrandom(buffer.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("getrandom failed");
    }
    got += static_cast<size_t>(n);
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : buffer) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

std::string CookieValue(const std::string& header, const std::string& name) {
  size_t start = 0;
  while (start < header.size()) {
    size_t end = header.find(';', start);
    if (end == std::string::npos) end = header.size();
    std::string pair = header.substr(start, end - start);
    start = end + 1;
    const size_t first = pair.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    pair = pair.substr(first);
    if (pair.compare(0, name.size() + 1, name + "=") == 0) return pair.substr(name.size() + 1);
  }
  return "";
}

HttpResponse JsonResponse(int status, const Json& body) {
  return {status,
          "application/json",
          body.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n",
          {}};
}

HttpResponse HtmlResponse(int status, std::string body) {
  return {status, "text/html; charset=utf-8", std::move(body), {}};
}

HttpResponse Redirect(const std::string& location) {
  HttpResponse response{303, "text/plain; charset=utf-8", "see " + location + "\n", {}};
  response.headers.emplace_back("Location", location);
  return response;
}

// A local path to return to after signing in; anything else (another host,
// a scheme) becomes the runs page.
std::string SafeNext(const std::string& next) {
  if (next.empty() || next[0] != '/' || next.compare(0, 2, "//") == 0 ||
      next.find('\\') != std::string::npos || next.find_first_of("\r\n") != std::string::npos) {
    return "/runs";
  }
  return next;
}

// The HTTP status of an action's outcome.
int ActionStatus(const cli::ActionOutcome& outcome) {
  if (outcome.outcome == "stored") return 202;
  switch (outcome.exit_code) {
    case cli::kExitOk:
    case cli::kExitAlreadyDone:
      return 200;
    case cli::kExitNotFound:
      return 404;
    default:
      return 409;
  }
}

std::string ActionTitle(const cli::ActionOutcome& outcome) {
  std::string title = outcome.outcome;
  std::replace(title.begin(), title.end(), '_', ' ');
  if (!title.empty()) title[0] = static_cast<char>(title[0] - 'a' + 'A');
  return title;
}

}  // namespace

size_t MaxRequestBodyBytes() { return 3 * kMaxPayloadBytes + 16 * 1024; }

std::vector<std::pair<std::string, std::string>> SecurityHeaders() {
  return {{"Content-Security-Policy",
           "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
           "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"},
          {"X-Frame-Options", "DENY"},
          {"Referrer-Policy", "no-referrer"},
          {"Cross-Origin-Opener-Policy", "same-origin"}};
}

// A bounded set of database sessions shared by civetweb's threads.
class Console::Pool {
 public:
  Pool(store::ConnectionOptions options, int size, bool read_only)
      : options_(std::move(options)), size_(size), read_only_(read_only) {}

  // A session for one request, handed back when it goes out of scope (or
  // dropped, when the request broke it).
  class Lease {
   public:
    Lease(Pool& pool, std::unique_ptr<store::Connection> connection)
        : pool_(pool), connection_(std::move(connection)) {}
    ~Lease() { pool_.Return(std::move(connection_)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    store::Connection& operator*() { return *connection_; }

   private:
    Pool& pool_;
    std::unique_ptr<store::Connection> connection_;
  };

  std::unique_ptr<Lease> Acquire() {
    std::unique_lock lock(mutex_);
    freed_.wait(lock, [&] { return !idle_.empty() || open_ < size_; });
    if (!idle_.empty()) {
      auto connection = std::move(idle_.back());
      idle_.pop_back();
      return std::make_unique<Lease>(*this, std::move(connection));
    }
    ++open_;
    lock.unlock();
    try {
      auto connection = std::make_unique<store::Connection>(options_);
      connection->Autocommit([&](store::Tx& tx) { store::SetUpConsoleSession(tx, read_only_); });
      return std::make_unique<Lease>(*this, std::move(connection));
    } catch (...) {
      Return(nullptr);
      throw;
    }
  }

 private:
  void Return(std::unique_ptr<store::Connection> connection) {
    {
      std::lock_guard lock(mutex_);
      if (connection && connection->IsOpen()) {
        idle_.push_back(std::move(connection));
      } else {
        --open_;
      }
    }
    freed_.notify_one();
  }

  store::ConnectionOptions options_;
  int size_;
  bool read_only_;
  std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<std::unique_ptr<store::Connection>> idle_;
  int open_ = 0;
};

struct Console::Request {
  const HttpRequest& http;
  bool api = false;
  std::optional<Session> session;
};

Console::Console(ConsoleOptions options)
    : options_(std::move(options)),
      pool_(std::make_unique<Pool>(options_.database, std::max(1, options_.connections),
                                   !options_.token.has_value())) {}

Console::~Console() = default;

void Console::Probe() {
  auto lease = pool_->Acquire();
  (**lease).Transact([](store::Tx& tx) { store::ListWorkers(tx, store::kWorkerLiveness, 1); });
}

bool Console::TokenMatches(const std::string& offered) const {
  return options_.token && !offered.empty() && SameSecret(offered, *options_.token);
}

std::optional<Console::Session> Console::FindSession(const HttpRequest& request) {
  const std::string id = CookieValue(request.Header("cookie"), kSessionCookie);
  if (id.empty()) return std::nullopt;
  std::lock_guard lock(sessions_mutex_);
  auto found = sessions_.find(id);
  if (found == sessions_.end()) return std::nullopt;
  if (found->second.expires < std::chrono::steady_clock::now()) {
    sessions_.erase(found);
    return std::nullopt;
  }
  return found->second;
}

std::string Console::NewSession() {
  std::string id = RandomHex(32);
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(sessions_mutex_);
  std::erase_if(sessions_, [&](const auto& entry) { return entry.second.expires < now; });
  if (sessions_.size() >= options_.max_sessions) {
    auto oldest = std::min_element(
        sessions_.begin(), sessions_.end(),
        [](const auto& a, const auto& b) { return a.second.expires < b.second.expires; });
    sessions_.erase(oldest);
  }
  sessions_[id] = {RandomHex(32), now + options_.session_lifetime};
  return id;
}

HttpResponse Console::Handle(const HttpRequest& http) {
  Request request{http, http.path.rfind("/api/", 0) == 0, FindSession(http)};
  HttpResponse response;
  auto problem = [&](int status, const std::string& message) {
    if (request.api) return JsonResponse(status, {{"error", message}, {"status", status}});
    PageContext context;
    context.actions_enabled = !read_only();
    context.signed_in = request.session.has_value();
    if (request.session) context.csrf = request.session->csrf;
    const std::string title = status == 404  ? "Not found"
                              : status < 500 ? "That did not work"
                                             : "The console has a problem";
    return HtmlResponse(status, RenderMessagePage(context, title, message, false, "/runs"));
  };
  try {
    response = Route(request);
  } catch (const HttpProblem& e) {
    response = problem(e.status, e.what());
  } catch (const Error& e) {
    switch (e.kind()) {
      case ErrorKind::kNotFound:
        response = problem(404, e.what());
        break;
      case ErrorKind::kInvalidArgument:
        response = problem(400, e.what());
        break;
      default:
        response =
            problem(503, std::string("the database did not answer as expected: ") + e.what());
    }
  } catch (const std::exception& e) {
    response = problem(500, e.what());
  }
  for (auto& header : SecurityHeaders()) response.headers.push_back(std::move(header));
  return response;
}

HttpResponse Console::Route(Request& request) {
  const HttpRequest& http = request.http;
  const std::string& path = http.path;
  const bool read = http.method == "GET" || http.method == "HEAD";
  if (path.rfind("/static/", 0) == 0 && read) {
    const std::string name = path.substr(8);
    for (const Asset& asset : Assets()) {
      if (asset.name != name) continue;
      const bool css = name.size() > 4 && name.compare(name.size() - 4, 4, ".css") == 0;
      return {200,
              css ? "text/css; charset=utf-8" : "text/javascript; charset=utf-8",
              std::string(asset.text),
              {}};
    }
    throw HttpProblem(404, "no static file " + name);
  }
  if (path == "/" && read) return Redirect("/runs");
  if (path == "/login") {
    if (read) {
      const Params params = ParsePairs(http.query, {"next"}, "login");
      PageContext context;
      context.actions_enabled = !read_only();
      context.signed_in = request.session.has_value();
      return HtmlResponse(
          200,
          RenderLoginPage(context, SafeNext(params.count("next") ? params.at("next") : ""), ""));
    }
    if (http.method == "POST") return Login(request);
  }
  if (path == "/logout" && http.method == "POST") return Logout(request);
  if (request.api && path.rfind("/api/v1/", 0) != 0) {
    throw HttpProblem(404, "no API at " + path + "; the API lives under /api/v1");
  }
  const std::string resource = request.api ? path.substr(std::string("/api/v1").size()) : path;
  if (read) return Page(request, resource);
  if (http.method == "POST") {
    return request.api ? ApiAction(request, resource) : FormAction(request, resource);
  }
  throw HttpProblem(405, "method " + http.method + " is not allowed here (GET, HEAD, POST)");
}

HttpResponse Console::Page(Request& request, const std::string& resource) {
  static const std::vector<std::string> kRunFilters = {
      "workflow",      "status",         "queue", "key_prefix",
      "created_after", "created_before", "limit", "cursor"};
  const std::string& query = request.http.query;
  std::string kind;
  std::string run_id;
  Params params;
  if (resource == "/runs") {
    kind = "runs";
    params = ParsePairs(query, kRunFilters, "runs");
  } else if (resource.rfind("/runs/", 0) == 0 && resource.find('/', 6) == std::string::npos) {
    kind = "run";
    run_id = CheckedRunId(resource.substr(6));
    params = ParsePairs(
        query, request.api ? std::vector<std::string>{"after"} : std::vector<std::string>{}, "run");
  } else if (resource == "/queues" || resource == "/workers" || resource == "/schedules" ||
             resource == "/definitions") {
    kind = resource.substr(1);
    params = ParsePairs(query, {}, kind);
  } else {
    throw HttpProblem(404, "no page at " + request.http.path);
  }
  auto lease = pool_->Acquire();
  auto [data, now] = (**lease).Transact([&](store::Tx& tx) {
    const std::string now = store::DatabaseNowPlus(tx, std::chrono::milliseconds(0));
    Json data = kind == "runs"        ? RunsData(tx, params)
                : kind == "run"       ? RunData(tx, run_id, params)
                : kind == "queues"    ? QueuesData(tx)
                : kind == "workers"   ? WorkersData(tx)
                : kind == "schedules" ? SchedulesData(tx)
                                      : DefinitionsData(tx);
    return std::make_pair(std::move(data), now);
  });
  data["now"] = now;
  if (request.api) return JsonResponse(200, data);
  PageContext context;
  context.now = now;
  context.actions_enabled = !read_only();
  context.signed_in = request.session.has_value();
  if (request.session) context.csrf = request.session->csrf;
  context.path = request.http.path + (query.empty() ? "" : "?" + query);
  std::string html = kind == "runs"        ? RenderRunsPage(data, context)
                     : kind == "run"       ? RenderRunPage(data, context)
                     : kind == "queues"    ? RenderQueuesPage(data, context)
                     : kind == "workers"   ? RenderWorkersPage(data, context)
                     : kind == "schedules" ? RenderSchedulesPage(data, context)
                                           : RenderDefinitionsPage(data, context);
  return HtmlResponse(200, std::move(html));
}

HttpResponse Console::Login(Request& request) {
  PageContext context;
  context.actions_enabled = !read_only();
  if (read_only()) throw HttpProblem(403, "this console is read-only: it has no access token");
  const Params form = ParsePairs(request.http.body, {"token", "next"}, "sign-in form");
  const std::string next = SafeNext(form.count("next") ? form.at("next") : "");
  if (!TokenMatches(form.count("token") ? form.at("token") : "")) {
    return HtmlResponse(401, RenderLoginPage(context, next, "That is not the access token."));
  }
  HttpResponse response = Redirect(next);
  response.headers.emplace_back(
      "Set-Cookie", std::string(kSessionCookie) + "=" + NewSession() +
                        "; Path=/; HttpOnly; SameSite=Strict; Max-Age=" +
                        std::to_string(std::chrono::seconds(options_.session_lifetime).count()));
  return response;
}

HttpResponse Console::Logout(Request& request) {
  const Params form = ParsePairs(request.http.body, {"csrf"}, "sign-out form");
  if (request.session && form.count("csrf") && SameSecret(form.at("csrf"), request.session->csrf)) {
    const std::string id = CookieValue(request.http.Header("cookie"), kSessionCookie);
    std::lock_guard lock(sessions_mutex_);
    sessions_.erase(id);
  }
  HttpResponse response = Redirect("/runs");
  response.headers.emplace_back(
      "Set-Cookie",
      std::string(kSessionCookie) + "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
  return response;
}

HttpResponse Console::FormAction(Request& request, const std::string& resource) {
  PageContext context;
  context.actions_enabled = !read_only();
  context.signed_in = request.session.has_value();
  if (request.session) context.csrf = request.session->csrf;
  if (read_only()) {
    throw HttpProblem(403,
                      "actions are off: this console was started without an access token "
                      "(--token-file or the console-token credential); nothing changed");
  }
  if (!request.session) {
    throw HttpProblem(401, "sign in with the access token first; nothing changed");
  }
  std::string run_id, action;
  if (resource == "/signal") {
    action = "signal";
  } else if (resource.rfind("/runs/", 0) == 0) {
    const size_t slash = resource.find('/', 6);
    if (slash != std::string::npos) {
      run_id = CheckedRunId(resource.substr(6, slash - 6));
      action = resource.substr(slash + 1);
    }
  }
  const std::vector<std::string> fields =
      action == "signal"   ? std::vector<std::string>{"csrf", "key", "payload", "run"}
      : action == "cancel" ? std::vector<std::string>{"csrf", "reason"}
      : action == "retry"  ? std::vector<std::string>{"csrf"}
                           : std::vector<std::string>{};
  if (fields.empty()) throw HttpProblem(404, "no action at " + request.http.path);
  const Params form = ParsePairs(request.http.body, fields, action + " form");
  if (!form.count("csrf") || !SameSecret(form.at("csrf"), request.session->csrf)) {
    throw HttpProblem(403,
                      "the form's CSRF token does not match your session: reload the page and "
                      "try again; nothing changed");
  }
  cli::ActionOutcome outcome;
  std::string back = run_id.empty() ? "/runs" : "/runs/" + run_id;
  if (action == "signal") {
    const std::string key = form.count("key") ? form.at("key") : "";
    ValidateKey("the correlation key", key);
    const Json payload =
        ParseJsonPayload("payload", form.count("payload") ? form.at("payload") : "");
    if (form.count("run") && !form.at("run").empty())
      back = "/runs/" + CheckedRunId(form.at("run"));
    auto lease = pool_->Acquire();
    outcome = cli::SignalWait(**lease, key, payload, std::chrono::hours(24), "24h");
  } else if (action == "cancel") {
    std::string reason = form.count("reason") ? form.at("reason") : "";
    if (reason.empty()) reason = "cancelled from the console";
    if (reason.size() > kMaxReasonBytes) {
      throw HttpProblem(400, "reason: longer than " + std::to_string(kMaxReasonBytes) + " bytes");
    }
    auto lease = pool_->Acquire();
    outcome = cli::CancelRunNow(**lease, run_id, reason);
  } else {
    auto lease = pool_->Acquire();
    outcome = cli::RetryRunNow(**lease, run_id);
  }
  return HtmlResponse(
      ActionStatus(outcome),
      RenderMessagePage(
          context, ActionTitle(outcome), outcome.message,
          outcome.exit_code == cli::kExitOk || outcome.exit_code == cli::kExitAlreadyDone, back));
}

HttpResponse Console::ApiAction(Request& request, const std::string& resource) {
  if (read_only()) {
    throw HttpProblem(403,
                      "actions are off: this console was started without an access token; "
                      "nothing changed");
  }
  const std::string authorization = request.http.Header("authorization");
  const bool bearer =
      authorization.rfind("Bearer ", 0) == 0 && TokenMatches(authorization.substr(7));
  const bool session =
      request.session && SameSecret(request.http.Header("x-csrf-token"), request.session->csrf);
  if (!bearer && !session) {
    throw HttpProblem(401,
                      "this needs the access token: send Authorization: Bearer <token> (or a "
                      "signed-in session with its X-CSRF-Token); nothing changed");
  }
  Json body = Json::object();
  if (!request.http.body.empty()) body = ParseJsonPayload("request body", request.http.body);
  if (!body.is_object()) throw HttpProblem(400, "request body: must be a JSON object");
  auto text = [&](const char* name, const std::string& fallback) {
    if (!body.contains(name)) return fallback;
    if (!body[name].is_string()) throw HttpProblem(400, std::string(name) + ": must be a string");
    return body[name].get<std::string>();
  };
  auto only = [&](const std::vector<std::string>& allowed) {
    for (const auto& [name, value] : body.items()) {
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        throw HttpProblem(400, "request body: unknown field \"" + name + "\"" +
                                   (allowed.empty() ? "" : "; it takes " + Join(allowed)));
      }
    }
  };
  cli::ActionOutcome outcome;
  if (resource == "/signals") {
    only({"key", "payload"});
    const std::string key = text("key", "");
    ValidateKey("key", key);
    const Json payload = body.contains("payload") ? body["payload"] : Json::object();
    auto lease = pool_->Acquire();
    outcome = cli::SignalWait(**lease, key, payload, std::chrono::hours(24), "24h");
  } else {
    const size_t slash = resource.find('/', 6);
    if (resource.rfind("/runs/", 0) != 0 || slash == std::string::npos) {
      throw HttpProblem(404, "no action at " + request.http.path);
    }
    const std::string run_id = CheckedRunId(resource.substr(6, slash - 6));
    const std::string action = resource.substr(slash + 1);
    if (action == "cancel") {
      only({"reason"});
      const std::string reason = text("reason", "cancelled through the console API");
      if (reason.size() > kMaxReasonBytes) {
        throw HttpProblem(400, "reason: longer than " + std::to_string(kMaxReasonBytes) + " bytes");
      }
      auto lease = pool_->Acquire();
      outcome = cli::CancelRunNow(**lease, run_id, reason);
    } else if (action == "retry") {
      only({});
      auto lease = pool_->Acquire();
      outcome = cli::RetryRunNow(**lease, run_id);
    } else {
      throw HttpProblem(404, "no action at " + request.http.path);
    }
  }
  return JsonResponse(ActionStatus(outcome), {{"outcome", outcome.outcome},
                                              {"message", outcome.message},
                                              {"exit_code", outcome.exit_code},
                                              {"done", outcome.done()}});
}

}  // namespace cairn::console
