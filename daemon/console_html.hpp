// The console's HTML: escaping, URLs, times, and one renderer per page, each
// drawing from the same JSON its /api/v1 twin answers (so the two cannot
// drift apart). Everything read from the database goes through Text() or
// Attr(); no renderer writes a style attribute or an inline script (the CSP
// forbids both). Pure functions: thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model.hpp"

namespace cairn::console {

// Text for an HTML element or a quoted attribute: control characters,
// invalid UTF-8 and bidirectional overrides shown as visible escapes (as the
// CLI's Printable does), then & < > " ' as character references.
std::string Text(std::string_view text);
// Multi-line text (an error, a JSON document): as Text, but newlines and
// tabs are kept.
std::string MultilineText(std::string_view text);

// Percent-encoding of a query value or a path segment.
std::string UrlEncode(std::string_view text);
// The inverse (and '+' as a space, as forms send it). False when a %
// escape is malformed.
bool UrlDecode(std::string_view text, std::string& out);
// "?a=1&b=x%20y" for the pairs whose value is not empty ("" when none).
std::string QueryString(const std::vector<std::pair<std::string, std::string>>& pairs);

// Microseconds since the epoch of a PostgreSQL timestamptz text in UTC
// ("2026-12-01 10:21:14.123456+00"); nullopt when it is not one.
std::optional<int64_t> ParseTimestamp(std::string_view text);
// "3.2 s", "4 min 10 s", "2 h 5 min", "3 d 4 h".
std::string DurationText(int64_t micros);

// What every page needs besides its data.
struct PageContext {
  std::string now;  // database time, timestamptz text
  bool actions_enabled = false;
  bool signed_in = false;
  std::string csrf;  // the session's token, "" when not signed in
  std::string path;  // this page's path and query, for the login's way back
};

std::string RenderRunsPage(const Json& data, const PageContext& context);
std::string RenderRunPage(const Json& data, const PageContext& context);
std::string RenderQueuesPage(const Json& data, const PageContext& context);
std::string RenderWorkersPage(const Json& data, const PageContext& context);
std::string RenderSchedulesPage(const Json& data, const PageContext& context);
std::string RenderDefinitionsPage(const Json& data, const PageContext& context);
std::string RenderLoginPage(const PageContext& context, const std::string& next,
                            const std::string& problem);
// A page that says one thing: an action's outcome, an error. `back` is a
// path to return to ("" for none).
std::string RenderMessagePage(const PageContext& context, const std::string& title,
                              const std::string& message, bool good, const std::string& back);

}  // namespace cairn::console
