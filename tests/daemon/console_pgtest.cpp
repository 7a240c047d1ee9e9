// The web console's JSON API and its safety, against a real `cairn console`
// of the built binary and the harness's PostgreSQL: every filter of the runs
// list, keyset pagination, every bad input (400 naming the problem, 404 for
// an unknown run, 413 for an oversized body), the access token, sign-in and
// CSRF on actions, escaping and the security headers, a read-only database
// role, and idle connections.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "console_support.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

const std::string kToken = "console-test-token-0123456789abcdef";

// Percent-encoding of a query value (a page cursor holds spaces and '+').
std::string EncodeForTest(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_') {
      out += static_cast<char>(c);
    } else {
      char escaped[4];
      std::snprintf(escaped, sizeof escaped, "%%%02X", c);
      out += escaped;
    }
  }
  return out;
}

class ConsoleApi : public StoreTest {
 protected:
  std::unique_ptr<ConsoleProcess> StartConsole(const std::optional<std::string>& token,
                                               const std::string& database_url = "") {
    auto console = std::make_unique<ConsoleProcess>(database_url.empty() ? url() : database_url,
                                                    schema(), token);
    EXPECT_TRUE(console->WaitServing()) << console->process().Log();
    return console;
  }

  static Json Body(const HttpResult& result) {
    return Json::parse(result.body, nullptr, /*allow_exceptions=*/false);
  }

  static std::vector<std::string> Ids(const Json& page) {
    std::vector<std::string> ids;
    for (const auto& run : page["runs"]) ids.push_back(run["id"].get<std::string>());
    return ids;
  }

  // A run with the given workflow, queue, key and status, created at `created`.
  std::string Seed(const std::string& workflow, const std::string& queue,
                   const std::optional<std::string>& key, const std::string& status,
                   const std::string& created) {
    NewRun run = MakeRun(workflow, key);
    run.queue = queue;
    const std::string id = CreateRun(run).id;
    Sql("UPDATE {s}.runs SET created_at = '" + created + "', status = '" + status +
        "', finished_at = CASE WHEN '" + status +
        "' IN ('completed', 'failed', 'cancelled', 'compensation_failed') THEN now() END WHERE "
        "id = '" +
        id + "'");
    return id;
  }
};

TEST_F(ConsoleApi, EveryRunsFilterNarrowsTheList) {
  const std::string a = Seed("orders", "default", "order-1", "completed", "2026-01-01 10:00+00");
  const std::string b = Seed("orders", "bulk", "order-2", "failed", "2026-01-02 10:00+00");
  const std::string c = Seed("billing", "default", "invoice-1", "ready", "2026-01-03 10:00+00");
  const std::string d = Seed("billing", "bulk", std::nullopt, "failed", "2026-01-04 10:00+00");
  auto console = StartConsole(std::nullopt);
  auto ids = [&](const std::string& query) {
    const HttpResult result = console->Get("/api/v1/runs" + query);
    EXPECT_EQ(result.status, 200) << query << ": " << result.body;
    return Ids(Body(result));
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(ids(""), (V{d, c, b, a}));  // newest first
  EXPECT_EQ(ids("?workflow=orders"), (V{b, a}));
  EXPECT_EQ(ids("?status=failed"), (V{d, b}));
  EXPECT_EQ(ids("?queue=bulk"), (V{d, b}));
  EXPECT_EQ(ids("?key_prefix=order-"), (V{b, a}));
  EXPECT_EQ(ids("?created_after=2026-01-02%2010:00"), (V{d, c, b}));
  EXPECT_EQ(ids("?created_before=2026-01-02T10:00:00Z"), (V{a}));
  EXPECT_EQ(ids("?workflow=billing&status=failed&queue=bulk"), (V{d}));
  EXPECT_EQ(ids("?workflow=nothing"), V{});
  // Status counts cover the whole table.
  const Json page = Body(console->Get("/api/v1/runs?workflow=orders"));
  EXPECT_EQ(page["counts"]["failed"], 2);
  EXPECT_EQ(page["counts"]["ready"], 1);
  EXPECT_EQ(page["counts"]["waiting"], 0);
  EXPECT_EQ(page["filter"]["workflow"], "orders");
  // The HTML page takes the same filters and shows what they keep.
  const HttpResult html = console->Get("/runs?workflow=billing");
  EXPECT_EQ(html.status, 200);
  // A run's label is its id's random end (ids start with their time).
  EXPECT_NE(html.body.find(c.substr(c.size() - 8)), std::string::npos);
  EXPECT_EQ(html.body.find(a.substr(a.size() - 8)), std::string::npos);
}

TEST_F(ConsoleApi, PagesWalkEveryRunOnceNewestFirst) {
  // 120 runs in 7 distinct creation times: the id breaks ties.
  Sql("INSERT INTO {s}.runs (workflow, definition_version, definition_hash, status, finished_at, "
      "created_at) SELECT 'bulk', 1, 'h', 'completed', now(), "
      "'2026-02-01 00:00+00'::timestamptz + (g % 7) * interval '1 minute' "
      "FROM generate_series(1, 120) g");
  auto console = StartConsole(std::nullopt);
  std::vector<std::string> seen;
  std::string next;
  int pages = 0;
  do {
    const HttpResult result = console->Get("/api/v1/runs?limit=50" +
                                           (next.empty() ? "" : "&cursor=" + EncodeForTest(next)));
    ASSERT_EQ(result.status, 200) << result.body;
    const Json page = Body(result);
    for (const auto& id : Ids(page)) seen.push_back(id);
    next = page["next_cursor"].is_string() ? page["next_cursor"].get<std::string>() : "";
    ++pages;
  } while (!next.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen.size(), 120u);
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), 120u);
  EXPECT_EQ(Sql("SELECT string_agg(id::text, ',' ORDER BY created_at DESC, id DESC) FROM {s}.runs"),
            [&] {
              std::string joined;
              for (const auto& id : seen) joined += (joined.empty() ? "" : ",") + id;
              return joined;
            }());
}

