// The SQL that cairn runs, embedded at build time from sql/ (see
// cmake/EmbedSql.cmake). Text here still carries the {schema} placeholder.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cairn::sql {

struct EmbeddedFile {
  std::string_view name;  // query: file stem; migration: file name
  std::string_view text;
};

const std::vector<EmbeddedFile>& EmbeddedMigrations();
const std::vector<EmbeddedFile>& EmbeddedQueries();

// The named query's text; throws std::out_of_range for an unknown name.
std::string_view Query(std::string_view name);

// text with {schema} replaced by the quoted schema and {schema_name} by the
// bare name. schema must already be a validated identifier (identifier.hpp),
// which is what makes splicing it into SQL safe.
std::string WithSchema(std::string_view text, std::string_view schema);

}  // namespace cairn::sql
