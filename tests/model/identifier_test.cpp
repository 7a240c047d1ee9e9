// Unit tests for core/identifier.hpp: which schema names and run ids cairn
// accepts, and that a rejected one gets an error naming it. No database.
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

}  // namespace
}  // namespace cairn