TEST_F(ConsoleApi, ABadFilterIs400NamingTheProblem) {
  auto console = StartConsole(std::nullopt);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"?status=sleeping", "status: \"sleeping\" is not a run status"},
      {"?limit=0", "limit: \"0\" is not a page size from 1 to 200"},
      {"?limit=201", "limit: \"201\""},
      {"?limit=ten", "limit: \"ten\""},
      {"?created_after=someday", "created_after: \"someday\" is not a time"},
      {"?created_before=2026-13-45", "created_before: \"2026-13-45\" is not a time"},
      {"?cursor=garbage", "cursor: \"garbage\" is not a page cursor"},
      {"?cursor=2026-01-01%7Cnot-a-uuid", "cursor: "},
      {"?colour=red", "unknown parameter \"colour\"; this takes workflow, status, queue"},
      {"?status=ready&status=failed", "parameter \"status\" is given twice"},
      {"?workflow=%zz", "malformed percent-encoding"},
  };
  for (const auto& [query, message] : cases) {
    const HttpResult result = console->Get("/api/v1/runs" + query);
    EXPECT_EQ(result.status, 400) << query;
    const Json body = Body(result);
    EXPECT_NE(body.value("error", "").find(message), std::string::npos)
        << query << " answered " << result.body;
    // The page says the same in HTML.
    const HttpResult page = console->Get("/runs" + query);
    EXPECT_EQ(page.status, 400) << query;
    EXPECT_NE(page.headers.find("text/html"), std::string::npos);
  }
  EXPECT_EQ(console->Get("/api/v1/queues?x=1").status, 400);
  EXPECT_EQ(console->Get("/api/v1/nothing").status, 404);
  EXPECT_EQ(console->Get("/nothing").status, 404);
  EXPECT_EQ(console->Get("/static/missing.js").status, 404);
  EXPECT_EQ(HttpSend(console->port(), "PUT", "/api/v1/runs").status, 405);
}

TEST_F(ConsoleApi, AnUnknownRunIs404AndAMalformedIdIs400) {
  auto console = StartConsole(std::nullopt);
  const std::string unknown = "00000000-0000-4000-8000-000000000001";
  HttpResult result = console->Get("/api/v1/runs/" + unknown);
  EXPECT_EQ(result.status, 404);
  EXPECT_EQ(Body(result)["error"], "run " + unknown + " does not exist");
  EXPECT_EQ(console->Get("/runs/" + unknown).status, 404);
  result = console->Get("/api/v1/runs/not-a-run");
  EXPECT_EQ(result.status, 400);
  EXPECT_EQ(Body(result)["error"], "\"not-a-run\" is not a run id (a UUID)");
  const std::string id = CreateRun().id;
  EXPECT_EQ(console->Get("/api/v1/runs/" + id + "?after=x").status, 400);
  EXPECT_EQ(console->Get("/api/v1/runs/" + id + "?page=2").status, 400);
}

