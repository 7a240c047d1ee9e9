// See console_html.hpp. Pages are plain HTML5 that works without
// JavaScript: filters are GET forms (so every view is a shareable URL), the
// JSON tree is nested <details>, actions are POST forms. console.js only
// adds to it (live relative times, payload validation before sending).
#include "console_html.hpp"

#include "console_markup.hpp"

namespace cairn::console {

using namespace std::string_literals;

std::string RenderRunsPage(const Json& data, const PageContext& context) {
  const Json& filter = data["filter"];
  auto value = [&](const char* name) { return Str(filter.value(name, Json())); };
  std::string body = R"(<h1>Runs</h1><ul class="counts" aria-label="runs by status">)";
  const int64_t cap = data.value("counts_up_to", int64_t{0});
  for (const auto& [status, count] : data["counts"].items()) {
    const bool current = value("status") == status;
    const int64_t n = count.get<int64_t>();
    body += std::string("<li") + (current ? " class=\"current\"" : "") + "><a href=\"/runs" +
            Text(QueryString({{"status", status}})) + "\">" + StatusBadge(status) + " <strong>" +
            std::to_string(n) + (cap > 0 && n >= cap ? "+" : "") + "</strong></a></li>";
  }
  body += "</ul>";
  body +=
      "<form class=\"filters\" method=\"get\" action=\"/runs\" role=\"search\">"
      "<label>Workflow <input name=\"workflow\" value=\"" +
      Text(value("workflow")) +
      "\"></label>"
      "<label>Status <select name=\"status\"><option value=\"\">any</option>";
  for (const char* s : {"ready", "running", "waiting", "completed", "failed", "cancelled",
                        "compensating", "compensation_failed"}) {
    body +=
        "<option" + std::string(value("status") == s ? " selected" : "") + ">" + s + "</option>";
  }
  body += R"(</select></label><label>Queue <input name="queue" value=")" + Text(value("queue")) +
          R"("></label><label>Key prefix <input name="key_prefix" value=")" +
          Text(value("key_prefix")) +
          "\"></label><label>Created after <input name=\"created_after\" placeholder=\"2026-12-01 "
          "09:00\" value=\"" +
          Text(value("created_after")) +
          R"("></label><label>Created before <input name="created_before" value=")" +
          Text(value("created_before")) + R"("></label><button type="submit">Filter</button> )" +
          Link("/runs", "Clear") + "</form>";
  std::vector<std::vector<std::string>> rows;
  for (const auto& run : data["runs"]) {
    rows.push_back({RunLink(Str(run["id"]), ShortId(Str(run["id"]))),
                    Text(Str(run["workflow"])) + " <span class=\"muted\">v" +
                        Str(run["definition_version"]) + "</span>",
                    StatusBadge(Str(run["status"])), Text(Str(run["queue"])),
                    Text(Str(run["cursor"])), Text(Str(run["attempt"])),
                    "<span class=\"key\">" + Text(Str(run["key"])) + "</span>",
                    TimeTag(run["created_at"], context)});
  }
  body += Table({"Run", "Workflow", "Status", "Queue", "Step", "Attempt", "Key", "Created"}, rows,
                "No runs match these filters.", "runs");
  // The same filters on every page link: a page is a shareable URL.
  std::vector<std::pair<std::string, std::string>> same = {
      {"workflow", value("workflow")},
      {"status", value("status")},
      {"queue", value("queue")},
      {"key_prefix", value("key_prefix")},
      {"created_after", value("created_after")},
      {"created_before", value("created_before")},
      {"limit", value("limit")}};
  body += "<nav class=\"pages\">";
  if (!value("cursor").empty()) body += Link("/runs" + QueryString(same), "\u21E4 Newest");
  if (data["next_cursor"].is_string()) {
    same.emplace_back("cursor", Str(data["next_cursor"]));
    body += Link("/runs" + QueryString(same), "Older \u2192", "next");
  }
  body += "</nav>";
  return Layout(context, "Runs", "/runs", body);
}

