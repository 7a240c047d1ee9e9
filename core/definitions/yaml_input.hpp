// Shared front end for cairn's YAML inputs (workflow definitions and the
// daemon config): the ConfigError every YAML problem is reported as, the caps
// on size, nesting and node count, and strict readers for typed values that
// report "file:line: key.path: problem". The byte cap is checked before any
// text reaches yaml-cpp, whose parser guards its own recursion (0.7's
// DeepRecursion, the fix of CVE-2017-5950); nesting and node count are checked
// on the parsed tree before anyone reads it. Only .cpp files include
// <yaml-cpp/yaml.h>; this header forward-declares YAML::Node so that it stays
// out of everybody else's includes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "errors.hpp"

namespace YAML {
class Node;
}

namespace cairn {

// A problem in a configuration or definition file. what() is
// "<source>:<line>: <key path>: <problem>"; the line (1-based) is left out
// when unknown (0), the key path when the problem is about the whole file.
class ConfigError : public InvalidArgumentError {
 public:
  ConfigError(std::string source, int line, std::string key_path, std::string problem);
  const std::string& source() const { return source_; }
  int line() const { return line_; }
  const std::string& key_path() const { return key_path_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string source_;
  int line_;
  std::string key_path_;
  std::string problem_;
};

struct YamlLimits {
  std::size_t max_bytes = 4 * 1024 * 1024;
  int max_depth = 64;               // nested sequences and mappings
  std::size_t max_nodes = 1000000;  // every node, an alias each time it is used
};

// Refuses text larger than limits.max_bytes with a ConfigError naming source.
void CheckYamlSize(std::string_view text, const std::string& source, const YamlLimits& limits = {});

// Reads a whole file, refusing one larger than limits.max_bytes before (and
// while) reading it. Throws ConfigError naming the file.
std::string ReadYamlFile(const std::filesystem::path& file, const YamlLimits& limits = {});

namespace yaml {

// CheckYamlSize, then parses exactly one YAML document and checks its nesting
// and node count. A syntax error, more than one document, or a document past
// the limits is a ConfigError with file and line. An empty input yields a
// null node.
YAML::Node Parse(std::string_view text, const std::string& source, const YamlLimits& limits = {});

// The 1-based line of a node, 0 when the node is undefined.
int LineOf(const YAML::Node& node);

// Throws ConfigError at the node's line.
[[noreturn]] void Fail(const std::string& source, const YAML::Node& node, const std::string& path,
                       const std::string& problem);

// "a.b" + "c" -> "a.b.c"; "" + "c" -> "c".
std::string Join(const std::string& path, std::string_view key);
// "a.steps" + 2 -> "a.steps[2]".
std::string Index(const std::string& path, std::size_t index);

// Requires node to be a mapping whose keys are unique scalars from allowed.
// An unknown key names the closest allowed key when one is near.
void CheckMap(const YAML::Node& node, const std::string& source, const std::string& path,
              std::initializer_list<std::string_view> allowed);
void CheckMap(const YAML::Node& node, const std::string& source, const std::string& path,
              const std::vector<std::string_view>& allowed);

// Typed scalar readers: node must be defined; path is the key path of node.
std::string ReadString(const YAML::Node& node, const std::string& source, const std::string& path,
                       bool allow_empty);
int64_t ReadInt(const YAML::Node& node, const std::string& source, const std::string& path,
                int64_t min, int64_t max);
double ReadDouble(const YAML::Node& node, const std::string& source, const std::string& path);
bool ReadBool(const YAML::Node& node, const std::string& source, const std::string& path);
std::chrono::milliseconds ReadDuration(const YAML::Node& node, const std::string& source,
                                       const std::string& path);
uint64_t ReadByteSize(const YAML::Node& node, const std::string& source, const std::string& path);
// A sequence of strings (a single scalar is not accepted).
std::vector<std::string> ReadStringList(const YAML::Node& node, const std::string& source,
                                        const std::string& path, bool allow_empty_items);

// Lines of the key paths read so far, so that rules checked after parsing
// (on the resulting struct) still report the right line.
class LineMap {
 public:
  void Record(const std::string& path, const YAML::Node& node);
  // The line of path, or of its nearest recorded ancestor; 0 when none.
  int Find(std::string path) const;

 private:
  std::map<std::string, int> lines_;
};

// The value of key in map (undefined when absent), recording its line under
// path.key. Require throws ConfigError at the map's line when it is absent.
YAML::Node Get(const YAML::Node& map, std::string_view key, const std::string& path,
               LineMap& lines);
YAML::Node Require(const YAML::Node& map, std::string_view key, const std::string& source,
                   const std::string& path, LineMap& lines);

}  // namespace yaml
}  // namespace cairn