TEST_F(ConsoleApi, ARunShowsItsWaitsHistoryParentAndChildren) {
  const cairn::Run parent = CreateRun("orders", "parent-1");
  NewRun child_run = MakeRun("shipping");
  child_run.parent_run_id = parent.id;
  const cairn::Run child = CreateRun(child_run);
  SaveWait(parent.id, "payment:P-1", 60000);
  conn().Transact([&](store::Tx& tx) {
    store::AppendEvents(
        tx, {{0, parent.id, "reserve", 1, "step_committed", std::nullopt, std::nullopt, ""},
             {0, parent.id, "reserve", 1, "context", "stock", Json(3), ""}});
  });
  auto console = StartConsole(std::nullopt);
  const HttpResult result = console->Get("/api/v1/runs/" + parent.id);
  ASSERT_EQ(result.status, 200) << result.body;
  const Json page = Body(result);
  EXPECT_EQ(page["run"]["id"], parent.id);
  EXPECT_EQ(page["run"]["key"], "parent-1");
  EXPECT_EQ(page["run"]["definition_hash"], "hash-1");
  EXPECT_EQ(page["waits"].size(), 1u);
  EXPECT_EQ(page["waits"][0]["correlation_key"], "payment:P-1");
  EXPECT_TRUE(page["waits"][0]["expires_at"].is_string());
  ASSERT_EQ(page["events"].size(), 2u);
  EXPECT_EQ(page["events"][0]["kind"], "step_committed");
  EXPECT_EQ(page["events"][1]["field"], "stock");
  ASSERT_EQ(page["children"].size(), 1u);
  EXPECT_EQ(page["children"][0]["id"], child.id);
  EXPECT_TRUE(page["parent"].is_null());
  const Json of_child = Body(console->Get("/api/v1/runs/" + child.id));
  EXPECT_EQ(of_child["parent"]["id"], parent.id);
  // History pages on with ?after=.
  const int64_t first = page["events"][0]["position"];
  EXPECT_EQ(
      Body(console->Get("/api/v1/runs/" + parent.id + "?after=" + std::to_string(first)))["events"]
          .size(),
      1u);
  // The HTML page links the family both ways.
  const HttpResult html = console->Get("/runs/" + parent.id);
  EXPECT_NE(html.body.find("href=\"/runs/" + child.id + "\""), std::string::npos);
  EXPECT_NE(html.body.find("payment:P-1"), std::string::npos);
}

TEST_F(ConsoleApi, EveryOtherPageHasAJsonTwin) {
  CreateRun();
  const std::string finished = CreateRun().id;
  Sql("UPDATE {s}.runs SET status = 'completed', finished_at = now() WHERE id = '" + finished +
      "'");
  Sql("INSERT INTO {s}.workflow_definitions (hash, workflow, version, first_step, definition) "
      "VALUES ('hash-1', 'orders', 1, 'reserve', '{\"steps\": [{\"name\": \"reserve\"}, "
      "{\"name\": \"ship\"}]}')");
  auto console = StartConsole(std::nullopt);
  for (const std::string page : {"queues", "workers", "schedules", "definitions"}) {
    const HttpResult api = console->Get("/api/v1/" + page);
    EXPECT_EQ(api.status, 200) << page << ": " << api.body;
    EXPECT_TRUE(Body(api).contains(page == "queues" ? "queues" : page)) << api.body;
    const HttpResult html = console->Get("/" + page);
    EXPECT_EQ(html.status, 200) << page;
  }
  const Json queues = Body(console->Get("/api/v1/queues"));
  ASSERT_EQ(queues["queues"].size(), 1u);
  EXPECT_EQ(queues["queues"][0]["queue"], "default");
  EXPECT_EQ(queues["queues"][0]["ready"], 1);
  // No live worker serves hash-1: the run is stranded.
  EXPECT_EQ(queues["queues"][0]["stranded"], 1);
  EXPECT_EQ(queues["stranded"].size(), 1u);
  // The definition with the unfinished run pinned to it (not the finished one).
  const Json definitions = Body(console->Get("/api/v1/definitions"));
  ASSERT_EQ(definitions["definitions"].size(), 1u);
  EXPECT_EQ(definitions["definitions"][0]["hash"], "hash-1");
  EXPECT_EQ(definitions["definitions"][0]["steps"], Json::array({"reserve", "ship"}));
  EXPECT_EQ(definitions["definitions"][0]["pinned_unfinished"], 1);
  // A schedule: its next fire times from its cron, its last runs by their tick keys.
  Sql("INSERT INTO {s}.schedules (name, workflow, cron, next_fire_at) VALUES "
      "('nightly', 'orders', '0 3 * * *', '2026-12-02 03:00+00')");
  const std::string tick = CreateRun("orders", "schedule:nightly:2026-12-01T03:00:00Z").id;
  CreateRun("orders", "schedule:nightly-other:2026-12-01T03:00:00Z");
  const Json schedules = Body(console->Get("/api/v1/schedules"));
  ASSERT_EQ(schedules["schedules"].size(), 1u);
  const Json& nightly = schedules["schedules"][0];
  EXPECT_EQ(nightly["next_fires"],
            Json::array({"2026-12-02T03:00:00Z", "2026-12-03T03:00:00Z", "2026-12-04T03:00:00Z",
                         "2026-12-05T03:00:00Z", "2026-12-06T03:00:00Z"}));
  ASSERT_EQ(nightly["last_runs"].size(), 1u);
  EXPECT_EQ(nightly["last_runs"][0]["id"], tick);
}