std::string RenderRunPage(const Json& data, const PageContext& context) {
  const Json& run = data["run"];
  const std::string id = Str(run["id"]);
  const std::string status = Str(run["status"]);
  std::string body = "<h1>Run <span class=\"mono\">" + Text(id) + "</span></h1>";
  body += "<p class=\"lead\">" + StatusBadge(status) + " " + Text(Str(run["workflow"])) +
          " <span class=\"muted\">v" + Str(run["definition_version"]) + "</span></p>";
  auto row = [](const std::string& name, const std::string& html) {
    return "<dt>" + Text(name) + "</dt><dd>" + html + "</dd>";
  };
  body += R"(<section class="grid"><dl class="facts">)";
  body += row("Definition", "version " + Text(Str(run["definition_version"])) +
                                ", hash <span class=\"mono\">" + Text(Str(run["definition_hash"])) +
                                "</span>");
  body +=
      row("Key", run["key"].is_null() ? "<span class=\"muted\">none</span>"
                                      : "<span class=\"key\">" + Text(Str(run["key"])) + "</span>");
  body += row("Queue", Text(Str(run["queue"])) + " <span class=\"muted\">priority " +
                           Str(run["priority"]) + "</span>");
  body += row("Namespace", Text(Str(run["namespace"])));
  body += row("Step", Text(Str(run["cursor"])) + " <span class=\"muted\">attempt " +
                          Str(run["attempt"]) + "</span>");
  body += row("Created", TimeTag(run["created_at"], context, true));
  body += row("Updated", TimeTag(run["updated_at"], context, true));
  body += row("Due", TimeTag(run["run_at"], context, true));
  if (!run["finished_at"].is_null())
    body += row("Finished", TimeTag(run["finished_at"], context, true));
  if (!run["deadline_at"].is_null())
    body += row("Deadline", TimeTag(run["deadline_at"], context, true));
  if (!run["lease_owner"].is_null()) {
    body += row("Lease", Text(Str(run["lease_owner"])) + " until " +
                             TimeTag(run["lease_expires_at"], context));
  }
  if (!run["cancel_reason"].is_null())
    body += row("Cancel reason", Text(Str(run["cancel_reason"])));
  body += "</dl>";

  // Parent and children, as a tree linking to each run.
  body += R"(<div class="family"><h2>Family</h2><ul class="family-tree">)";
  std::string self = "<li><strong>" + StatusBadge(status) + " " + Text(Str(run["workflow"])) +
                     " <span class=\"mono\">" + Text(ShortId(id)) + "</span></strong> (this run)";
  if (!data["children"].empty()) {
    self += "<ul>";
    for (const auto& child : data["children"]) {
      self += "<li>" + StatusBadge(Str(child["status"])) + " " + Text(Str(child["workflow"])) +
              " " + RunLink(Str(child["id"]), ShortId(Str(child["id"]))) + "</li>";
    }
    self += "</ul>";
  }
  self += "</li>";
  if (data["parent"].is_object()) {
    const Json& parent = data["parent"];
    body += "<li>" + StatusBadge(Str(parent["status"])) + " " + Text(Str(parent["workflow"])) +
            " " + RunLink(Str(parent["id"]), ShortId(Str(parent["id"]))) + " (parent)<ul>" + self +
            "</ul></li>";
  } else {
    body += self;
  }
  body += "</ul></div></section>";

  // Outcome.
  body += "<section><h2>Input</h2>" + JsonBlock(run["input"]) + "</section>";
  if (!run["output"].is_null())
    body += "<section><h2>Output</h2>" + JsonBlock(run["output"]) + "</section>";
  if (!run["error"].is_null()) {
    body += "<section class=\"error\"><h2>Error";
    if (!data["error_code"].is_null()) {
      body += " <span class=\"code\">" + Text(Str(data["error_code"])) + "</span>";
    }
    body += "</h2><pre>" + MultilineText(Str(run["error"])) + "</pre></section>";
  }
  body += "<section><h2>Context</h2><div class=\"json-tree\">";
  JsonTree(run["context"], body, 0);
  body += "</div></section>";

  // Compensations: what is owed if (or while) the run unwinds.
  const Json& compensations = run["compensations"];
  body += "<section><h2>Compensation stack</h2>";
  if (compensations.empty()) {
    body += "<p class=\"empty\">Nothing to compensate.</p>";
  } else {
    const bool owed = status == "compensating" || status == "compensation_failed";
    body += std::string("<p class=\"hint\">") +
            (owed ? "Still owed, next first:"
                  : "Would run, next first, if the run failed or were cancelled:") +
            "</p><ol class=\"stack\">";
    for (auto it = compensations.rbegin(); it != compensations.rend(); ++it) {
      body += "<li>" + Text(Str(*it)) + "</li>";
    }
    body += "</ol>";
  }
  body += "</section>";

  // Waits, each with the form that signals it.
  body += "<section><h2>Waits</h2>";
  std::vector<std::vector<std::string>> waits;
  for (const auto& wait : data["waits"]) {
    waits.push_back({"<span class=\"key\">" + Text(Str(wait["correlation_key"])) + "</span>",
                     Text(Str(wait["event"])), StatusBadge(Str(wait["status"])),
                     Text(Str(wait["continuation_step"])), TimeTag(wait["expires_at"], context)});
  }
  body += Table({"Correlation key", "Event", "Status", "Continues at", "Expires"}, waits,
                "This run has no waits.");
  if (context.actions_enabled) {
    for (const auto& wait : data["waits"]) {
      if (Str(wait["status"]) != "WAITING" || !wait["children"].is_null()) continue;
      body += R"(<form class="action signal" method="post" action="/signal">)" +
              CsrfField(context) + R"(<input type="hidden" name="key" value=")" +
              Text(Str(wait["correlation_key"])) + R"("><input type="hidden" name="run" value=")" +
              Text(id) + R"("><label>Payload for <span class="key">)" +
              Text(Str(wait["correlation_key"])) +
              "</span> (JSON)<textarea name=\"payload\" rows=\"4\" spellcheck=\"false\" "
              "data-json>{}</textarea></label><p class=\"json-problem\" role=\"status\"></p>"
              "<button type=\"submit\">Send signal</button></form>";
    }
  }
  body += "</section>";

  // Actions.
  if (context.actions_enabled) {
    body += "<section class=\"actions\"><h2>Actions</h2>" + SignInHint(context);
    const bool finished = status == "completed" || status == "failed" || status == "cancelled" ||
                          status == "compensation_failed";
    if (!finished) {
      body +=
          R"(<form class="action cancel" method="post" action="/runs/)" + UrlEncode(id) +
          "/cancel\">" + CsrfField(context) +
          "<label>Reason <input name=\"reason\" maxlength=\"1000\" value=\"cancelled from the "
          "console\"></label><button type=\"submit\" class=\"danger\">Cancel run</button></form>";
    }
    if (status == "failed" || status == "compensation_failed") {
      body += R"(<form class="action retry" method="post" action="/runs/)" + UrlEncode(id) +
              "/retry\">" + CsrfField(context) +
              "<button type=\"submit\">Retry run</button></form>";
    }
    if (finished && status != "failed" && status != "compensation_failed") {
      body += "<p class=\"empty\">The run has finished: nothing to do.</p>";
    }
    body += "</section>";
  }

  // Timeline.
  body += "<section><h2>Timeline</h2><ol class=\"timeline\">";
  std::optional<int64_t> previous;
  const auto first =
      data["events"].empty() ? std::nullopt : ParseTimestamp(Str(data["events"][0]["created_at"]));
  for (const auto& event : data["events"]) {
    const std::string kind = Str(event["kind"]);
    const auto at = ParseTimestamp(Str(event["created_at"]));
    std::string gap;
    if (at && previous) gap = "+" + DurationText(*at - *previous);
    if (at && first) gap += " <span class=\"muted\">(at " + DurationText(*at - *first) + ")</span>";
    if (at) previous = at;
    std::string detail;
    if (!event["field"].is_null()) {
      detail = Text(Str(event["field"])) +
               (event["value"].is_null() ? " <span class=\"muted\">removed</span>" : " = ");
    }
    if (!event["value"].is_null()) {
      std::string value = Str(event["value"]);
      if (value.size() > 300) value = value.substr(0, 297) + "...";
      detail += "<code>" + Text(value) + "</code>";
    }
    std::string css = "event";
    if (kind.find("compensat") != std::string::npos) css += " event-compensation";
    if (kind.find("fail") != std::string::npos || kind == "retried") css += " event-problem";
    body += "<li class=\"" + css + "\" data-kind=\"" + Text(kind) + R"("><span class="when">)" +
            TimeTag(event["created_at"], context) + " <span class=\"gap\">" + gap +
            "</span></span><span class=\"what\"><strong>" + Text(kind) + "</strong>";
    if (!event["step"].is_null()) {
      body += " " + Text(Str(event["step"])) + " <span class=\"muted\">attempt " +
              Str(event["attempt"]) + "</span>";
    }
    body += "</span><span class=\"detail\">" + detail + "</span></li>";
  }
  body += "</ol>";
  if (data["next_position"].is_number()) {
    body += "<p class=\"hint\">Only the first " + std::to_string(data["events"].size()) +
            " events are shown; " +
            Link("/api/v1/runs/" + UrlEncode(id) + "?after=" + Str(data["next_position"]),
                 "the rest as JSON") +
            ".</p>";
  }
  body += "</section><p class=\"muted\">" +
          Link("/api/v1/runs/" + UrlEncode(id), "This run as JSON") + "</p>";
  return Layout(context, "Run " + ShortId(id), "/runs", body);
}

