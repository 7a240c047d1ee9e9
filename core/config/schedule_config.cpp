// The daemon config's `schedules:` section; see schedule_config.hpp.
#include "schedule_config.hpp"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>

#include "cron.hpp"
#include "definition.hpp"

namespace cairn {

namespace {

// A YAML value as JSON: quoted scalars are strings; plain scalars are null,
// booleans, integers, numbers or strings by their text (YAML 1.2 core schema).
// Depth is already bounded by yaml::Parse.
Json ToJsonValue(const YAML::Node& node, const std::string& source, const std::string& path) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return nullptr;
    case YAML::NodeType::Sequence: {
      Json out = Json::array();
      std::size_t i = 0;
      for (const auto& item : node)
        out.push_back(ToJsonValue(item, source, yaml::Index(path, i++)));
      return out;
    }
    case YAML::NodeType::Map: {
      Json out = Json::object();
      for (const auto& entry : node) {
        if (!entry.first.IsScalar()) yaml::Fail(source, entry.first, path, "keys must be strings");
        const std::string key = entry.first.Scalar();
        if (out.contains(key))
          yaml::Fail(source, entry.first, yaml::Join(path, key), "duplicate key");
        out[key] = ToJsonValue(entry.second, source, yaml::Join(path, key));
      }
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string& text = node.Scalar();
      if (node.Tag() == "!") return text;  // quoted
      if (text == "~" || text == "null" || text == "Null" || text == "NULL") return nullptr;
      if (text == "true" || text == "True" || text == "TRUE") return true;
      if (text == "false" || text == "False" || text == "FALSE") return false;
      int64_t integer = 0;
      const char* begin = text.data();
      const char* end = text.data() + text.size();
      if (auto [ptr, ec] = std::from_chars(begin, end, integer);
          !text.empty() && ec == std::errc() && ptr == end) {
        return integer;
      }
      if (!text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-' ||
                            text[0] == '+' || text[0] == '.')) {
        char* stop = nullptr;
        const double number = std::strtod(text.c_str(), &stop);
        if (stop == text.c_str() + text.size() && std::isfinite(number)) return number;
      }
      return text;
    }
    default:
      yaml::Fail(source, node, path, "unsupported YAML value");
  }
}

ScheduleDefinition ParseOne(const YAML::Node& node, const std::string& source,
                            const std::string& path, yaml::LineMap& lines) {
  yaml::CheckMap(node, source, path,
                 {"name", "workflow", "cron", "timezone", "queue", "input", "missed",
                  "catch_up_limit", "enabled"});
  ScheduleDefinition s;
  auto name = yaml::Require(node, "name", source, path, lines);
  s.name = yaml::ReadString(name, source, yaml::Join(path, "name"), false);
  if (!IsValidDefinitionName(s.name)) {
    yaml::Fail(
        source, name, yaml::Join(path, "name"),
        "invalid schedule name \"" + s.name + "\": must match ^[A-Za-z_][A-Za-z0-9_.-]{0,127}$");
  }
  auto workflow = yaml::Require(node, "workflow", source, path, lines);
  s.workflow = yaml::ReadString(workflow, source, yaml::Join(path, "workflow"), false);
  if (!IsValidDefinitionName(s.workflow)) {
    yaml::Fail(source, workflow, yaml::Join(path, "workflow"),
               "invalid workflow name \"" + s.workflow +
                   "\": must match ^[A-Za-z_][A-Za-z0-9_.-]{0,127}$");
  }
  auto cron = yaml::Require(node, "cron", source, path, lines);
  s.cron = yaml::ReadString(cron, source, yaml::Join(path, "cron"), false);
  try {
    CronSchedule::Parse(s.cron);
  } catch (const InvalidArgumentError& e) {
    yaml::Fail(source, cron, yaml::Join(path, "cron"), e.what());
  }
  if (auto v = yaml::Get(node, "timezone", path, lines); v.IsDefined()) {
    const std::string key = yaml::Join(path, "timezone");
    try {
      s.timezone = NormalizeScheduleTimezone(yaml::ReadString(v, source, key, false));
    } catch (const ConfigError&) {
      throw;
    } catch (const InvalidArgumentError& e) {
      yaml::Fail(source, v, key, e.what());
    }
  }
  if (auto v = yaml::Get(node, "queue", path, lines); v.IsDefined()) {
    s.queue = yaml::ReadString(v, source, yaml::Join(path, "queue"), false);
    if (!IsValidDefinitionName(s.queue)) {
      yaml::Fail(
          source, v, yaml::Join(path, "queue"),
          "invalid queue name \"" + s.queue + "\": must match ^[A-Za-z_][A-Za-z0-9_.-]{0,127}$");
    }
  }
  if (auto v = yaml::Get(node, "input", path, lines); v.IsDefined()) {
    if (!v.IsMap())
      yaml::Fail(source, v, yaml::Join(path, "input"), "must be a mapping (a JSON object)");
    s.input = ToJsonValue(v, source, yaml::Join(path, "input"));
  }
  YAML::Node missed = yaml::Get(node, "missed", path, lines);
  if (missed.IsDefined()) {
    const std::string value = yaml::ReadString(missed, source, yaml::Join(path, "missed"), false);
    if (value == "skip") {
      s.missed = MissedPolicy::kSkip;
    } else if (value == "catch_up") {
      s.missed = MissedPolicy::kCatchUp;
      s.catch_up_limit = kDefaultCatchUpLimit;
    } else {
      yaml::Fail(source, missed, yaml::Join(path, "missed"),
                 "must be one of skip | catch_up, got \"" + value + "\"");
    }
  }
  if (auto v = yaml::Get(node, "catch_up_limit", path, lines); v.IsDefined()) {
    const std::string key = yaml::Join(path, "catch_up_limit");
    if (s.missed != MissedPolicy::kCatchUp) {
      yaml::Fail(source, v, key, "applies only with missed: catch_up");
    }
    s.catch_up_limit = static_cast<int>(yaml::ReadInt(v, source, key, 1, kMaxCatchUpLimit));
  }
  if (auto v = yaml::Get(node, "enabled", path, lines); v.IsDefined()) {
    s.enabled = yaml::ReadBool(v, source, yaml::Join(path, "enabled"));
  }
  return s;
}

}  // namespace

std::vector<ScheduleDefinition> ParseSchedules(const YAML::Node& node, const std::string& source,
                                               yaml::LineMap& lines) {
  const std::string path = "schedules";
  std::vector<ScheduleDefinition> out;
  if (node.IsNull()) return out;
  if (!node.IsSequence()) yaml::Fail(source, node, path, "must be a list of schedules");
  std::set<std::string> names;
  std::size_t i = 0;
  for (const auto& item : node) {
    const std::string item_path = yaml::Index(path, i++);
    lines.Record(item_path, item);
    ScheduleDefinition s = ParseOne(item, source, item_path, lines);
    if (!names.insert(s.name).second) {
      yaml::Fail(source, item["name"], yaml::Join(item_path, "name"),
                 "duplicate schedule name \"" + s.name + "\"");
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<ScheduleDefinition> ParseSchedulesFromString(std::string_view text,
                                                         const std::string& source) {
  const YAML::Node root = yaml::Parse(text, source);
  if (!root.IsDefined() || root.IsNull()) return {};
  yaml::LineMap lines;
  yaml::CheckMap(root, source, "", {"schedules"});
  YAML::Node node = yaml::Get(root, "schedules", "", lines);
  if (!node.IsDefined()) return {};
  return ParseSchedules(node, source, lines);
}

}  // namespace cairn