TEST_F(ConsoleApi, HostileDataRendersInertBehindAStrictPolicy) {
  const std::string hostile = "<script>alert(\"k\")</script>'\x01\u202E";
  NewRun run = MakeRun("orders", hostile);
  run.input = {{"note", "<script>alert(1)</script>"}, {"<img src=x onerror=alert(3)>", 1}};
  const std::string id = CreateRun(run).id;
  Sql("UPDATE {s}.runs SET status = 'failed', finished_at = now(), error = "
      "E'<script>alert(2)</script>\"\\x07 & done' WHERE id = '" +
      id + "'");
  auto console = StartConsole(kToken);
  for (const std::string& path :
       std::vector<std::string>{"/runs/" + id, "/runs", "/runs?key_prefix=%3Cscript"}) {
    const HttpResult html = console->Get(path);
    ASSERT_EQ(html.status, 200) << path;
    EXPECT_EQ(html.body.find("<script>alert"), std::string::npos) << path;
    EXPECT_EQ(html.body.find("<img src=x"), std::string::npos) << path;
    EXPECT_EQ(html.body.find('\x01'), std::string::npos) << path;
    EXPECT_EQ(html.body.find('\x07'), std::string::npos) << path;
    // The only script is the console's own file.
    EXPECT_EQ(std::regex_search(html.body, std::regex("<script(?! src=\"/static/console.js\")")),
              false)
        << path;
  }
  const HttpResult html = console->Get("/runs/" + id);
  EXPECT_NE(html.body.find("&lt;script&gt;alert(&quot;k&quot;)&lt;/script&gt;&#39;\\x01\\u202e"),
            std::string::npos)
      << html.body;
  EXPECT_NE(html.body.find("&lt;script&gt;alert(2)&lt;/script&gt;&quot;\\x07 &amp; done"),
            std::string::npos);
  for (const std::string path : {"/runs", "/api/v1/runs", "/login", "/nothing"}) {
    const HttpResult result = console->Get(path);
    const std::string csp = result.Header("Content-Security-Policy");
    EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << path;
    EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << path;
    EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos) << path;
    EXPECT_EQ(result.Header("X-Content-Type-Options"), "nosniff") << path;
  }
  // The API keeps the data as data.
  EXPECT_EQ(Body(console->Get("/api/v1/runs/" + id))["run"]["key"], hostile);
}

TEST_F(ConsoleApi, WithoutATokenEveryActionIsRefusedAndNothingChanges) {
  const cairn::Run run = CreateRun();
  SaveWait(run.id, "payment:RO-1");
  auto console = StartConsole(std::nullopt);
  const std::vector<std::pair<std::string, std::string>> actions = {
      {"/api/v1/runs/" + run.id + "/cancel", "{}"},
      {"/api/v1/signals", R"({"key": "payment:RO-1"})"},
      {"/runs/" + run.id + "/cancel", "csrf=x&reason=r"},
      {"/signal", "csrf=x&key=payment:RO-1&payload=%7B%7D"}};
  for (const auto& [path, body] : actions) {
    const HttpResult result = console->Post(path, body, {"Authorization: Bearer " + kToken});
    EXPECT_EQ(result.status, 403) << path;
    EXPECT_NE(result.body.find("actions are off"), std::string::npos) << result.body;
  }
  EXPECT_EQ(RunColumn(run.id, "status"), "ready");
  EXPECT_EQ(Sql("SELECT status FROM {s}.wait_records WHERE correlation_key = 'payment:RO-1'"),
            "WAITING");
  // No form offers what is refused.
  EXPECT_EQ(console->Get("/runs/" + run.id).body.find("<form class=\"action"), std::string::npos);
}

