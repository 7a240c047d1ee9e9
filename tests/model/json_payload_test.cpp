// Unit tests for core/model/json_payload.hpp: the JSON a caller passes as a
// run's input or a signal's payload, and the refusals naming what and why.
// No database.
#include "json_payload.hpp"

#include <gtest/gtest.h>

#include <string>

#include "errors.hpp"

namespace cairn {
namespace {

std::string Refusal(const std::string& text) {
  try {
    ParseJsonPayload("--input", text);
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(ParseJsonPayload, ParsesValues) {
  EXPECT_EQ(ParseJsonPayload("--input", R"({"a": [1, "]", {"b": null}]})"),
            Json::parse(R"({"a": [1, "]", {"b": null}]})"));
  EXPECT_EQ(ParseJsonPayload("--payload", "42"), Json(42));
}

TEST(ParseJsonPayload, RefusesInvalidJsonNamingTheOption) {
  EXPECT_NE(Refusal("{\"a\": }").find("--input is not valid JSON"), std::string::npos);
  EXPECT_NE(Refusal("").find("--input is not valid JSON"), std::string::npos);
}

TEST(ParseJsonPayload, RefusesANumberTooLargeForADouble) {
  // nlohmann throws out_of_range, not parse_error, for it: it escaped as an
  // unexpected error (found by the JSON payload fuzz target).
  EXPECT_NE(Refusal("-0.4000e30000").find("--input is not valid JSON"), std::string::npos)
      << Refusal("-0.4000e30000");
  EXPECT_NE(Refusal(R"({"n": 1e999})").find("--input is not valid JSON"), std::string::npos);
}

TEST(ParseJsonPayload, RefusesTextOverTheSizeLimit) {
  const std::string big = "\"" + std::string(kMaxPayloadBytes, 'x') + "\"";
  EXPECT_NE(Refusal(big).find("is more than 1048576 bytes"), std::string::npos);
}

TEST(ParseJsonPayload, RefusesNestingPastTheLimitWithTheOffset) {
  const std::string at_limit =
      std::string(kMaxPayloadDepth, '[') + std::string(kMaxPayloadDepth, ']');
  EXPECT_EQ(Refusal(at_limit), "accepted");
  const std::string deeper = "[" + at_limit + "]";
  EXPECT_NE(Refusal(deeper).find("nests deeper than 64 levels (at byte 64)"), std::string::npos)
      << Refusal(deeper);
  // Brackets inside strings, escaped quotes included, do not count.
  const std::string in_string = "[\"\\\"" + std::string(100, '[') + "\"]";
  EXPECT_EQ(Refusal(in_string), "accepted");
}

}  // namespace
}  // namespace cairn
