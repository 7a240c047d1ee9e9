// Applies the embedded migrations; see migrate.hpp.
#include <cctype>
#include <map>

#include "migrate.hpp"
#include "sql_catalog.hpp"
#include "store_internal.hpp"

namespace cairn::store {

namespace {

struct Shipped {
  int version;
  std::string name;
  std::string_view text;
};

std::vector<Shipped> ShippedMigrations() {
  std::vector<Shipped> shipped;
  for (const auto& file : sql::EmbeddedMigrations()) {
    size_t digits = 0;
    while (digits < file.name.size() &&
           std::isdigit(static_cast<unsigned char>(file.name[digits]))) {
      ++digits;
    }
    if (digits == 0) {
      throw Error(ErrorKind::kPermanent,
                  "migration file " + std::string(file.name) + " does not start with a number");
    }
    shipped.push_back(
        {std::stoi(std::string(file.name.substr(0, digits))), std::string(file.name), file.text});
  }
  return shipped;
}

struct Applied {
  std::string name;
  std::string checksum;
  std::string applied_at;
};

// Reads what the schema has recorded and checks it against the shipped
// files. Throws when an applied file changed or the schema is newer.
MigrationReport Inspect(Tx& tx, const std::string& schema) {
  auto& t = Internal(tx);
  std::map<int, Applied> applied;
  if (t.Exec("schema_exists", schema)[0][0].as<bool>()) {
    for (const auto& row : t.Exec("migrate_applied")) {
      applied[row["version"].as<int>()] = {row["name"].c_str(), row["checksum"].c_str(),
                                           row["applied_at"].c_str()};
    }
  }
  MigrationReport report;
  for (const auto& file : ShippedMigrations()) {
    MigrationInfo info;
    info.version = file.version;
    info.name = file.name;
    info.checksum = t.Exec("migrate_checksum", std::string(file.text))[0][0].c_str();
    auto found = applied.find(file.version);
    if (found != applied.end()) {
      if (found->second.checksum != info.checksum) {
        throw Error(ErrorKind::kPermanent,
                    "migration " + file.name + " was changed after it was applied to schema " +
                        schema + " (recorded checksum " + found->second.checksum + ", shipped " +
                        info.checksum +
                        "); released migrations must not be edited: restore the file and add a "
                        "new migration instead");
      }
      info.applied = true;
      info.applied_at = found->second.applied_at;
      report.schema_version = std::max(report.schema_version, file.version);
      applied.erase(found);
    }
    report.latest_version = std::max(report.latest_version, file.version);
    report.migrations.push_back(std::move(info));
  }
  if (!applied.empty()) {
    const auto& [version, unknown] = *applied.rbegin();
    throw Error(ErrorKind::kPermanent,
                "schema " + schema + " has migration " + std::to_string(version) + " (" +
                    unknown.name + ") that this cairn does not know (it knows up to " +
                    std::to_string(report.latest_version) + "): upgrade cairn");
  }
  return report;
}

// Once the schema has its roles, a migration runs as the role that owns its
// objects, whoever connected to apply it. Throws when the session may not.
void RunAsSchemaOwner(Tx& tx, const std::string& schema) {
  auto& t = Internal(tx);
  pqxx::result rows = t.Exec("migrate_owner_role", schema);
  if (rows.empty()) return;
  const std::string owner = rows[0]["owner"].c_str();
  if (!rows[0]["may_set"].as<bool>()) {
    throw Error(ErrorKind::kPermanent,
                "schema " + schema + " belongs to role " + owner +
                    ", and this session's role is not a member of it: migrate as a member of " +
                    owner + " (GRANT \"" + owner + "\" TO <your role>)");
  }
  t.Exec("migrate_set_role", owner);
}

// Holds the migration lock for the lifetime of one Migrate call.
class MigrationLock {
 public:
  explicit MigrationLock(Connection& connection) : connection_(connection) {
    connection_.Transact([&](Tx& tx) { Internal(tx).Exec("migrate_lock", connection_.schema()); });
  }
  ~MigrationLock() {
    try {
      connection_.Transact(
          [&](Tx& tx) { Internal(tx).Exec("migrate_unlock", connection_.schema()); });
    } catch (...) {
      // The session is gone, and its lock with it.
    }
  }

 private:
  Connection& connection_;
};

}  // namespace

MigrationReport MigrationStatus(Connection& connection) {
  return connection.Transact([&](Tx& tx) { return Inspect(tx, connection.schema()); });
}

MigrationReport Migrate(Connection& connection, bool dry_run) {
  if (dry_run) {
    MigrationReport report = MigrationStatus(connection);
    for (const auto& m : report.migrations) {
      if (!m.applied) report.applied_now.push_back(m.version);
    }
    return report;
  }
  MigrationLock lock(connection);
  connection.Transact([&](Tx& tx) {
    Internal(tx).work.exec(sql::WithSchema(sql::Query("migrate_bootstrap"), connection.schema()));
  });
  MigrationReport report = MigrationStatus(connection);
  for (auto& m : report.migrations) {
    if (m.applied) continue;
    std::string_view text;
    for (const auto& file : ShippedMigrations()) {
      if (file.version == m.version) text = file.text;
    }
    connection.Transact([&](Tx& tx) {
      auto& t = Internal(tx);
      RunAsSchemaOwner(tx, connection.schema());
      try {
        t.work.exec(sql::WithSchema(text, connection.schema()));
      } catch (...) {
        Tx::Impl::RethrowTranslated("migration " + m.name);
      }
      t.Exec("migrate_record", m.version, m.name, m.checksum);
    });
    m.applied = true;
    report.applied_now.push_back(m.version);
    report.schema_version = std::max(report.schema_version, m.version);
  }
  return report;
}

int ShippedSchemaVersion() {
  int latest = 0;
  for (const auto& file : ShippedMigrations()) latest = std::max(latest, file.version);
  return latest;
}

}  // namespace cairn::store
