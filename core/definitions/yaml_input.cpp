// YAML limits, parsing and strict typed readers; see yaml_input.hpp.
#include "yaml_input.hpp"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "byte_size.hpp"
#include "duration.hpp"

namespace cairn {

namespace {

std::string FormatConfigError(const std::string& source, int line, const std::string& key_path,
                              const std::string& problem) {
  std::string out = source;
  if (line > 0) out += ":" + std::to_string(line);
  out += ": ";
  if (!key_path.empty()) out += key_path + ": ";
  out += problem;
  return out;
}

// Walks the parsed tree without recursion, counting nested collections and
// visited nodes: an alias counts again wherever it is used, so a document of
// aliases of aliases cannot expand into more nodes than the limit lets pass.
void CheckTree(const YAML::Node& root, const std::string& source, const YamlLimits& limits) {
  struct Pending {
    YAML::Node node;
    int depth;
  };
  std::vector<Pending> pending{{root, root.IsSequence() || root.IsMap() ? 1 : 0}};
  std::size_t visited = 0;
  while (!pending.empty()) {
    Pending current = std::move(pending.back());
    pending.pop_back();
    if (++visited > limits.max_nodes) {
      throw ConfigError(source, yaml::LineOf(current.node), "",
                        "YAML document has more than " + std::to_string(limits.max_nodes) +
                            " nodes (aliases count each time they are used); refusing it");
    }
    if (current.depth > limits.max_depth) {
      throw ConfigError(source, yaml::LineOf(current.node), "",
                        "YAML nesting is deeper than " + std::to_string(limits.max_depth) +
                            " levels; refusing to parse it");
    }
    auto push = [&](const YAML::Node& child) {
      const bool collection = child.IsSequence() || child.IsMap();
      pending.push_back({child, current.depth + (collection ? 1 : 0)});
    };
    if (current.node.IsSequence()) {
      for (const auto& item : current.node) push(item);
    } else if (current.node.IsMap()) {
      for (const auto& entry : current.node) {
        push(entry.first);
        push(entry.second);
      }
    }
  }
}

std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string Scalar(const YAML::Node& node, const std::string& source, const std::string& path,
                   const char* expected) {
  if (!node.IsScalar()) yaml::Fail(source, node, path, std::string("must be ") + expected);
  return node.Scalar();
}

}  // namespace

ConfigError::ConfigError(std::string source, int line, std::string key_path, std::string problem)
    : InvalidArgumentError(FormatConfigError(source, line, key_path, problem)),
      source_(std::move(source)),
      line_(line),
      key_path_(std::move(key_path)),
      problem_(std::move(problem)) {}

void CheckYamlSize(std::string_view text, const std::string& source, const YamlLimits& limits) {
  if (text.size() > limits.max_bytes) {
    throw ConfigError(source, 0, "",
                      "input is " + std::to_string(text.size()) +
                          " bytes, more than the limit of " + std::to_string(limits.max_bytes) +
                          " bytes");
  }
}

std::string ReadYamlFile(const std::filesystem::path& file, const YamlLimits& limits) {
  const std::string source = file.string();
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (ec || !std::filesystem::exists(status)) {
    throw ConfigError(source, 0, "", "cannot read file: " + (ec ? ec.message() : "no such file"));
  }
  if (std::filesystem::is_directory(status)) {
    throw ConfigError(source, 0, "", "is a directory, expected a YAML file");
  }
  if (std::filesystem::is_regular_file(status)) {
    const auto size = std::filesystem::file_size(file, ec);
    if (!ec && size > limits.max_bytes) {
      throw ConfigError(source, 0, "",
                        "file is " + std::to_string(size) + " bytes, more than the limit of " +
                            std::to_string(limits.max_bytes) + " bytes");
    }
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError(source, 0, "", "cannot open file for reading");
  std::string text;
  char buffer[64 * 1024];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (text.size() > limits.max_bytes) {
      throw ConfigError(
          source, 0, "",
          "file is more than the limit of " + std::to_string(limits.max_bytes) + " bytes");
    }
  }
  if (in.bad()) throw ConfigError(source, 0, "", "read error");
  return text;
}

namespace yaml {

namespace {

// Where each document of a stream starts, from yaml-cpp's events alone.
// YAML::LoadAll is not used: on some malformed input (a lone ",") yaml-cpp
// 0.7 returns one empty document after another without reading on, for ever.
class DocumentStarts : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  std::vector<YAML::Mark> starts;
};

}  // namespace

YAML::Node Parse(std::string_view text, const std::string& source, const YamlLimits& limits) {
  CheckYamlSize(text, source, limits);
  const std::string copy(text);
  YAML::Node root;
  DocumentStarts documents;
  try {
    std::istringstream in(copy);
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(documents)) {
      const auto& starts = documents.starts;
      if (starts.size() > 1 && starts.back().pos <= starts[starts.size() - 2].pos) {
        const YAML::Mark& at = starts.back();
        const char what = at.pos >= 0 && static_cast<size_t>(at.pos) < copy.size()
                              ? copy[static_cast<size_t>(at.pos)]
                              : ' ';
        throw ConfigError(source, at.line + 1, "",
                          std::string("malformed YAML: unexpected '") + what + "' at column " +
                              std::to_string(at.column + 1));
      }
    }
    if (documents.starts.size() == 1) root = YAML::Load(copy);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own guard stops its recursive parser long before the stack
    // ends; the nesting is past our limit too.
    throw ConfigError(source, e.mark.is_null() ? 0 : e.mark.line + 1, "",
                      "YAML nesting is deeper than " + std::to_string(limits.max_depth) +
                          " levels; refusing to parse it");
  } catch (const YAML::Exception& e) {
    const int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    throw ConfigError(source, line, "", "malformed YAML: " + e.msg);
  }
  if (documents.starts.empty()) return YAML::Node();
  if (documents.starts.size() > 1) {
    throw ConfigError(
        source, documents.starts[1].line + 1, "",
        "expected one YAML document, found " + std::to_string(documents.starts.size()));
  }
  CheckTree(root, source, limits);
  return root;
}

