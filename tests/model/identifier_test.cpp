// Unit tests for core/identifier.hpp: which schema names, run ids and keys
// cairn accepts, and that a rejected one gets an error naming it. No database.
#include "identifier.hpp"

#include <gtest/gtest.h>

#include <string>

#include "errors.hpp"

namespace cairn {
namespace {

TEST(IsValidIdentifier, AcceptsPlainNames) {
  EXPECT_TRUE(IsValidIdentifier("cairn"));
  EXPECT_TRUE(IsValidIdentifier("Cairn_2"));
  EXPECT_TRUE(IsValidIdentifier("_private"));
  EXPECT_TRUE(IsValidIdentifier("a"));
  EXPECT_TRUE(IsValidIdentifier("_"));
}

TEST(IsValidIdentifier, AcceptsSixtyThreeCharacters) {
  EXPECT_TRUE(IsValidIdentifier(std::string(63, 'a')));
  EXPECT_TRUE(IsValidIdentifier("_" + std::string(62, '9')));
}

TEST(IsValidIdentifier, RejectsSixtyFourCharacters) {
  // PostgreSQL would silently truncate it to 63 and name another schema.
  EXPECT_FALSE(IsValidIdentifier(std::string(64, 'a')));
}

TEST(IsValidIdentifier, RejectsEmpty) { EXPECT_FALSE(IsValidIdentifier("")); }

TEST(IsValidIdentifier, RejectsLeadingDigit) {
  EXPECT_FALSE(IsValidIdentifier("1cairn"));
  EXPECT_FALSE(IsValidIdentifier("0"));
}

TEST(IsValidIdentifier, RejectsQuotesSemicolonsAndSpaces) {
  EXPECT_FALSE(IsValidIdentifier("cairn\""));
  EXPECT_FALSE(IsValidIdentifier("\"cairn\""));
  EXPECT_FALSE(IsValidIdentifier("cairn'"));
  EXPECT_FALSE(IsValidIdentifier("cairn;drop schema public"));
  EXPECT_FALSE(IsValidIdentifier("cairn schema"));
  EXPECT_FALSE(IsValidIdentifier(" cairn"));
  EXPECT_FALSE(IsValidIdentifier("cairn\t"));
  EXPECT_FALSE(IsValidIdentifier("cairn-prod"));
  EXPECT_FALSE(IsValidIdentifier("public.cairn"));
  EXPECT_FALSE(IsValidIdentifier(std::string("cai\0rn", 6)));
}

TEST(IsValidIdentifier, RejectsNonAsciiLetters) {
  EXPECT_FALSE(IsValidIdentifier("caírn"));
  EXPECT_FALSE(IsValidIdentifier("\xc3\xa9t\xc3\xa9"));  // "été"
  EXPECT_FALSE(IsValidIdentifier("схема"));
  EXPECT_FALSE(IsValidIdentifier("cairn\xe2\x80\x8b"));  // zero-width space
}

TEST(ValidateIdentifier, AcceptsAValidName) {
  EXPECT_NO_THROW(ValidateIdentifier("schema", "cairn"));
}

TEST(ValidateIdentifier, ThrowsInvalidArgumentNamingTheValue) {
  try {
    ValidateIdentifier("schema", "bad;name");
    FAIL() << "ValidateIdentifier accepted bad;name";
  } catch (const InvalidArgumentError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    std::string message = e.what();
    EXPECT_NE(message.find("bad;name"), std::string::npos) << message;
    EXPECT_NE(message.find("schema"), std::string::npos) << message;
  }
}

TEST(ValidateIdentifier, RejectsEveryInvalidShape) {
  for (const std::string& name :
       {std::string(), std::string(64, 'x'), std::string("9lives"), std::string("a b"),
        std::string("x\"y"), std::string("ünïcode")}) {
    EXPECT_THROW(ValidateIdentifier("schema", name), InvalidArgumentError) << name;
  }
}

TEST(ValidateRunId, AcceptsCanonicalUuids) {
  EXPECT_NO_THROW(ValidateRunId("0b9d3c55-6f0e-4c1e-9a53-2d1f0f3b7a10"));
  EXPECT_NO_THROW(ValidateRunId("0B9D3C55-6F0E-4C1E-9A53-2D1F0F3B7A10"));
}

TEST(ValidateRunId, RejectsOtherShapesNamingTheValue) {
  for (const std::string& id :
       {std::string(), std::string("order-42"), std::string("0b9d3c556f0e4c1e9a532d1f0f3b7a10"),
        std::string("0b9d3c55-6f0e-4c1e-9a53-2d1f0f3b7a1g"),
        std::string("0b9d3c55-6f0e-4c1e-9a53-2d1f0f3b7a10 "),
        std::string("{0b9d3c55-6f0e-4c1e-9a53-2d1f0f3b7a1}")}) {
    try {
      ValidateRunId(id);
      ADD_FAILURE() << "accepted " << id;
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("\"" + id + "\""), std::string::npos) << e.what();
    }
  }
}

TEST(QuoteIdentifier, DoubleQuotesTheName) { EXPECT_EQ(QuoteIdentifier("Cairn"), "\"Cairn\""); }

TEST(ReservedSchemaReason, ReservesPostgresSchemasAndPublicInAnyCase) {
  for (const char* name : {"public", "PUBLIC", "Public", "information_schema", "INFORMATION_SCHEMA",
                           "pg_catalog", "pg_toast", "pg_temp_3", "PG_cairn", "pg_"}) {
    EXPECT_NE(ReservedSchemaReason(name), nullptr) << name;
  }
}

TEST(ReservedSchemaReason, LeavesOtherNamesAlone) {
  for (const char* name : {"cairn", "pgx", "pg", "publics", "my_public", "_pg_x", "information"}) {
    EXPECT_EQ(ReservedSchemaReason(name), nullptr) << name;
  }
}

TEST(ValidateSchemaName, RefusesReservedNamesSayingWhy) {
  EXPECT_NO_THROW(ValidateSchemaName("cairn"));
  try {
    ValidateSchemaName("information_schema");
    FAIL() << "accepted information_schema";
  } catch (const InvalidArgumentError& e) {
    EXPECT_EQ(std::string(e.what()),
              "schema name \"information_schema\" is reserved: it is PostgreSQL's catalog of the "
              "SQL standard");
  }
  try {
    ValidateSchemaName("pg_cairn");
    FAIL() << "accepted pg_cairn";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("\"pg_cairn\" is reserved"), std::string::npos);
  }
  EXPECT_THROW(ValidateSchemaName("public"), InvalidArgumentError);
  EXPECT_THROW(ValidateSchemaName("bad;name"), InvalidArgumentError);
}

TEST(ValidateKey, AcceptsOneTo512Bytes) {
  EXPECT_NO_THROW(ValidateKey("--key", "k"));
  EXPECT_NO_THROW(ValidateKey("--key", std::string(kMaxKeyBytes, 'k')));
}

TEST(ValidateKey, RefusesEmptyAndOversizedKeysNamingWhat) {
  try {
    ValidateKey("--key", "");
    FAIL() << "accepted an empty key";
  } catch (const InvalidArgumentError& e) {
    EXPECT_EQ(std::string(e.what()), "--key is empty");
  }
  try {
    ValidateKey("the correlation key", std::string(10000, 'k'));
    FAIL() << "accepted a 10,000-byte key";
  } catch (const InvalidArgumentError& e) {
    EXPECT_EQ(std::string(e.what()),
              "the correlation key is 10000 bytes, over the limit of 512 bytes");
  }
  EXPECT_THROW(ValidateKey("--key", std::string(kMaxKeyBytes + 1, 'k')), InvalidArgumentError);
}

}  // namespace
}  // namespace cairn
