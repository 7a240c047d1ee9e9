// Unit tests of cairn's log lines: every JSON line is valid JSON whatever the
// message holds, lines about a run carry its fields, text lines cannot be
// broken by a message, and repeated warnings are counted instead of written.
#include "logging.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace cairn {
namespace {

using Json = nlohmann::json;

// A logger writing into a string, through the given pieces.
struct Captured {
  std::ostringstream out;
  std::shared_ptr<spdlog::logger> logger;

  Captured(const std::string& format, std::chrono::seconds window) {
    auto sink =
        logging::MakeRateLimitedSink(std::make_shared<spdlog::sinks::ostream_sink_st>(out), window);
    sink->set_formatter(logging::MakeFormatter(format, "test"));
    logger = std::make_shared<spdlog::logger>("test", sink);
    logger->set_level(spdlog::level::trace);
  }

  std::vector<std::string> Lines() const {
    std::vector<std::string> lines;
    std::istringstream in(out.str());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
};

const std::vector<std::string>& HostileMessages() {
  static const std::vector<std::string> kMessages = {
      "plain",
      "with \"quotes\" and \\backslashes\\",
      "two\nlines\r\nand a tab\t",
      std::string("control \x01\x02\x1b[31m bytes and a nul \0 inside", 40),
      "not utf-8: \xff\xfe\xc3",
      "{\"looks\": \"like json\"}",
  };
  return kMessages;
}

TEST(JsonLogLines, EveryLineParsesWhateverTheMessageHolds) {
  Captured captured("json", std::chrono::seconds(0));
  for (const auto& message : HostileMessages()) captured.logger->info(message);
  const auto lines = captured.Lines();
  ASSERT_EQ(lines.size(), HostileMessages().size()) << captured.out.str();
  for (size_t i = 0; i < lines.size(); ++i) {
    const Json line = Json::parse(lines[i]);  // throws on an invalid line
    EXPECT_EQ(line["level"], "info");
    EXPECT_EQ(line["process"], "test");
    EXPECT_TRUE(line["time"].get<std::string>().ends_with("Z"));
    if (i < 4) {
      EXPECT_EQ(line["message"], HostileMessages()[i]);
    }
  }
}

TEST(JsonLogLines, LinesAboutARunCarryItsFields) {
  Captured captured("json", std::chrono::seconds(0));
  {
    const ScopedRunLog run({"9f1c", "order", "charge", 2});
    captured.logger->warn("card declined");
    {
      const ScopedRunLog nested({"child", "pick", "pick", 1});
      captured.logger->info("inner");
    }
    captured.logger->info("outer again");
  }
  captured.logger->info("no run");
  const auto lines = captured.Lines();
  ASSERT_EQ(lines.size(), 4u);
  const Json first = Json::parse(lines[0]);
  EXPECT_EQ(first["run_id"], "9f1c");
  EXPECT_EQ(first["workflow"], "order");
  EXPECT_EQ(first["step"], "charge");
  EXPECT_EQ(first["attempt"], 2);
  EXPECT_EQ(Json::parse(lines[1])["run_id"], "child");
  EXPECT_EQ(Json::parse(lines[2])["run_id"], "9f1c");
  EXPECT_FALSE(Json::parse(lines[3]).contains("run_id"));
}

TEST(TextLogLines, AMessageCannotBreakItsLine) {
  Captured captured("text", std::chrono::seconds(0));
  for (const auto& message : HostileMessages()) captured.logger->error(message);
  const auto lines = captured.Lines();
  ASSERT_EQ(lines.size(), HostileMessages().size()) << captured.out.str();
  EXPECT_NE(lines[2].find("two\\nlines\\r\\nand a tab\\t"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("\\x01\\x02\\x1b[31m"), std::string::npos) << lines[3];
  EXPECT_NE(lines[3].find("\\x00 inside"), std::string::npos) << lines[3];
}

TEST(RepeatedLogLines, IdenticalWarningsWithinTheWindowAreCounted) {
  Captured captured("text", std::chrono::seconds(3600));
  for (int i = 0; i < 1000; ++i) captured.logger->warn("poller: connection refused");
  captured.logger->warn("something else");
  for (int i = 0; i < 5; ++i) captured.logger->info("info lines are never held back");
  const auto lines = captured.Lines();
  ASSERT_EQ(lines.size(), 7u) << captured.out.str();
  EXPECT_NE(lines[0].find("poller: connection refused"), std::string::npos);
  EXPECT_NE(lines[1].find("something else"), std::string::npos);
}

TEST(RepeatedLogLines, AfterTheWindowTheNextOneSaysHowManyWereHeldBack) {
  Captured captured("text", std::chrono::seconds(0));
  // A zero window holds nothing back.
  for (int i = 0; i < 3; ++i) captured.logger->warn("again");
  EXPECT_EQ(captured.Lines().size(), 3u);

  Captured windowed("text", std::chrono::seconds(1));
  for (int i = 0; i < 4; ++i) windowed.logger->warn("again");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  windowed.logger->warn("again");
  const auto lines = windowed.Lines();
  ASSERT_EQ(lines.size(), 2u) << windowed.out.str();
  EXPECT_NE(lines[1].find("again (and 3 more identical lines in the last 1s)"), std::string::npos)
      << lines[1];
}

TEST(EscapeControl, EscapesOnlyControlCharacters) {
  EXPECT_EQ(logging::EscapeControl("a\nb\x7f"
                                   "c é"),
            "a\\nb\\x7fc é");
}

}  // namespace
}  // namespace cairn
