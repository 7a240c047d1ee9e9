// See console_html.hpp. Pages are plain HTML5 that works without
// JavaScript: filters are GET forms (so every view is a shareable URL), the
// JSON tree is nested <details>, actions are POST forms. console.js only
// adds to it (live relative times, payload validation before sending).
#include "console_html.hpp"

#include <charconv>
#include <chrono>
#include <cstdio>

#include "cli.hpp"

namespace cairn::console {

namespace {

using namespace std::string_literals;

std::string EscapeMarkup(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Str(const Json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// An internal link: href from a path and query we built (each value
// already percent-encoded), text escaped.
std::string Link(const std::string& href, std::string_view text, std::string_view css = "") {
  std::string out = "<a href=\"" + EscapeMarkup(href) + "\"";
  if (!css.empty()) out += " class=\"" + std::string(css) + "\"";
  return out + ">" + Text(text) + "</a>";
}

// A run's label where its whole id does not fit: the id's end. Run ids are
// time-ordered (migration 16), so runs started in the same minute share
// their first eight characters; the last ones are random.
std::string ShortId(const std::string& id) { return id.size() > 8 ? id.substr(id.size() - 8) : id; }

std::string RunLink(const std::string& id, std::string_view text = "") {
  return Link("/runs/" + UrlEncode(id), text.empty() ? std::string_view(id) : text, "mono");
}

// Accessible status: an icon and the word, coloured by class; colour is
// never the only signal.
std::string StatusBadge(const std::string& status) {
  static const std::vector<std::pair<std::string, std::string>> kIcons = {
      {"ready", "\u25CB"},        {"running", "\u25B6"},
      {"waiting", "\u25D4"},      {"completed", "\u2713"},
      {"failed", "\u2717"},       {"cancelled", "\u2298"},
      {"compensating", "\u21BA"}, {"compensation_failed", "\u26A0"},
      {"delayed", "\u25F7"},      {"live", "\u25CF"},
      {"dead", "\u2717"},         {"stopped", "\u25A0"},
      {"WAITING", "\u25D4"},      {"RESUMING", "\u25B6"},
      {"RESUMED", "\u2713"},      {"CANCELLED", "\u2298"},
      {"EXPIRED", "\u25CC"}};
  std::string icon = "\u2022";
  for (const auto& [name, glyph] : kIcons) {
    if (name == status) icon = glyph;
  }
  std::string css;
  for (char c : status) css += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return "<span class=\"status status-" + Text(css) + R"("><span aria-hidden="true">)" + icon +
         "</span> " + Text(status) + "</span>";
}

// A time as "3 min ago" with the absolute UTC time in its title; console.js
// keeps the relative text current.
std::string TimeTag(const Json& value, const PageContext& context, bool absolute_too = false) {
  if (!value.is_string()) return "<span class=\"muted\">-</span>";
  const std::string text = value.get<std::string>();
  const auto at = ParseTimestamp(text);
  const auto now = ParseTimestamp(context.now);
  if (!at || !now) return Text(text);
  const int64_t diff = *now - *at;
  const std::string relative =
      diff >= 0 ? DurationText(diff) + " ago" : "in " + DurationText(-diff);
  const std::string shown = text.substr(0, 19) + " UTC";
  std::string out = "<time datetime=\"" + Text(text) + "\" data-ms=\"" +
                    std::to_string(*at / 1000) + "\" title=\"" + Text(shown) + "\">" +
                    Text(relative) + "</time>";
  if (absolute_too) out += " <span class=\"muted\">" + Text(shown) + "</span>";
  return out;
}

std::string NavLink(const std::string& href, std::string_view text, const std::string& active) {
  const bool current = href == active;
  return "<a href=\"" + href + "\"" + (current ? " aria-current=\"page\"" : "") + ">" +
         std::string(text) + "</a>";
}

std::string Layout(const PageContext& context, const std::string& title, const std::string& active,
                   const std::string& body) {
  const auto now = ParseTimestamp(context.now);
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<meta name=\"color-scheme\" content=\"light dark\">"
      "<title>" +
      Text(title) +
      " \u00B7 cairn console</title>"
      "<link rel=\"stylesheet\" href=\"/static/console.css\">"
      "<script src=\"/static/console.js\" defer></script></head>"
      "<body data-now-ms=\"" +
      (now ? std::to_string(*now / 1000) : "") +
      R"("><header class="top"><a class="brand" href="/runs">cairn</a><nav>)" +
      NavLink("/runs", "Runs", active) + NavLink("/queues", "Queues", active) +
      NavLink("/workers", "Workers", active) + NavLink("/schedules", "Schedules", active) +
      NavLink("/definitions", "Definitions", active) + "</nav><div class=\"session\">";
  if (!context.actions_enabled) {
    out += R"(<span class="muted" title="started without an access token">read-only</span>)";
  } else if (context.signed_in) {
    out +=
        "<form method=\"post\" action=\"/logout\"><input type=\"hidden\" name=\"csrf\" "
        "value=\"" +
        Text(context.csrf) + R"("><button type="submit" class="link">Sign out</button></form>)";
  } else {
    out += Link("/login" + QueryString({{"next", context.path}}), "Sign in");
  }
  out += "</div></header><main>" + body + "</main></body></html>\n";
  return out;
}

std::string Table(const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows, const std::string& empty,
                  const std::string& css = "") {
  if (rows.empty()) return "<p class=\"empty\">" + Text(empty) + "</p>";
  std::string out = "<div class=\"scroll\"><table" + (css.empty() ? "" : " class=\"" + css + "\"") +
                    "><thead><tr>";
  for (const auto& h : header) out += "<th scope=\"col\">" + Text(h) + "</th>";
  out += "</tr></thead><tbody>";
  for (const auto& row : rows) {
    out += "<tr>";
    for (size_t i = 0; i < row.size(); ++i) {
      out +=
          "<td data-label=\"" + Text(i < header.size() ? header[i] : "") + "\">" + row[i] + "</td>";
    }
    out += "</tr>";
  }
  return out + "</tbody></table></div>";
}

// A JSON value as nested <details>: collapsible without any script.
void JsonTree(const Json& value, std::string& out, int depth) {
  if (depth > 40) {  // payloads nest at most 64 deep; past this a flat dump is clearer
    out += "<code>" + MultilineText(Str(value)) + "</code>";
    return;
  }
  if (value.is_object() || value.is_array()) {
    const bool object = value.is_object();
    if (value.empty()) {
      out += object ? "<code>{}</code>" : "<code>[]</code>";
      return;
    }
    out += "<ul class=\"tree\">";
    for (const auto& [key, item] : value.items()) {
      out += "<li>";
      if (item.is_structured() && !item.empty()) {
        out += std::string("<details") + (depth < 2 ? " open" : "") +
               "><summary><span class=\"key\">" + Text(key) + "</span> <span class=\"muted\">" +
               (item.is_object() ? "{" + std::to_string(item.size()) + "}"
                                 : "[" + std::to_string(item.size()) + "]") +
               "</span></summary>";
        JsonTree(item, out, depth + 1);
        out += "</details>";
      } else {
        out += "<span class=\"key\">" + Text(key) + "</span>: ";
        JsonTree(item, out, depth + 1);
      }
      out += "</li>";
    }
    out += "</ul>";
    return;
  }
  const std::string css = value.is_string() ? "str" : value.is_number() ? "num" : "lit";
  out += "<code class=\"" + css + "\">" +
         MultilineText(value.dump(-1, ' ', false, Json::error_handler_t::replace)) + "</code>";
}

std::string JsonBlock(const Json& value) {
  if (value.is_null()) return "<span class=\"muted\">none</span>";
  return "<pre class=\"json\">" +
         MultilineText(value.dump(2, ' ', false, Json::error_handler_t::replace)) + "</pre>";
}

std::string CsrfField(const PageContext& context) {
  return R"(<input type="hidden" name="csrf" value=")" + Text(context.csrf) + "\">";
}

