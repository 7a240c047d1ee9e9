// Validation of the SQL identifiers cairn splices into statements (the schema
// name), of run ids, and of the keys callers choose (run keys, correlation
// keys): everything else travels as a bound parameter.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cairn {

// True when name matches ^[A-Za-z_][A-Za-z0-9_]{0,62}$.
bool IsValidIdentifier(std::string_view name);

// Throws InvalidArgumentError naming what and the offending value.
void ValidateIdentifier(std::string_view what, std::string_view name);

// The identifier double-quoted for SQL; call only after validation.
std::string QuoteIdentifier(std::string_view name);

// Schemas cairn must never use, compared case-insensitively: PostgreSQL's own
// (pg_*, information_schema) and public, which every role shares. nullptr
// when name is not reserved, else why it is.
const char* ReservedSchemaReason(std::string_view name);

// A valid identifier that is not reserved; throws InvalidArgumentError naming
// the value and the rule it breaks.
void ValidateSchemaName(std::string_view name);

// Throws InvalidArgumentError unless id is a UUID in canonical text form
// (what run ids are), so a typo is reported as such and not as "not found".
void ValidateRunId(std::string_view id);

// Run keys and correlation keys: not empty and at most this many bytes (the
// SQL API applies the same rule; keys live in btree indexes).
inline constexpr std::size_t kMaxKeyBytes = 512;

// Throws InvalidArgumentError naming what ("--key", "the correlation key")
// when key is empty or longer than kMaxKeyBytes.
void ValidateKey(std::string_view what, std::string_view key);

}  // namespace cairn