std::string RenderQueuesPage(const Json& data, const PageContext& context) {
  std::string body = "<h1>Queues</h1><section><h2>Backlog</h2>";
  std::vector<std::vector<std::string>> rows;
  for (const auto& q : data["queues"]) {
    std::string oldest = "<span class=\"muted\">-</span>";
    if (q["oldest_due_age_seconds"].is_number()) {
      oldest =
          Text(DurationText(static_cast<int64_t>(q["oldest_due_age_seconds"].get<double>() * 1e6)));
    }
    rows.push_back({Link("/runs" + QueryString({{"queue", Str(q["queue"])}}), Str(q["queue"])),
                    Str(q["ready"]), Str(q["delayed"]), Str(q["running"]), Str(q["waiting"]),
                    Str(q["compensating"]), Str(q["compensation_failed"]), oldest,
                    Str(q["stranded"])});
  }
  body += Table({"Queue", "Ready", "Delayed", "Running", "Waiting", "Compensating",
                 "Compensation failed", "Oldest due", "Stranded"},
                rows, "No unfinished runs in any queue.");
  body +=
      "</section><section><h2>Stranded runs</h2><p class=\"hint\">Unfinished runs that no "
      "live worker serves (their definition is loaded nowhere).</p>";
  std::vector<std::vector<std::string>> stranded;
  for (const auto& run : data["stranded"]) {
    stranded.push_back(
        {RunLink(Str(run["id"]), ShortId(Str(run["id"]))),
         Text(Str(run["workflow"])) + " v" + Str(run["definition_version"]),
         StatusBadge(Str(run["status"])), Text(Str(run["queue"])),
         "<span class=\"mono\">" + Text(Str(run["definition_hash"]).substr(0, 12)) + "</span>",
         TimeTag(run["created_at"], context)});
  }
  body += Table({"Run", "Workflow", "Status", "Queue", "Hash", "Created"}, stranded,
                "No stranded runs.");
  body += "</section>";
  return Layout(context, "Queues", "/queues", body);
}