std::string SignInHint(const PageContext& context) {
  if (context.signed_in) return "";
  return "<p class=\"hint\">Actions need the access token: " +
         Link("/login" + QueryString({{"next", context.path}}), "sign in") + " first.</p>";
}

}  // namespace

std::string Text(std::string_view text) { return EscapeMarkup(cli::Printable(text)); }

std::string MultilineText(std::string_view text) {
  std::string out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find_first_of("\n\t", start);
    if (end == std::string_view::npos) end = text.size();
    out += Text(text.substr(start, end - start));
    if (end < text.size()) out += text[end];
    start = end + 1;
  }
  return out;
}

std::string UrlEncode(std::string_view text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

bool UrlDecode(std::string_view text, std::string& out) {
  out.clear();
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%') {
      if (i + 2 >= text.size()) return false;
      const int high = digit(text[i + 1]);
      const int low = digit(text[i + 2]);
      if (high < 0 || low < 0) return false;
      out += static_cast<char>(high * 16 + low);
      i += 2;
    } else {
      out += text[i];
    }
  }
  return true;
}

std::string QueryString(const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::string out;
  for (const auto& [name, value] : pairs) {
    if (value.empty()) continue;
    out += (out.empty() ? "?" : "&") + UrlEncode(name) + "=" + UrlEncode(value);
  }
  return out;
}

