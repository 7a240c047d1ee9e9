// Unit tests of the one guard on a transactional step's own SQL: one table
// of statements, each refused (with the words its reason must hold) or let
// through. No database.
#include "step_sql_guard.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cairn::store {
namespace {

struct GuardCase {
  std::string sql;
  bool refused;
  std::string reason;  // a substring of the refusal; "" for statements let through
};

const std::vector<GuardCase>& Cases() {
  static const std::vector<GuardCase> kCases = {
      // Transaction control belongs to cairn.
      {"BEGIN", true, "transaction control (begin)"},
      {"commit", true, "transaction control (commit)"},
      {"  -- note\n ROLLBACK", true, "transaction control (rollback)"},
      {"/* x /* nested */ */ savepoint s", true, "transaction control (savepoint)"},
      {"release savepoint s", true, "transaction control (release)"},
      {"START TRANSACTION", true, "transaction control (start)"},
      {"end", true, "transaction control (end)"},
      {"abort", true, "transaction control (abort)"},
      {"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", true,
       "transaction control (set transaction)"},
      {"SET LOCAL transaction_read_only = on", true,
       "transaction control (set transaction_read_only)"},
      // Session state outlives the step, or cannot run in a transaction.
      {"PREPARE TRANSACTION 'x'", true, "'prepare' is refused"},
      {"prepare q AS SELECT 1", true, "'prepare' is refused"},
      {"SET search_path = evil", true, "'set' is refused"},
      {"SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", true, "'set' is refused"},
      {"reset all", true, "'reset' is refused"},
      {"discard all", true, "'discard' is refused"},
      {"listen x", true, "'listen' is refused"},
      {"unlisten *", true, "'unlisten' is refused"},
      {"VACUUM runs", true, "'vacuum' is refused"},
      {"checkpoint", true, "'checkpoint' is refused"},
      {"COPY t FROM STDIN", true, "'copy' is refused"},
      {"deallocate all", true, "'deallocate' is refused"},
      {"LOAD 'x'", true, "'load' is refused"},
      // One statement per call.
      {"SELECT 1; SELECT 2", true, "several statements"},
      {"SELECT 1;;DELETE FROM t", true, "several statements"},
      {"", true, "empty statement"},
      {"   ", true, "empty statement"},
      {"-- only a comment", true, "empty statement"},
      // Look-alikes that are fine: keywords or semicolons inside literals,
      // comments or dollar quotes, a trailing semicolon, SET LOCAL, SET
      // CONSTRAINTS, a quoted identifier.
      {"SELECT ';' AS s", false, ""},
      {"SELECT $$a;b$$", false, ""},
      {"SELECT $tag$ ; commit $tag$", false, ""},
      {"SELECT 1 -- ; SELECT 2", false, ""},
      {"SELECT 1 /* ; */", false, ""},
      {"SELECT 1;", false, ""},
      {"SELECT E'it\\'s;'", false, ""},
      {"SELECT 'it''s;'", false, ""},
      {"SET LOCAL statement_timeout = 1000", false, ""},
      {"SET CONSTRAINTS ALL DEFERRED", false, ""},
      {"INSERT INTO \"begin\" VALUES ($1)", false, ""},
      {"WITH x AS (SELECT 1) SELECT * FROM x", false, ""},
      {"update t set v = $1 where id = $2", false, ""},
      {"SELECT pg_notify('c', 'x')", false, ""},
  };
  return kCases;
}

TEST(StepSqlGuard, RefusesExactlyTheListedStatements) {
  for (const GuardCase& c : Cases()) {
    const std::optional<std::string> refusal = StepSqlRefusal(c.sql);
    EXPECT_EQ(refusal.has_value(), c.refused) << "statement: " << c.sql;
    if (refusal && c.refused) {
      EXPECT_NE(refusal->find(c.reason), std::string::npos)
          << "statement: " << c.sql << "\nrefusal: " << *refusal;
    }
  }
}

}  // namespace
}  // namespace cairn::store
