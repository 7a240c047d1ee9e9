// Validation of the SQL identifiers cairn splices into statements (the schema
// name): everything else travels as a bound parameter.
#pragma once

#include <string>
#include <string_view>

namespace cairn {

// True when name matches ^[A-Za-z_][A-Za-z0-9_]{0,62}$.
bool IsValidIdentifier(std::string_view name);

// Throws InvalidArgumentError naming what and the offending value.
void ValidateIdentifier(std::string_view what, std::string_view name);

// The identifier double-quoted for SQL; call only after validation.
std::string QuoteIdentifier(std::string_view name);

}  // namespace cairn

namespace cairn {

// Throws InvalidArgumentError unless id is a UUID in canonical text form
// (what run ids are), so a typo is reported as such and not as "not found".
void ValidateRunId(std::string_view id);

}  // namespace cairn
