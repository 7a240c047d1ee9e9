// The building blocks of the console's pages (console_html.cpp): escaping
// for markup, links, status badges, times, the page frame, tables and the
// collapsible JSON tree. Everything read from the database goes through
// Text() (console_html.hpp) before it is markup. Pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "console_html.hpp"

namespace cairn::console {

std::string EscapeMarkup(std::string_view text);

std::string Str(const Json& value);

// An internal link: href from a path and query we built (each value
// already percent-encoded), text escaped.
std::string Link(const std::string& href, std::string_view text, std::string_view css = "");

// A run's label where its whole id does not fit: the id's end. Run ids are
// time-ordered (migration 16), so runs started in the same minute share
// their first eight characters; the last ones are random.
std::string ShortId(const std::string& id);

std::string RunLink(const std::string& id, std::string_view text = "");

// Accessible status: an icon and the word, coloured by class; colour is
// never the only signal.
std::string StatusBadge(const std::string& status);

// A time as "3 min ago" with the absolute UTC time in its title; console.js
// keeps the relative text current.
std::string TimeTag(const Json& value, const PageContext& context, bool absolute_too = false);

std::string NavLink(const std::string& href, std::string_view text, const std::string& active);

std::string Layout(const PageContext& context, const std::string& title, const std::string& active,
                   const std::string& body);

std::string Table(const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows, const std::string& empty,
                  const std::string& css = "");

// A JSON value as nested <details>: collapsible without any script.
void JsonTree(const Json& value, std::string& out, int depth);

std::string JsonBlock(const Json& value);

std::string CsrfField(const PageContext& context);

std::string SignInHint(const PageContext& context);

}  // namespace cairn::console