std::optional<int64_t> ParseTimestamp(std::string_view text) {
  // "YYYY-MM-DD HH:MM:SS[.ffffff]+00" (the session's time zone is UTC).
  if (text.size() < 19) return std::nullopt;
  // The digits at [at, at + width), or -1 when they are not all digits.
  auto number = [&](size_t at, size_t width) {
    int value = 0;
    const auto [end, error] = std::from_chars(text.data() + at, text.data() + at + width, value);
    return error == std::errc() && end == text.data() + at + width ? value : -1;
  };
  const int year = number(0, 4), month = number(5, 2), day = number(8, 2);
  const int hour = number(11, 2), minute = number(14, 2), second = number(17, 2);
  if (year < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0 || text[4] != '-' ||
      text[7] != '-' || text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  int64_t micros = 0;
  size_t i = 19;
  if (i < text.size() && text[i] == '.') {
    int64_t scale = 100000;
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      micros += (text[i] - '0') * scale;
      scale /= 10;
    }
  }
  const std::chrono::year_month_day date{std::chrono::year(year),
                                         std::chrono::month(static_cast<unsigned>(month)),
                                         std::chrono::day(static_cast<unsigned>(day))};
  if (!date.ok()) return std::nullopt;
  const auto days = std::chrono::sys_days(date).time_since_epoch().count();
  return ((static_cast<int64_t>(days) * 24 + hour) * 60 + minute) * 60'000'000LL +
         second * 1'000'000LL + micros;
}

std::string DurationText(int64_t micros) {
  if (micros < 0) micros = -micros;
  char text[48];
  if (micros < 1000) {
    std::snprintf(text, sizeof text, "%lld \u00B5s", static_cast<long long>(micros));
  } else if (micros < 1'000'000) {
    std::snprintf(text, sizeof text, "%lld ms", static_cast<long long>(micros / 1000));
  } else if (micros < 60'000'000) {
    std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(micros) / 1e6);
  } else {
    const int64_t seconds = micros / 1'000'000;
    if (seconds < 3600) {
      std::snprintf(text, sizeof text, "%lld min %lld s", static_cast<long long>(seconds / 60),
                    static_cast<long long>(seconds % 60));
    } else if (seconds < 86400) {
      std::snprintf(text, sizeof text, "%lld h %lld min", static_cast<long long>(seconds / 3600),
                    static_cast<long long>(seconds % 3600 / 60));
    } else {
      std::snprintf(text, sizeof text, "%lld d %lld h", static_cast<long long>(seconds / 86400),
                    static_cast<long long>(seconds % 86400 / 3600));
    }
  }
  return text;
}

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
