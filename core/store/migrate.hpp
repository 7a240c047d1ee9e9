// Schema migrations: the numbered files of sql/migrations, applied in order,
// each in its own transaction, under a session advisory lock so concurrent
// `cairn migrate` runs serialise. An applied file that changed since is
// refused, as is a schema newer than this binary.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "store.hpp"

namespace cairn::store {

struct MigrationInfo {
  int version = 0;
  std::string name;
  std::string checksum;  // SHA-256 of the file as shipped
  bool applied = false;
  std::optional<std::string> applied_at;
};

struct MigrationReport {
  std::vector<MigrationInfo> migrations;  // every migration this binary knows
  std::vector<int> applied_now;           // versions this call applied (or would, dry run)
  int schema_version = 0;                 // after the call (unchanged by a dry run)
  int latest_version = 0;                 // the newest this binary knows
};

// Applies pending migrations; with dry_run, reports what it would apply and
// changes nothing (not even creating the schema).
MigrationReport Migrate(Connection& connection, bool dry_run = false);

// Reads the state without changing anything.
MigrationReport MigrationStatus(Connection& connection);

// The newest schema version this binary ships (no database needed).
int ShippedSchemaVersion();

}  // namespace cairn::store
