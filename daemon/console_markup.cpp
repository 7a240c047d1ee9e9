// See console_markup.hpp, and console_html.hpp for Text() and the URL and
// time helpers defined here too.
#include "console_markup.hpp"

#include <charconv>
#include <chrono>
#include <cstdio>

#include "cli.hpp"

namespace cairn::console {

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
std::string Link(const std::string& href, std::string_view text, std::string_view css) {
  std::string out = "<a href=\"" + EscapeMarkup(href) + "\"";
  if (!css.empty()) out += " class=\"" + std::string(css) + "\"";
  return out + ">" + Text(text) + "</a>";
}

// A run's label where its whole id does not fit: the id's end. Run ids are
// time-ordered (migration 16), so runs started in the same minute share
// their first eight characters; the last ones are random.
std::string ShortId(const std::string& id) { return id.size() > 8 ? id.substr(id.size() - 8) : id; }

std::string RunLink(const std::string& id, std::string_view text) {
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
std::string TimeTag(const Json& value, const PageContext& context, bool absolute_too) {
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
                  const std::string& css) {
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

}  // namespace cairn::console
