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