int LineOf(const YAML::Node& node) {
  if (!node.IsDefined()) return 0;
  const YAML::Mark mark = node.Mark();
  return mark.is_null() ? 0 : mark.line + 1;
}

void Fail(const std::string& source, const YAML::Node& node, const std::string& path,
          const std::string& problem) {
  throw ConfigError(source, LineOf(node), path, problem);
}

std::string Join(const std::string& path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return path + "." + std::string(key);
}

std::string Index(const std::string& path, std::size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

void CheckMap(const YAML::Node& node, const std::string& source, const std::string& path,
              std::initializer_list<std::string_view> allowed) {
  CheckMap(node, source, path, std::vector<std::string_view>(allowed));
}

void CheckMap(const YAML::Node& node, const std::string& source, const std::string& path,
              const std::vector<std::string_view>& allowed) {
  if (!node.IsMap()) Fail(source, node, path, "must be a mapping");
  std::set<std::string, std::less<>> seen;
  for (const auto& entry : node) {
    const YAML::Node& key = entry.first;
    if (!key.IsScalar()) Fail(source, key, path, "mapping keys must be plain strings");
    const std::string& name = key.Scalar();
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::string problem = "unknown key \"" + name + "\"";
      std::string_view closest;
      std::size_t best = 3;
      for (std::string_view candidate : allowed) {
        const std::size_t d = EditDistance(name, candidate);
        if (d < best) {
          best = d;
          closest = candidate;
        }
      }
      if (!closest.empty()) {
        problem += " (did you mean \"" + std::string(closest) + "\"?)";
      } else {
        problem += " (expected one of:";
        for (std::string_view candidate : allowed) problem += " " + std::string(candidate);
        problem += ")";
      }
      Fail(source, key, Join(path, name), problem);
    }
    if (!seen.insert(name).second) Fail(source, key, Join(path, name), "duplicate key");
  }
}

std::string ReadString(const YAML::Node& node, const std::string& source, const std::string& path,
                       bool allow_empty) {
  if (allow_empty && node.IsNull()) return "";
  std::string value = Scalar(node, source, path, "a string");
  if (!allow_empty && value.empty()) Fail(source, node, path, "must not be empty");
  return value;
}

