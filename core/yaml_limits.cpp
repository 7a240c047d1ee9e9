// YAML limits, parsing and strict typed readers; see yaml_limits.hpp.
#include "yaml_limits.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>

#include "definition.hpp"

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

// The scan state of CheckYamlLimits; see there. It follows YAML's rules for
// where a token starts closely enough that quotes and brackets inside plain
// scalars ("it's", "a[0]") are not mistaken for structure.
class DepthScanner {
 public:
  DepthScanner(const std::string& source, const YamlLimits& limits)
      : source_(source), limits_(limits) {}

  void Line(std::string_view line, int number) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    number_ = number;
    std::size_t indent = 0;
    while (indent < line.size() && (line[indent] == ' ' || line[indent] == '\t')) ++indent;
    const bool blank = indent == line.size();

    if (block_scalar_indent_ >= 0) {
      if (blank || static_cast<int>(indent) > block_scalar_indent_) return;
      block_scalar_indent_ = -1;
    }

    std::size_t pos = indent;
    entry_content_ = std::string_view::npos;
    entry_indent_ = 0;
    const bool block_context = !in_single_ && !in_double_ && flow_depth_ == 0;
    if (block_context) {
      if (blank || line[indent] == '#') return;
      if (indent == 0 && (line.starts_with("---") || line.starts_with("...")) &&
          (line.size() == 3 || line[3] == ' ' || line[3] == '\t')) {
        indents_.clear();
        pos = 3;
      } else if (indent == 0 && line[0] == '%') {
        return;  // a directive
      } else {
        while (!indents_.empty() && indents_.back() >= indent) indents_.pop_back();
        indents_.push_back(indent);
        Check();
        // "- - - x": each block entry indicator opens one more level.
        while (pos < line.size() && (line[pos] == '-' || line[pos] == '?') &&
               (pos + 1 == line.size() || line[pos + 1] == ' ' || line[pos + 1] == '\t')) {
          entry_indent_ = static_cast<int>(indents_.back());
          ++pos;
          while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
          indents_.push_back(pos);
          entry_content_ = pos;
          Check();
        }
      }
    }
    ScanCharacters(line, pos);
  }

 private:
  int Depth() const { return static_cast<int>(indents_.size()) + flow_depth_; }

  void Check() const {
    if (Depth() > limits_.max_depth) {
      throw ConfigError(source_, number_, "",
                        "YAML nesting is deeper than " + std::to_string(limits_.max_depth) +
                            " levels; refusing to parse it");
    }
  }

  void ScanCharacters(std::string_view line, std::size_t pos) {
    // Quotes, brackets and block scalar headers mean something only where a
    // token starts: at the start of the content, after ": ", or after a flow
    // indicator. Elsewhere they are part of a plain scalar.
    bool token_start = true;
    for (; pos < line.size(); ++pos) {
      const char c = line[pos];
      if (in_double_) {
        if (c == '\\') {
          ++pos;
        } else if (c == '"') {
          in_double_ = false;
        }
        continue;
      }
      if (in_single_) {
        if (c == '\'') {
          if (pos + 1 < line.size() && line[pos + 1] == '\'') {
            ++pos;
          } else {
            in_single_ = false;
          }
        }
        continue;
      }
      if (c == ' ' || c == '\t') {
        if (pos + 1 < line.size() && line[pos + 1] == '#') return;  // a comment
        continue;
      }
      if (c == '#' && (pos == 0 || line[pos - 1] == ' ' || line[pos - 1] == '\t')) return;
      if (c == ':' && (pos + 1 == line.size() || line[pos + 1] == ' ' || line[pos + 1] == '\t' ||
                       (flow_depth_ > 0 && (line[pos + 1] == ',' || line[pos + 1] == ']' ||
                                            line[pos + 1] == '}')))) {
        token_start = true;
        continue;
      }
      if (flow_depth_ > 0 && (c == ',' || c == '?')) {
        token_start = true;
        continue;
      }
      if (flow_depth_ > 0 && (c == ']' || c == '}')) {
        --flow_depth_;
        token_start = false;
        continue;
      }
      if (!token_start) continue;
      if (c == '"') {
        in_double_ = true;
        token_start = false;
      } else if (c == '\'') {
        in_single_ = true;
        token_start = false;
      } else if (c == '[' || c == '{') {
        ++flow_depth_;
        Check();
      } else if (flow_depth_ == 0 && (c == '|' || c == '>') && IsBlockScalarHeader(line, pos)) {
        // Content lines are those indented more than the node that owns the
        // scalar: the sequence entry for "- |", else the key's column.
        block_scalar_indent_ = pos == entry_content_ ? entry_indent_
                               : indents_.empty()    ? 0
                                                     : static_cast<int>(indents_.back());
        return;
      } else if (c != '&' && c != '!' && c != '*') {
        token_start = false;
      } else {
        // An anchor, tag or alias: the node proper starts after the blank.
        while (pos + 1 < line.size() && line[pos + 1] != ' ' && line[pos + 1] != '\t' &&
               !(flow_depth_ > 0 && (line[pos + 1] == ',' || line[pos + 1] == ']' ||
                                     line[pos + 1] == '}'))) {
          ++pos;
        }
      }
    }
  }

  static bool IsBlockScalarHeader(std::string_view line, std::size_t pos) {
    for (++pos; pos < line.size(); ++pos) {
      const char c = line[pos];
      if (c == '+' || c == '-' || (c >= '1' && c <= '9')) continue;
      return c == ' ' || c == '\t';  // the rest is blanks or a comment
    }
    return true;
  }

  const std::string& source_;
  const YamlLimits& limits_;
  int number_ = 0;
  std::vector<std::size_t> indents_;  // block indentation levels, strictly increasing
  int flow_depth_ = 0;
  bool in_single_ = false;
  bool in_double_ = false;
  int block_scalar_indent_ = -1;  // >= 0: skipping lines indented more than this
  std::size_t entry_content_ = std::string_view::npos;  // column after this line's "- "
  int entry_indent_ = 0;                                // column of that "-"
};

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

void CheckYamlLimits(std::string_view text, const std::string& source, const YamlLimits& limits) {
  if (text.size() > limits.max_bytes) {
    throw ConfigError(source, 0, "",
                      "input is " + std::to_string(text.size()) + " bytes, more than the limit of " +
                          std::to_string(limits.max_bytes) + " bytes");
  }
  DepthScanner scanner(source, limits);
  int number = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    scanner.Line(text.substr(start, end - start), ++number);
    start = end + 1;
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
      throw ConfigError(source, 0, "",
                        "file is more than the limit of " + std::to_string(limits.max_bytes) +
                            " bytes");
    }
  }
  if (in.bad()) throw ConfigError(source, 0, "", "read error");
  return text;
}

namespace yaml {

YAML::Node Parse(std::string_view text, const std::string& source, const YamlLimits& limits) {
  CheckYamlLimits(text, source, limits);
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    const int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    throw ConfigError(source, line, "", "malformed YAML: " + e.msg);
  }
  if (documents.empty()) return YAML::Node();
  if (documents.size() > 1) {
    throw ConfigError(source, LineOf(documents[1]), "",
                      "expected one YAML document, found " + std::to_string(documents.size()));
  }
  return documents.front();
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
  const std::string range = max >= INT32_MAX ? ">= " + std::to_string(min)
                                             : "between " + std::to_string(min) + " and " +
                                                   std::to_string(max);
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
        if (line > 0) value = YAML::Load(std::string(static_cast<std::size_t>(line - 1), '\n') + "~");
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
