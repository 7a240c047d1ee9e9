// The store's one translation of database errors, against a real
// PostgreSQL: each SQLSTATE class gets its kind, including the errors
// libpqxx 6.4 reports without a SQLSTATE (insufficient_privilege) or outside
// sql_error (serialization failures, deadlocks).
#include <gtest/gtest.h>

#include <string>

#include "errors.hpp"
#include "store_fixture.hpp"

namespace cairn::test {
namespace {

class SqlStates : public StoreTest {
 protected:
  // The error of a statement raising `code`, as the store reports it.
  DatabaseError Raised(const std::string& code) {
    try {
      conn().Transact([&](store::Tx& tx) {
        store::ExecuteStepSql(
            tx, "DO $$ BEGIN RAISE EXCEPTION 'raised' USING ERRCODE = '" + code + "'; END $$",
            Json::array());
      });
    } catch (const DatabaseError& e) {
      return e;
    }
    ADD_FAILURE() << code << " was not raised as a DatabaseError";
    return DatabaseError(ErrorKind::kPermanent, "", "", "");
  }
};

TEST_F(SqlStates, EachCodeGetsItsKindAndKeepsItsSqlState) {
  const struct {
    const char* code;
    ErrorKind kind;
  } cases[] = {
      {"40001", ErrorKind::kTransient},       {"40P01", ErrorKind::kTransient},
      {"55P03", ErrorKind::kTransient},       {"57014", ErrorKind::kTransient},
      {"42501", ErrorKind::kPermanent},       {"23505", ErrorKind::kPermanent},
      {"22023", ErrorKind::kInvalidArgument}, {"22P02", ErrorKind::kInvalidArgument},
      {"54000", ErrorKind::kInvalidArgument}, {"P0001", ErrorKind::kPermanent},
      {"40003", ErrorKind::kPermanent},
  };
  for (const auto& c : cases) {
    const DatabaseError error = Raised(c.code);
    EXPECT_EQ(error.sqlstate(), c.code) << error.what();
    EXPECT_EQ(error.kind(), c.kind) << c.code << ": " << error.what();
  }
}

}  // namespace
}  // namespace cairn::test
