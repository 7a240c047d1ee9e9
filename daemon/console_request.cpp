// See console_request.hpp.
#include "console_request.hpp"

#include <algorithm>

#include "console_html.hpp"
#include "identifier.hpp"
#include "store.hpp"

namespace cairn::console {

namespace {

constexpr int kDefaultPageSize = 50;
constexpr size_t kMaxFilterBytes = 512;

}  // namespace

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

}  // namespace cairn::console
