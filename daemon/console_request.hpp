// What a console request asks for, checked: its query string or form body
// as name=value pairs, the filters and page size it gives, a run id. What a
// client can mend comes back as an HttpProblem (a 4xx and a sentence naming
// the problem).
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::console {

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
// once and each one of `allowed`; `what` names the request in a problem.
Params ParsePairs(std::string_view text, const std::vector<std::string>& allowed,
                  const std::string& what);
// A parameter's value; nullopt when it is absent or empty.
std::optional<std::string> Given(const Params& params, const std::string& name);
// The page size of `limit`, 50 when absent.
int PageSize(const Params& params);
// `id` when it is a run id (a UUID).
std::string CheckedRunId(const std::string& id);

}  // namespace cairn::console