TEST_F(ConsoleApi, ApiActionsNeedTheTokenAndSayWhatHappened) {
  const cairn::Run run = CreateRun();
  const cairn::Run waiting = CreateRun();
  SaveWait(waiting.id, "payment:API-1");
  auto console = StartConsole(kToken);
  const std::string cancel = "/api/v1/runs/" + run.id + "/cancel";
  HttpResult result = console->Post(cancel, R"({"reason": "test"})");
  EXPECT_EQ(result.status, 401);
  result = console->Post(cancel, R"({"reason": "test"})", {"Authorization: Bearer wrong-token"});
  EXPECT_EQ(result.status, 401);
  EXPECT_EQ(RunColumn(run.id, "status"), "ready");
  // Bad bodies change nothing.
  const std::string bearer = "Authorization: Bearer " + kToken;
  EXPECT_EQ(console->Post(cancel, "{not json", {bearer}).status, 400);
  EXPECT_EQ(console->Post(cancel, R"({"why": "x"})", {bearer}).status, 400);
  EXPECT_EQ(console->Post(cancel, R"({"reason": 7})", {bearer}).status, 400);
  EXPECT_EQ(RunColumn(run.id, "status"), "ready");
  result = console->Post(cancel, R"({"reason": "test"})", {bearer});
  EXPECT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(Body(result)["outcome"], "cancelled");
  EXPECT_EQ(RunColumn(run.id, "status"), "cancelled");
  EXPECT_EQ(RunColumn(run.id, "cancel_reason"), "test");
  result = console->Post(cancel, "{}", {bearer});
  EXPECT_EQ(Body(result)["outcome"], "already_finished");
  // Signals, in words.
  const std::string signal = "/api/v1/signals";
  EXPECT_EQ(console->Post(signal, R"({"key": ""})", {bearer}).status, 400);
  result = console->Post(signal, R"({"key": "payment:API-1", "payload": {"ref": 1}})", {bearer});
  EXPECT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(Body(result)["outcome"], "delivered");
  result = console->Post(signal, R"({"key": "payment:API-1"})", {bearer});
  EXPECT_EQ(Body(result)["outcome"], "already_delivered");
  result = console->Post(signal, R"({"key": "payment:nobody"})", {bearer});
  EXPECT_EQ(result.status, 202);
  EXPECT_EQ(Body(result)["outcome"], "stored");
  // Retry of a run that did not fail.
  result = console->Post("/api/v1/runs/" + waiting.id + "/retry", "", {bearer});
  EXPECT_EQ(result.status, 409);
  EXPECT_EQ(Body(result)["outcome"], "not_failed");
  EXPECT_EQ(
      console->Post("/api/v1/runs/00000000-0000-4000-8000-000000000009/retry", "", {bearer}).status,
      404);
}