std::string RenderWorkersPage(const Json& data, const PageContext& context) {
  std::string body = "<h1>Workers</h1>";
  std::vector<std::vector<std::string>> rows;
  for (const auto& w : data["workers"]) {
    std::string running;
    for (const auto& run : w["running"]) {
      running += "<div>" + RunLink(Str(run["id"]), ShortId(Str(run["id"]))) + " " +
                 Text(Str(run["workflow"])) + " <span class=\"muted\">" + Text(Str(run["step"])) +
                 "</span></div>";
    }
    if (running.empty()) running = "<span class=\"muted\">idle</span>";
    std::string queues;
    for (const auto& q : w["queues"]) queues += (queues.empty() ? "" : ", ") + Text(Str(q));
    rows.push_back({"<span class=\"mono\">" + Text(Str(w["id"])) + "</span>",
                    StatusBadge(Str(w["state"])), Text(Str(w["host"])) + ":" + Str(w["pid"]),
                    Text(Str(w["version"])), queues, Str(w["concurrency"]),
                    TimeTag(w["heartbeat_at"], context), TimeTag(w["started_at"], context),
                    running});
  }
  body += Table({"Worker", "State", "Host:pid", "Version", "Queues", "Slots", "Heartbeat",
                 "Started", "Running"},
                rows, "No worker has registered yet.");
  return Layout(context, "Workers", "/workers", body);
}