int64_t ReadInt(const YAML::Node& node, const std::string& source, const std::string& path,
                int64_t min, int64_t max) {
  const std::string range = max >= INT32_MAX
                                ? ">= " + std::to_string(min)
                                : "between " + std::to_string(min) + " and " + std::to_string(max);
  const std::string problem = "must be an integer " + range;
  if (!node.IsScalar()) Fail(source, node, path, problem);
  const std::string& text = node.Scalar();
  int64_t value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (begin != end && *begin == '+') ++begin;
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (begin == end || ec != std::errc() || ptr != end || value < min || value > max) {
    Fail(source, node, path, problem + ", got \"" + text + "\"");
  }
  return value;
}

double ReadDouble(const YAML::Node& node, const std::string& source, const std::string& path) {
  if (!node.IsScalar()) Fail(source, node, path, "must be a number");
  const std::string& text = node.Scalar();
  char* end = nullptr;
  const double value = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value)) {
    Fail(source, node, path, "must be a number, got \"" + text + "\"");
  }
  return value;
}

bool ReadBool(const YAML::Node& node, const std::string& source, const std::string& path) {
  if (node.IsScalar()) {
    const std::string& text = node.Scalar();
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
    Fail(source, node, path, "must be true or false, got \"" + text + "\"");
  }
  Fail(source, node, path, "must be true or false");
}

std::chrono::milliseconds ReadDuration(const YAML::Node& node, const std::string& source,
                                       const std::string& path) {
  const std::string text = Scalar(node, source, path, "a duration (e.g. 250ms, 30s, 5m, 2h, 1d)");
  try {
    return ParseDuration(text);
  } catch (const InvalidArgumentError& e) {
    Fail(source, node, path, e.what());
  }
}

uint64_t ReadByteSize(const YAML::Node& node, const std::string& source, const std::string& path) {
  const std::string text = Scalar(node, source, path, "a size such as 512MiB");
  try {
    return ParseByteSize(text);
  } catch (const InvalidArgumentError& e) {
    Fail(source, node, path, e.what());
  }
}

std::vector<std::string> ReadStringList(const YAML::Node& node, const std::string& source,
                                        const std::string& path, bool allow_empty_items) {
  if (!node.IsSequence()) Fail(source, node, path, "must be a list");
  std::vector<std::string> out;
  std::size_t i = 0;
  for (const auto& item : node) {
    out.push_back(ReadString(item, source, Index(path, i), allow_empty_items));
    ++i;
  }
  return out;
}

void LineMap::Record(const std::string& path, const YAML::Node& node) {
  lines_[path] = LineOf(node);
}

int LineMap::Find(std::string path) const {
  while (true) {
    if (auto it = lines_.find(path); it != lines_.end()) return it->second;
    const std::size_t cut = path.find_last_of(".[");
    if (cut == std::string::npos || cut == 0) return 0;
    path.resize(cut);
  }
}

YAML::Node Get(const YAML::Node& map, std::string_view key, const std::string& path,
               LineMap& lines) {
  const YAML::Node& const_map = map;  // the non-const operator[] would insert the key
  YAML::Node value = const_map[std::string(key)];
  if (!value.IsDefined()) return value;
  if (value.IsNull()) {
    // yaml-cpp marks an empty value ("key:") at the next token, often a
    // later line: report it at its key's line instead, through a null node
    // whose mark is that line.
    for (const auto& entry : map) {
      if (entry.first.IsScalar() && entry.first.Scalar() == key) {
        const int line = LineOf(entry.first);
        if (line > 0)
          value = YAML::Load(std::string(static_cast<std::size_t>(line - 1), '\n') + "~");
        break;
      }
    }
  }
  lines.Record(Join(path, key), value);
  return value;
}

YAML::Node Require(const YAML::Node& map, std::string_view key, const std::string& source,
                   const std::string& path, LineMap& lines) {
  YAML::Node value = Get(map, key, path, lines);
  if (!value.IsDefined()) {
    Fail(source, map, path.empty() ? std::string(key) : path,
         "missing required key \"" + std::string(key) + "\"");
  }
  return value;
}

}  // namespace yaml
}  // namespace cairn
