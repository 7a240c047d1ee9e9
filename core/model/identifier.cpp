// Identifier validation; see identifier.hpp.
#include "identifier.hpp"

#include "errors.hpp"

namespace cairn {

namespace {
bool IsIdentifierStart(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}
bool IsIdentifierPart(char c) { return IsIdentifierStart(c) || (c >= '0' && c <= '9'); }
}  // namespace

bool IsValidIdentifier(std::string_view name) {
  if (name.empty() || name.size() > 63 || !IsIdentifierStart(name.front())) return false;
  for (char c : name) {
    if (!IsIdentifierPart(c)) return false;
  }
  return true;
}

void ValidateIdentifier(std::string_view what, std::string_view name) {
  if (!IsValidIdentifier(name)) {
    throw InvalidArgumentError("invalid " + std::string(what) + " \"" + std::string(name) +
                               "\": must match ^[A-Za-z_][A-Za-z0-9_]{0,62}$");
  }
}

std::string QuoteIdentifier(std::string_view name) { return "\"" + std::string(name) + "\""; }

}  // namespace cairn

namespace cairn {

void ValidateRunId(std::string_view id) {
  bool valid = id.size() == 36;
  for (size_t i = 0; valid && i < id.size(); ++i) {
    char c = id[i];
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    valid = dash ? c == '-'
                 : ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'));
  }
  if (!valid) {
    throw InvalidArgumentError("invalid run id \"" + std::string(id) +
                               "\": run ids are UUIDs such as "
                               "0b9d3c55-6f0e-4c1e-9a53-2d1f0f3b7a10");
  }
}

}  // namespace cairn
