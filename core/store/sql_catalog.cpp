// Lookup over the embedded SQL files.
#include "sql_catalog.hpp"

#include <stdexcept>

namespace cairn::sql {

std::string_view Query(std::string_view name) {
  for (const auto& file : EmbeddedQueries()) {
    if (file.name == name) return file.text;
  }
  throw std::out_of_range("no embedded query named " + std::string(name));
}

namespace {
std::string ReplaceAll(std::string_view text, std::string_view placeholder,
                       std::string_view value) {
  std::string out;
  out.reserve(text.size() + 64);
  size_t pos = 0;
  while (true) {
    size_t hit = text.find(placeholder, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(value);
    pos = hit + placeholder.size();
  }
  out.append(text.substr(pos));
  return out;
}
}  // namespace

std::string WithSchema(std::string_view text, std::string_view schema) {
  const std::string quoted = "\"" + std::string(schema) + "\"";
  return ReplaceAll(ReplaceAll(text, "{schema}", quoted), "{schema_name}", schema);
}

}  // namespace cairn::sql