std::string RenderSchedulesPage(const Json& data, const PageContext& context) {
  std::string body = "<h1>Schedules</h1>";
  if (data["schedules"].empty()) body += "<p class=\"empty\">No schedules.</p>";
  for (const auto& s : data["schedules"]) {
    body += "<section class=\"schedule\"><h2>" + Text(Str(s["name"])) + "</h2><dl class=\"facts\">";
    body += "<dt>Workflow</dt><dd>" + Text(Str(s["workflow"])) + "</dd>";
    body += "<dt>Cron (UTC)</dt><dd><code>" + Text(Str(s["cron"])) + "</code></dd>";
    body += "<dt>Missed ticks</dt><dd>" + Text(Str(s["missed"])) + "</dd>";
    body += "<dt>State</dt><dd>" + std::string(s["enabled"].get<bool>() ? "enabled" : "disabled") +
            "</dd><dt>Last fired</dt><dd>" + TimeTag(s["last_fire_at"], context, true) +
            "</dd><dt>Next fire times</dt><dd><ol class=\"fires\">";
    for (const auto& fire : s["next_fires"]) body += "<li>" + Text(Str(fire)) + "</li>";
    if (s["next_fires"].empty()) body += "<li class=\"muted\">none (disabled or parked)</li>";
    body += "</ol></dd></dl><h3>Last runs</h3>";
    std::vector<std::vector<std::string>> rows;
    for (const auto& run : s["last_runs"]) {
      rows.push_back({RunLink(Str(run["id"]), ShortId(Str(run["id"]))),
                      StatusBadge(Str(run["status"])),
                      "<span class=\"key\">" + Text(Str(run["key"])) + "</span>",
                      TimeTag(run["created_at"], context)});
    }
    body += Table({"Run", "Status", "Key", "Created"}, rows, "No runs yet.");
    body += "</section>";
  }
  return Layout(context, "Schedules", "/schedules", body);
}

std::string RenderDefinitionsPage(const Json& data, const PageContext& context) {
  std::string body = "<h1>Definitions</h1>";
  std::vector<std::vector<std::string>> rows;
  for (const auto& d : data["definitions"]) {
    std::string steps;
    for (const auto& step : d["steps"])
      steps += (steps.empty() ? "" : " \u2192 ") + Text(Str(step));
    rows.push_back(
        {Link("/runs" + QueryString({{"workflow", Str(d["workflow"])}}), Str(d["workflow"])),
         Str(d["version"]),
         R"(<span class="mono" title=")" + Text(Str(d["hash"])) + "\">" +
             Text(Str(d["hash"]).substr(0, 12)) + "</span>",
         steps, Str(d["pinned_unfinished"]), TimeTag(d["registered_at"], context)});
  }
  body +=
      "<p class=\"hint\">Unfinished runs stay pinned to the definition they started with; "
      "one that no live worker serves is listed on the " +
      Link("/queues", "queues page") + " as stranded.</p>";
  body += Table({"Workflow", "Version", "Hash", "Steps", "Unfinished runs pinned", "Registered"},
                rows, "No definition has been registered yet (start a worker).");
  return Layout(context, "Definitions", "/definitions", body);
}

std::string RenderLoginPage(const PageContext& context, const std::string& next,
                            const std::string& problem) {
  std::string body = "<h1>Sign in</h1>";
  if (!context.actions_enabled) {
    body +=
        "<p class=\"notice\">This console is read-only: it was started without an access "
        "token, so there is nothing to sign in to.</p>";
    return Layout(context, "Sign in", "", body);
  }
  if (!problem.empty()) body += R"(<p class="notice bad" role="alert">)" + Text(problem) + "</p>";
  body +=
      "<form class=\"login\" method=\"post\" action=\"/login\"><input type=\"hidden\" "
      "name=\"next\" value=\"" +
      Text(next) +
      "\"><label>Access token <input type=\"password\" name=\"token\" "
      "autocomplete=\"current-password\" required autofocus></label><button "
      "type=\"submit\">Sign in</button></form><p class=\"hint\">The token is the content of "
      "the console's token file (or its console-token credential).</p>";
  return Layout(context, "Sign in", "", body);
}

std::string RenderMessagePage(const PageContext& context, const std::string& title,
                              const std::string& message, bool good, const std::string& back) {
  std::string body = "<h1>" + Text(title) + "</h1><p class=\"notice " + (good ? "good" : "bad") +
                     R"(" role="status" id="outcome">)" + Text(message) + "</p>";
  if (!back.empty()) body += "<p>" + Link(back, "Back") + "</p>";
  return Layout(context, title, "", body);
}

}  // namespace cairn::console
