// Identifier, run id and key validation; see identifier.hpp.
#include "identifier.hpp"

#include <algorithm>
#include <cctype>

#include "errors.hpp"

namespace cairn {

namespace {

constexpr const char* kIdentifierRule = "^[A-Za-z_][A-Za-z0-9_]{0,62}$";

bool IsIdentifierStart(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}
bool IsIdentifierPart(char c) { return IsIdentifierStart(c) || (c >= '0' && c <= '9'); }

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

bool IsValidIdentifier(std::string_view name) {
  if (name.empty() || name.size() > 63 || !IsIdentifierStart(name.front())) return false;
  return std::all_of(name.begin(), name.end(), IsIdentifierPart);
}

void ValidateIdentifier(std::string_view what, std::string_view name) {
  if (!IsValidIdentifier(name)) {
    throw InvalidArgumentError("invalid " + std::string(what) + " \"" + std::string(name) +
                               "\": must match " + kIdentifierRule);
  }
}

std::string QuoteIdentifier(std::string_view name) { return "\"" + std::string(name) + "\""; }

const char* ReservedSchemaReason(std::string_view name) {
  const std::string lower = Lower(name);
  if (lower.rfind("pg_", 0) == 0) {
    return "names starting with pg_ belong to PostgreSQL's system schemas";
  }
  if (lower == "information_schema") return "it is PostgreSQL's catalog of the SQL standard";
  if (lower == "public") {
    return "public is shared by every role of the database; cairn needs a schema of its own, "
           "whose objects its owner role owns and whose privileges it controls";
  }
  return nullptr;
}

void ValidateSchemaName(std::string_view name) {
  ValidateIdentifier("schema name", name);
  if (const char* reason = ReservedSchemaReason(name)) {
    throw InvalidArgumentError("schema name \"" + std::string(name) + "\" is reserved: " + reason);
  }
}

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

void ValidateKey(std::string_view what, std::string_view key) {
  if (key.empty()) throw InvalidArgumentError(std::string(what) + " is empty");
  if (key.size() > kMaxKeyBytes) {
    throw InvalidArgumentError(std::string(what) + " is " + std::to_string(key.size()) +
                               " bytes, over the limit of " + std::to_string(kMaxKeyBytes) +
                               " bytes");
  }
}

}  // namespace cairn