TEST_F(ConsoleApi, FormActionsNeedASignedInSessionAndItsCsrfToken) {
  const cairn::Run run = CreateRun();
  auto console = StartConsole(kToken);
  const std::string cancel = "/runs/" + run.id + "/cancel";
  const std::string form = "application/x-www-form-urlencoded";
  // Not signed in.
  HttpResult result = console->Post(cancel, "csrf=&reason=x", {"Content-Type: " + form});
  EXPECT_EQ(result.status, 401);
  EXPECT_EQ(RunColumn(run.id, "status"), "ready");
  // A wrong token does not sign in.
  result = console->Post("/login", "token=wrong&next=%2Fruns", {"Content-Type: " + form});
  EXPECT_EQ(result.status, 401);
  EXPECT_EQ(result.Header("Set-Cookie"), "");
  result = console->Post("/login", "token=" + kToken + "&next=%2F%2Fevil.example",
                         {"Content-Type: " + form});
  ASSERT_EQ(result.status, 303);
  EXPECT_EQ(result.Header("Location"), "/runs");  // never away from the console
  const std::string set_cookie = result.Header("Set-Cookie");
  EXPECT_NE(set_cookie.find("HttpOnly"), std::string::npos);
  EXPECT_NE(set_cookie.find("SameSite=Strict"), std::string::npos);
  const std::string cookie = "Cookie: " + set_cookie.substr(0, set_cookie.find(';'));
  // Signed in, but without the page's CSRF token.
  result = console->Post(cancel, "csrf=forged&reason=x", {cookie});
  EXPECT_EQ(result.status, 403);
  EXPECT_NE(result.body.find("CSRF"), std::string::npos);
  EXPECT_EQ(RunColumn(run.id, "status"), "ready");
  // With the token of the page's form.
  const std::string page = console->Get("/runs/" + run.id, {cookie}).body;
  std::smatch found;
  ASSERT_TRUE(std::regex_search(page, found, std::regex("name=\"csrf\" value=\"([0-9a-f]{64})\"")));
  result = console->Post(cancel, "csrf=" + found[1].str() + "&reason=from+a+form", {cookie});
  EXPECT_EQ(result.status, 200) << result.body;
  EXPECT_NE(result.body.find("cancelled (0 waits cancelled)"), std::string::npos);
  EXPECT_EQ(RunColumn(run.id, "cancel_reason"), "from a form");
  // A payload that is not JSON changes nothing.
  const cairn::Run waiting = CreateRun();
  SaveWait(waiting.id, "payment:FORM-1");
  result = console->Post(
      "/signal", "csrf=" + found[1].str() + "&key=payment%3AFORM-1&payload=%7Bnope", {cookie});
  EXPECT_EQ(result.status, 400);
  EXPECT_NE(result.body.find("payload"), std::string::npos);
  EXPECT_EQ(Sql("SELECT status FROM {s}.wait_records WHERE correlation_key = 'payment:FORM-1'"),
            "WAITING");
}

TEST_F(ConsoleApi, AnOversizedBodyIsRefusedUnread) {
  auto console = StartConsole(kToken);
  const std::string huge(4 * 1024 * 1024, 'x');
  const HttpResult result = console->Post("/api/v1/signals", huge);
  EXPECT_EQ(result.status, 413);
  EXPECT_NE(result.body.find("over the limit"), std::string::npos);
  EXPECT_EQ(console->Get("/api/v1/runs").status, 200);
}

TEST_F(ConsoleApi, AReadOnlyConsoleServesEveryPageWithARoleThatCannotWrite) {
  const cairn::Run run = CreateRun();
  SaveWait(run.id, "payment:RO-2");
  const std::string role = schema() + "_reader";
  Sql("CREATE ROLE " + role + " LOGIN; GRANT USAGE ON SCHEMA {s} TO " + role +
      "; GRANT SELECT ON ALL TABLES IN SCHEMA {s} TO " + role);
  std::string reader_url = url();
  const auto at = reader_url.find("://");
  const auto user_end = reader_url.find('@', at);
  ASSERT_NE(user_end, std::string::npos) << reader_url;
  reader_url = reader_url.substr(0, at + 3) + role + reader_url.substr(user_end);
  {
    auto console = StartConsole(std::nullopt, reader_url);
    for (const std::string& path : std::vector<std::string>{
             "/runs", "/runs/" + run.id, "/queues", "/workers", "/schedules", "/definitions",
             "/api/v1/runs?status=ready", "/api/v1/runs/" + run.id, "/api/v1/queues",
             "/api/v1/workers", "/api/v1/schedules", "/api/v1/definitions", "/login"}) {
      const HttpResult result = console->Get(path);
      EXPECT_EQ(result.status, 200) << path << ": " << result.body;
    }
  }
  Sql("REVOKE ALL ON ALL TABLES IN SCHEMA {s} FROM " + role + "; REVOKE ALL ON SCHEMA {s} FROM " +
      role + "; DROP ROLE " + role);
}

TEST_F(ConsoleApi, ManyIdleConnectionsDoNotBlockARequest) {
  auto console = StartConsole(std::nullopt);
  std::vector<int> idle;
  for (int i = 0; i < 40; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(console->port());
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    idle.push_back(fd);
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(console->Get("/api/v1/runs").status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  for (int fd : idle) ::close(fd);
}

}  // namespace
}  // namespace cairn::test
