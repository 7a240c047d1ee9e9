// See console.hpp. Each page is first built as JSON (what /api/v1 answers),
// then drawn as HTML from that JSON (console_html.cpp). Problems a client can
// fix (a bad filter, an unknown run, a bad payload) come back as 4xx with a
// sentence naming the problem, and change nothing.
#include "console.hpp"

#include <sys/random.h>

#include <algorithm>
#include <array>
#include <set>
#include <stdexcept>

#include "cli.hpp"
#include "console_assets.hpp"
#include "console_html.hpp"
#include "cron.hpp"
#include "identifier.hpp"
#include "json_payload.hpp"
#include "records_json.hpp"
#include "run_actions.hpp"
#include "schedule_service.hpp"
#include "store_console.hpp"
#include "store_schedules.hpp"

namespace cairn::console {

namespace {

constexpr const char* kSessionCookie = "cairn_console";
constexpr int kDefaultPageSize = 50;
// Status counts stop here ("10000+"): counting a million finished runs on
// every page view would cost more than the page.
constexpr int64_t kCountCap = 10000;
constexpr int kNextFiresShown = 5;
constexpr int kScheduleRunsShown = 5;
constexpr int kStrandedShown = 50;
constexpr size_t kMaxReasonBytes = 1000;
constexpr size_t kMaxFilterBytes = 512;
constexpr std::array<const char*, 8> kStatuses = {
    "ready",  "running",   "waiting",      "completed",
    "failed", "cancelled", "compensating", "compensation_failed"};

// A problem the client can fix: its HTTP status and what to say.
struct HttpProblem : std::runtime_error {
  int status;
  HttpProblem(int status_code, const std::string& message)
      : std::runtime_error(message), status(status_code) {}
};

template <class Items>
std::string Join(const Items& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

using Params = std::map<std::string, std::string>;

// name=value pairs of a query string or a form body, each name at most
// once and each one of `allowed`.
Params ParsePairs(std::string_view text, const std::vector<std::string>& allowed,
                  const std::string& what) {
  Params params;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('&', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view pair = text.substr(start, end - start);
    start = end + 1;
    if (pair.empty()) continue;
    const size_t equals = pair.find('=');
    std::string name, value;
    if (!UrlDecode(pair.substr(0, equals), name) ||
        (equals != std::string_view::npos && !UrlDecode(pair.substr(equals + 1), value))) {
      throw HttpProblem(400,
                        what + ": malformed percent-encoding in \"" + std::string(pair) + "\"");
    }
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      throw HttpProblem(
          400, what + ": unknown parameter \"" + name + "\"" +
                   (allowed.empty() ? "; this takes none" : "; this takes " + Join(allowed)));
    }
    if (params.count(name) != 0) {
      throw HttpProblem(400, what + ": parameter \"" + name + "\" is given twice");
    }
    params[name] = value;
  }
  return params;
}

std::optional<std::string> Given(const Params& params, const std::string& name) {
  auto found = params.find(name);
  if (found == params.end() || found->second.empty()) return std::nullopt;
  if (found->second.size() > kMaxFilterBytes) {
    throw HttpProblem(400, name + ": longer than " + std::to_string(kMaxFilterBytes) + " bytes");
  }
  return found->second;
}

int PageSize(const Params& params) {
  const auto text = Given(params, "limit");
  if (!text) return kDefaultPageSize;
  const bool digits = text->size() <= 4 && std::all_of(text->begin(), text->end(),
                                                       [](char c) { return c >= '0' && c <= '9'; });
  const int limit = digits ? std::stoi(*text) : 0;
  if (limit < 1 || limit > store::kMaxRunPage) {
    throw HttpProblem(400, "limit: \"" + *text + "\" is not a page size from 1 to " +
                               std::to_string(store::kMaxRunPage));
  }
  return limit;
}

std::string CheckedRunId(const std::string& id) {
  try {
    ValidateRunId(id);
  } catch (const InvalidArgumentError&) {
    throw HttpProblem(400, "\"" + id + "\" is not a run id (a UUID)");
  }
  return id;
}

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

Json RunsData(store::Tx& tx, const Params& params) {
  RunFilter filter;
  filter.workflow = Given(params, "workflow");
  filter.queue = Given(params, "queue");
  filter.key_prefix = Given(params, "key_prefix");
  if (const auto status = Given(params, "status")) {
    if (std::find(kStatuses.begin(), kStatuses.end(), *status) == kStatuses.end()) {
      throw HttpProblem(
          400, "status: \"" + *status + "\" is not a run status; use one of " + Join(kStatuses));
    }
    filter.status = ParseRunStatus(*status);
  }
  for (const char* name : {"created_after", "created_before"}) {
    const auto text = Given(params, name);
    if (!text) continue;
    std::string time;
    try {
      time = store::ReadDatabaseTime(tx, *text);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kInvalidArgument) throw;
      throw HttpProblem(400, std::string(name) + ": \"" + *text +
                                 R"(" is not a time (try "2026-12-01 09:30" or "yesterday"))");
    }
    (std::string_view(name) == "created_after" ? filter.created_after : filter.created_before) =
        time;
  }
  const int limit = PageSize(params);
  const auto cursor = Given(params, "cursor");
  Json counts = Json::object();
  for (const auto& [status, count] : store::CountRunsUpTo(tx, kCountCap)) {
    counts[std::string(ToString(status))] = count;
  }
  RunPage page;
  try {
    page = store::ListRunsNewestFirst(tx, filter, limit, cursor);
  } catch (const Error& e) {
    // The cursor is the only input left that the database can find wrong.
    if (e.kind() != ErrorKind::kInvalidArgument || !cursor) throw;
    throw HttpProblem(400, "cursor: \"" + cursor.value_or("") +
                               "\" is not a page cursor of this list (take next_cursor of a page)");
  }
  Json runs = Json::array();
  for (const auto& run : page.runs) runs.push_back(cli::RunToJson(run));
  Json given = Json::object();
  for (const auto& [name, value] : params) {
    if (!value.empty()) given[name] = value;
  }
  return {{"filter", given},
          {"counts", counts},
          {"counts_up_to", kCountCap},
          {"runs", runs},
          {"next_cursor", page.next_cursor ? Json(*page.next_cursor) : Json()}};
}

Json RunData(store::Tx& tx, const std::string& id, const Params& params) {
  int64_t after = 0;
  if (const auto text = Given(params, "after")) {
    const bool digits = text->size() <= 18 && std::all_of(text->begin(), text->end(), [](char c) {
                          return c >= '0' && c <= '9';
                        });
    if (!digits) throw HttpProblem(400, "after: \"" + *text + "\" is not a history position");
    after = std::stoll(*text);
  }
  const auto run = store::GetRun(tx, id);
  if (!run) throw HttpProblem(404, "run " + id + " does not exist");
  Json run_json = cli::RunToJson(*run);
  const auto error_code = store::RunErrorCode(tx, id);
  run_json["error_code"] = error_code ? Json(*error_code) : Json();
  Json waits = Json::array();
  for (const auto& wait : store::WaitsOfRun(tx, id)) waits.push_back(cli::WaitToJson(wait));
  const HistoryPage history = store::History(tx, id, after);
  Json events = Json::array();
  for (const auto& event : history.events) events.push_back(cli::EventToJson(event));
  Json children = Json::array();
  for (const auto& child : store::ChildrenOfRun(tx, id)) {
    children.push_back({{"id", child.id},
                        {"workflow", child.workflow},
                        {"status", std::string(ToString(child.status))},
                        {"created_at", child.created_at}});
  }
  Json parent;
  if (run->parent_run_id) {
    if (const auto found = store::GetRun(tx, *run->parent_run_id)) {
      parent = {{"id", found->id},
                {"workflow", found->workflow},
                {"status", std::string(ToString(found->status))}};
    }
  }
  return {{"run", run_json},
          {"error_code", run_json["error_code"]},
          {"waits", waits},
          {"events", events},
          {"next_position", history.next_position ? Json(*history.next_position) : Json()},
          {"children", children},
          {"parent", parent}};
}

Json QueuesData(store::Tx& tx) {
  std::map<std::string, Json> queues;
  auto queue = [&](const std::string& name) -> Json& {
    auto [it, inserted] = queues.try_emplace(name, Json::object());
    if (inserted) {
      it->second = {{"queue", name},
                    {"ready", 0},
                    {"delayed", 0},
                    {"running", 0},
                    {"waiting", 0},
                    {"compensating", 0},
                    {"compensation_failed", 0},
                    {"oldest_due_age_seconds", nullptr},
                    {"stranded", 0}};
    }
    return it->second;
  };
  for (const auto& row : store::ReadBacklog(tx)) {
    Json& q = queue(row.queue);
    q[row.state] = row.runs;
    if (row.oldest_due_age_seconds) {
      const double oldest = *row.oldest_due_age_seconds;
      if (q["oldest_due_age_seconds"].is_null() ||
          q["oldest_due_age_seconds"].get<double>() < oldest) {
        q["oldest_due_age_seconds"] = oldest;
      }
    }
  }
  for (const auto& [name, count] : store::CountStrandedRuns(tx, store::kWorkerLiveness)) {
    queue(name)["stranded"] = count;
  }
  Json list = Json::array();
  for (auto& [name, q] : queues) list.push_back(std::move(q));
  Json stranded = Json::array();
  for (const auto& run : store::StrandedRuns(tx, store::kWorkerLiveness, kStrandedShown)) {
    stranded.push_back(cli::RunToJson(run));
  }
  return {{"queues", list}, {"stranded", stranded}};
}

Json WorkersData(store::Tx& tx) {
  Json workers = Json::array();
  for (const auto& worker : store::ListWorkers(tx)) workers.push_back(cli::WorkerToJson(worker));
  return {{"workers", workers}};
}

Json SchedulesData(store::Tx& tx) {
  Json schedules = Json::array();
  for (const auto& schedule : store::ListSchedules(tx)) {
    Json item = cli::ScheduleToJson(schedule);
    Json fires = Json::array();
    const auto next = schedule.next_fire_at ? ParseTimestamp(*schedule.next_fire_at) : std::nullopt;
    if (schedule.enabled && next) {
      try {
        const CronSchedule cron = CronSchedule::Parse(schedule.cron);
        CronTime at{std::chrono::seconds(*next / 1'000'000)};
        for (int i = 0; i < kNextFiresShown; ++i) {
          fires.push_back(FormatUtc(at));
          at = cron.NextAfter(at);
        }
      } catch (const InvalidArgumentError&) {
        // A cron this build cannot read: the stored next fire time is all we know.
        fires.push_back(*schedule.next_fire_at);
      }
    }
    item["next_fires"] = fires;
    RunFilter filter;
    filter.workflow = schedule.workflow;
    filter.key_prefix = ScheduleRunKeyPrefix(schedule.name);
    Json runs = Json::array();
    for (const auto& run : store::ListRunsNewestFirst(tx, filter, kScheduleRunsShown).runs) {
      runs.push_back({{"id", run.id},
                      {"status", std::string(ToString(run.status))},
                      {"key", run.key ? Json(*run.key) : Json()},
                      {"created_at", run.created_at}});
    }
    item["last_runs"] = runs;
    schedules.push_back(std::move(item));
  }
  return {{"schedules", schedules}};
}

Json DefinitionsData(store::Tx& tx) {
  Json definitions = Json::array();
  for (const auto& d : store::ListDefinitionUse(tx)) {
    Json steps = Json::array();
    if (d.definition.contains("steps") && d.definition["steps"].is_array()) {
      for (const auto& step : d.definition["steps"]) steps.push_back(step.value("name", ""));
    }
    definitions.push_back({{"hash", d.hash},
                           {"workflow", d.workflow},
                           {"version", d.version},
                           {"first_step", d.first_step},
                           {"steps", steps},
                           {"registered_at", d.registered_at},
                           {"pinned_unfinished", d.pinned}});
  }
  return {{"definitions", definitions}};
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
