// Workflow definitions: YAML loading, validation, canonical JSON and hashing;
// see definition.hpp. Validation rules live in ValidateDefinition alone, so
// YAML, JSON and plugin-registered definitions obey the same ones.
#include "definition.hpp"

#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <set>

#include "errors.hpp"
#include "model.hpp"

namespace cairn {

namespace {

using std::chrono::milliseconds;

constexpr std::size_t kMaxSteps = 1000;
constexpr const char* kNamePattern = "^[A-Za-z_][A-Za-z0-9_.-]{0,127}$";

// Reports a problem at a key path relative to the workflow ("steps[1].run").
using FailFn = std::function<void(const std::string& path, const std::string& problem)>;

std::string Quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

void CheckName(const FailFn& fail, const std::string& path, const std::string& name) {
  if (!IsValidDefinitionName(name)) {
    fail(path, std::string("must match ") + kNamePattern + ", got " + Quoted(name));
  }
}

// Every semantic rule of a definition. fail must throw.
void ValidateDefinition(const WorkflowDefinition& d, const FailFn& fail) {
  CheckName(fail, "name", d.name);
  if (d.version < 1) fail("version", "must be an integer >= 1");
  CheckName(fail, "queue", d.queue);
  if (d.deadline && *d.deadline <= milliseconds::zero()) fail("deadline", "must be longer than 0");
  if (d.steps.empty()) fail("steps", "must list at least one step");
  if (d.steps.size() > kMaxSteps) {
    fail("steps", "has " + std::to_string(d.steps.size()) + " steps, more than the limit of " +
                      std::to_string(kMaxSteps));
  }
  std::map<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < d.steps.size(); ++i) {
    const StepDefinition& s = d.steps[i];
    const std::string p = "steps[" + std::to_string(i) + "]";
    CheckName(fail, p + ".name", s.name);
    if (auto [it, inserted] = seen.emplace(s.name, i); !inserted) {
      fail(p + ".name", "duplicate step name " + Quoted(s.name) + " (also steps[" +
                            std::to_string(it->second) + "])");
    }
    CheckName(fail, p + ".run", s.run);
    if (s.timeout <= milliseconds::zero()) fail(p + ".timeout", "must be longer than 0");
    if (const milliseconds most = kIdleInTransactionLimit - kTransactionalTimeoutMargin;
        s.transactional && s.timeout > most) {
      fail(p + ".timeout",
           "a transactional step runs inside its checkpoint's transaction, which the server "
           "ends after " +
               FormatDuration(kIdleInTransactionLimit) + " idle; at most " + FormatDuration(most) +
               ", got " + FormatDuration(s.timeout) +
               " (make the step non-transactional to run longer)");
    }
    if (s.compensate) {
      if (s.compensate->empty()) fail(p + ".compensate", "must name a plugin step, not be empty");
      CheckName(fail, p + ".compensate", *s.compensate);
    }
    if (s.on_wait_timeout && !d.FindStep(*s.on_wait_timeout)) {
      fail(p + ".on_wait_timeout",
           "names " + Quoted(*s.on_wait_timeout) + ", which is not a step of this workflow");
    }
    const RetryPolicy& r = s.retry;
    const std::string rp = p + ".retry";
    if (r.max_attempts < 1) fail(rp + ".max_attempts", "must be an integer >= 1");
    if (r.initial_backoff < milliseconds::zero()) {
      fail(rp + ".initial_backoff", "must not be negative");
    }
    if (r.max_backoff < r.initial_backoff) {
      fail(rp + ".max_backoff", "must be >= initial_backoff (" + FormatDuration(r.initial_backoff) +
                                    "), got " + FormatDuration(r.max_backoff));
    }
    if (!std::isfinite(r.multiplier) || r.multiplier < 1.0) {
      fail(rp + ".multiplier", "must be a number >= 1");
    }
    if (!std::isfinite(r.jitter) || r.jitter < 0.0 || r.jitter > 1.0) {
      fail(rp + ".jitter", "must be a number between 0 and 1");
    }
    for (std::size_t j = 0; j < r.non_retryable.size(); ++j) {
      if (r.non_retryable[j].empty()) {
        fail(rp + ".non_retryable[" + std::to_string(j) + "]", "must not be empty");
      }
    }
  }
}

// ---- YAML --------------------------------------------------------------

using yaml::LineMap;

using yaml::Get;
using yaml::Require;

RetryPolicy ParseRetry(const YAML::Node& node, const std::string& source, const std::string& path,
                       LineMap& lines) {
  yaml::CheckMap(node, source, path, RetryKeys());
  RetryPolicy r;
  if (auto v = Get(node, "max_attempts", path, lines); v.IsDefined()) {
    r.max_attempts =
        static_cast<int>(yaml::ReadInt(v, source, yaml::Join(path, "max_attempts"), 1, INT_MAX));
  }
  if (auto v = Get(node, "initial_backoff", path, lines); v.IsDefined()) {
    r.initial_backoff = yaml::ReadDuration(v, source, yaml::Join(path, "initial_backoff"));
  }
  if (auto v = Get(node, "max_backoff", path, lines); v.IsDefined()) {
    r.max_backoff = yaml::ReadDuration(v, source, yaml::Join(path, "max_backoff"));
  }
  if (auto v = Get(node, "multiplier", path, lines); v.IsDefined()) {
    r.multiplier = yaml::ReadDouble(v, source, yaml::Join(path, "multiplier"));
  }
  if (auto v = Get(node, "jitter", path, lines); v.IsDefined()) {
    r.jitter = yaml::ReadDouble(v, source, yaml::Join(path, "jitter"));
  }
  if (auto v = Get(node, "non_retryable", path, lines); v.IsDefined()) {
    const std::string p = yaml::Join(path, "non_retryable");
    r.non_retryable = yaml::ReadStringList(v, source, p, false);
    std::size_t i = 0;
    for (const auto& item : v) lines.Record(yaml::Index(p, i++), item);
  }
  return r;
}

StepDefinition ParseStep(const YAML::Node& node, const std::string& source, const std::string& path,
                         LineMap& lines) {
  yaml::CheckMap(node, source, path, StepKeys());
  StepDefinition s;
  s.name = yaml::ReadString(Require(node, "name", source, path, lines), source,
                            yaml::Join(path, "name"), false);
  s.run = s.name;
  if (auto v = Get(node, "run", path, lines); v.IsDefined()) {
    s.run = yaml::ReadString(v, source, yaml::Join(path, "run"), false);
  }
  if (auto v = Get(node, "timeout", path, lines); v.IsDefined()) {
    s.timeout = yaml::ReadDuration(v, source, yaml::Join(path, "timeout"));
  }
  if (auto v = Get(node, "transactional", path, lines); v.IsDefined()) {
    s.transactional = yaml::ReadBool(v, source, yaml::Join(path, "transactional"));
  }
  if (auto v = Get(node, "compensate", path, lines); v.IsDefined()) {
    const std::string p = yaml::Join(path, "compensate");
    if (!v.IsScalar() || v.Scalar().empty()) {
      yaml::Fail(source, v, p, "must name a plugin step, not be empty");
    }
    s.compensate = v.Scalar();
  }
  if (auto v = Get(node, "on_wait_timeout", path, lines); v.IsDefined()) {
    s.on_wait_timeout = yaml::ReadString(v, source, yaml::Join(path, "on_wait_timeout"), false);
  }
  if (auto v = Get(node, "retry", path, lines); v.IsDefined()) {
    s.retry = ParseRetry(v, source, yaml::Join(path, "retry"), lines);
  }
  s.source = source + ":" + std::to_string(yaml::LineOf(node));
  return s;
}

WorkflowDefinition ParseWorkflow(const YAML::Node& node, const std::string& source,
                                 const std::string& path) {
  yaml::CheckMap(node, source, path, WorkflowKeys());
  LineMap lines;
  lines.Record(path, node);
  WorkflowDefinition d;
  d.name = yaml::ReadString(Require(node, "name", source, path, lines), source,
                            yaml::Join(path, "name"), false);
  d.version = static_cast<int>(yaml::ReadInt(Require(node, "version", source, path, lines), source,
                                             yaml::Join(path, "version"), 1, INT_MAX));
  if (auto v = Get(node, "queue", path, lines); v.IsDefined()) {
    d.queue = yaml::ReadString(v, source, yaml::Join(path, "queue"), false);
  }
  if (auto v = Get(node, "deadline", path, lines); v.IsDefined()) {
    d.deadline = yaml::ReadDuration(v, source, yaml::Join(path, "deadline"));
  }
  if (auto v = Get(node, "key_scope", path, lines); v.IsDefined()) {
    const std::string scope = yaml::ReadString(v, source, yaml::Join(path, "key_scope"), false);
    d.key_scope = ParseKeyScope(scope);
    if (!d.key_scope) {
      yaml::Fail(source, v, yaml::Join(path, "key_scope"),
                 "must be forever or unfinished, got " + Quoted(scope));
    }
  }
  const YAML::Node steps = Require(node, "steps", source, path, lines);
  const std::string steps_path = yaml::Join(path, "steps");
  if (!steps.IsSequence()) yaml::Fail(source, steps, steps_path, "must be a list of steps");
  std::size_t i = 0;
  for (const auto& step : steps) {
    const std::string p = yaml::Index(steps_path, i++);
    lines.Record(p, step);
    d.steps.push_back(ParseStep(step, source, p, lines));
  }
  d.source = source + ":" + std::to_string(yaml::LineOf(node));
  ValidateDefinition(d, [&](const std::string& rel, const std::string& problem) {
    const std::string full = yaml::Join(path, rel);
    throw ConfigError(source, lines.Find(full), full, problem);
  });
  d.hash = ComputeHash(d);
  return d;
}

std::vector<WorkflowDefinition> ParseDocument(const YAML::Node& root, const std::string& source) {
  if (!root.IsDefined() || root.IsNull()) {
    throw ConfigError(source, 0, "",
                      "empty definition file: expected a mapping with a \"workflows\" list");
  }
  yaml::CheckMap(root, source, "", WorkflowFileKeys());
  const YAML::Node& const_root = root;
  const YAML::Node workflows = const_root["workflows"];
  if (!workflows.IsDefined()) {
    yaml::Fail(source, root, "workflows", "missing required key \"workflows\"");
  }
  if (!workflows.IsSequence()) {
    yaml::Fail(source, workflows, "workflows", "must be a list of workflows");
  }
  if (workflows.size() == 0) {
    yaml::Fail(source, workflows, "workflows", "must list at least one workflow");
  }
  std::vector<WorkflowDefinition> out;
  std::size_t i = 0;
  for (const auto& workflow : workflows) {
    out.push_back(ParseWorkflow(workflow, source, yaml::Index("workflows", i++)));
  }
  return out;
}

// ---- JSON --------------------------------------------------------------

void CheckJsonKeys(const nlohmann::json& j, const std::string& source, const std::string& path,
                   std::initializer_list<std::string_view> allowed) {
  if (!j.is_object()) throw ConfigError(source, 0, path, "must be an object");
  for (const auto& item : j.items()) {
    if (std::find(allowed.begin(), allowed.end(), item.key()) == allowed.end()) {
      throw ConfigError(source, 0, yaml::Join(path, item.key()), "unknown key");
    }
  }
}

template <typename T>
T JsonGet(const nlohmann::json& j, const char* key, const std::string& source,
          const std::string& path) {
  const std::string p = yaml::Join(path, key);
  if (!j.contains(key)) throw ConfigError(source, 0, p, "missing required key");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(source, 0, p, std::string("wrong type: ") + e.what());
  }
}

}  // namespace

// ---- the keys of a workflow file ------------------------------------------

const std::vector<std::string_view>& WorkflowFileKeys() {
  static const std::vector<std::string_view> keys = {"workflows"};
  return keys;
}

const std::vector<std::string_view>& WorkflowKeys() {
  static const std::vector<std::string_view> keys = {"name",     "version",   "queue",
                                                     "deadline", "key_scope", "steps"};
  return keys;
}

const std::vector<std::string_view>& StepKeys() {
  static const std::vector<std::string_view> keys = {
      "name", "run", "timeout", "transactional", "compensate", "on_wait_timeout", "retry"};
  return keys;
}

const std::vector<std::string_view>& RetryKeys() {
  static const std::vector<std::string_view> keys = {
      "max_attempts", "initial_backoff", "max_backoff", "multiplier", "jitter", "non_retryable"};
  return keys;
}

// ---- RetryPolicy and WorkflowDefinition ----------------------------------

bool RetryPolicy::IsRetryable(std::string_view error_code) const {
  return std::find(non_retryable.begin(), non_retryable.end(), error_code) == non_retryable.end();
}

milliseconds RetryPolicy::BackoffBefore(int next_attempt) const {
  if (next_attempt < 2) return milliseconds::zero();
  double backoff = static_cast<double>(initial_backoff.count());
  const double cap = static_cast<double>(max_backoff.count());
  for (int i = 2; i < next_attempt && backoff < cap; ++i) backoff *= multiplier;
  return milliseconds(static_cast<int64_t>(std::min(backoff, cap)));
}

const StepDefinition* WorkflowDefinition::FindStep(std::string_view step) const {
  for (const StepDefinition& s : steps) {
    if (s.name == step) return &s;
  }
  return nullptr;
}

std::optional<std::size_t> WorkflowDefinition::IndexOf(std::string_view step) const {
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].name == step) return i;
  }
  return std::nullopt;
}

const std::string& WorkflowDefinition::FirstStep() const {
  if (steps.empty()) {
    throw InvalidArgumentError("workflow " + name + " v" + std::to_string(version) +
                               " has no steps");
  }
  return steps.front().name;
}

std::optional<std::string> WorkflowDefinition::NextStep(std::string_view after) const {
  const auto index = IndexOf(after);
  if (!index) {
    throw InvalidArgumentError("workflow " + name + " v" + std::to_string(version) +
                               " has no step " + Quoted(after));
  }
  if (*index + 1 >= steps.size()) return std::nullopt;
  return steps[*index + 1].name;
}

StepDefinition StepDefinition::Compensation() const {
  StepDefinition compensation;
  compensation.name = compensate.value_or("");
  compensation.run = compensation.name;
  compensation.timeout = timeout;
  compensation.transactional = transactional;
  compensation.retry = retry;
  compensation.source = source;
  return compensation;
}

bool IsValidDefinitionName(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  auto start = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!start(name.front())) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) {
    return start(c) || (c >= '0' && c <= '9') || c == '.' || c == '-';
  });
}

// ---- canonical form and hash ---------------------------------------------

nlohmann::json ToJson(const WorkflowDefinition& d) {
  nlohmann::json steps = nlohmann::json::array();
  for (const StepDefinition& s : d.steps) {
    const RetryPolicy& r = s.retry;
    steps.push_back({
        {"name", s.name},
        {"run", s.run},
        {"timeout_ms", s.timeout.count()},
        {"transactional", s.transactional},
        {"compensate", s.compensate ? nlohmann::json(*s.compensate) : nlohmann::json(nullptr)},
        {"on_wait_timeout",
         s.on_wait_timeout ? nlohmann::json(*s.on_wait_timeout) : nlohmann::json(nullptr)},
        {"retry",
         {{"max_attempts", r.max_attempts},
          {"initial_backoff_ms", r.initial_backoff.count()},
          {"max_backoff_ms", r.max_backoff.count()},
          {"multiplier", r.multiplier},
          {"jitter", r.jitter},
          {"non_retryable", r.non_retryable}}},
    });
  }
  nlohmann::json j = {
      {"name", d.name}, {"version", d.version}, {"queue", d.queue}, {"steps", steps}};
  if (d.deadline) j["deadline_ms"] = d.deadline->count();
  if (d.key_scope) j["key_scope"] = ToString(*d.key_scope);
  return j;
}

std::string ComputeHash(const WorkflowDefinition& definition) {
  std::string text;
  try {
    text = ToJson(definition).dump();
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(definition.source, 0, "", std::string("cannot serialise: ") + e.what());
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    throw Error(ErrorKind::kPermanent, "SHA-256 failed (OpenSSL EVP_Digest)");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

void FinalizeDefinition(WorkflowDefinition& definition) {
  const std::string source = definition.source.empty() ? "<definition>" : definition.source;
  const std::string prefix = "workflow " + definition.name;
  ValidateDefinition(definition, [&](const std::string& path, const std::string& problem) {
    throw ConfigError(source, 0, prefix + ": " + path, problem);
  });
  definition.hash = ComputeHash(definition);
}

WorkflowDefinition DefinitionFromJson(const nlohmann::json& j, const std::string& source) {
  CheckJsonKeys(j, source, "", {"name", "version", "queue", "deadline_ms", "key_scope", "steps"});
  WorkflowDefinition d;
  d.source = source;
  d.name = JsonGet<std::string>(j, "name", source, "");
  d.version = JsonGet<int>(j, "version", source, "");
  d.queue = JsonGet<std::string>(j, "queue", source, "");
  if (j.contains("deadline_ms")) {
    d.deadline = milliseconds(JsonGet<int64_t>(j, "deadline_ms", source, ""));
  }
  if (j.contains("key_scope")) {
    const auto scope = JsonGet<std::string>(j, "key_scope", source, "");
    d.key_scope = ParseKeyScope(scope);
    if (!d.key_scope) {
      throw ConfigError(source, 0, "key_scope",
                        "must be forever or unfinished, got " + Quoted(scope));
    }
  }
  const auto steps = JsonGet<nlohmann::json>(j, "steps", source, "");
  if (!steps.is_array()) throw ConfigError(source, 0, "steps", "must be an array");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string p = "steps[" + std::to_string(i) + "]";
    const nlohmann::json& sj = steps[i];
    CheckJsonKeys(
        sj, source, p,
        {"name", "run", "timeout_ms", "transactional", "compensate", "on_wait_timeout", "retry"});
    StepDefinition s;
    s.source = source;
    s.name = JsonGet<std::string>(sj, "name", source, p);
    s.run = JsonGet<std::string>(sj, "run", source, p);
    s.timeout = milliseconds(JsonGet<int64_t>(sj, "timeout_ms", source, p));
    s.transactional = JsonGet<bool>(sj, "transactional", source, p);
    if (const auto c = JsonGet<nlohmann::json>(sj, "compensate", source, p); !c.is_null()) {
      s.compensate = JsonGet<std::string>(sj, "compensate", source, p);
    }
    if (const auto t = JsonGet<nlohmann::json>(sj, "on_wait_timeout", source, p); !t.is_null()) {
      s.on_wait_timeout = JsonGet<std::string>(sj, "on_wait_timeout", source, p);
    }
    const std::string rp = p + ".retry";
    const auto rj = JsonGet<nlohmann::json>(sj, "retry", source, p);
    CheckJsonKeys(rj, source, rp,
                  {"max_attempts", "initial_backoff_ms", "max_backoff_ms", "multiplier", "jitter",
                   "non_retryable"});
    s.retry.max_attempts = JsonGet<int>(rj, "max_attempts", source, rp);
    s.retry.initial_backoff = milliseconds(JsonGet<int64_t>(rj, "initial_backoff_ms", source, rp));
    s.retry.max_backoff = milliseconds(JsonGet<int64_t>(rj, "max_backoff_ms", source, rp));
    s.retry.multiplier = JsonGet<double>(rj, "multiplier", source, rp);
    s.retry.jitter = JsonGet<double>(rj, "jitter", source, rp);
    s.retry.non_retryable = JsonGet<std::vector<std::string>>(rj, "non_retryable", source, rp);
    d.steps.push_back(std::move(s));
  }
  ValidateDefinition(d, [&](const std::string& path, const std::string& problem) {
    throw ConfigError(source, 0, path, problem);
  });
  d.hash = ComputeHash(d);
  return d;
}

// ---- loading -------------------------------------------------------------

std::vector<WorkflowDefinition> LoadDefinitionsFromString(std::string_view text,
                                                          const std::string& source_name,
                                                          const YamlLimits& limits) {
  return ParseDocument(yaml::Parse(text, source_name, limits), source_name);
}

std::vector<WorkflowDefinition> LoadDefinitions(const std::filesystem::path& file_or_dir,
                                                const YamlLimits& limits) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(file_or_dir, ec);
  if (ec || !fs::exists(status)) {
    throw ConfigError(file_or_dir.string(), 0, "",
                      "cannot read workflow definitions: " +
                          (ec ? ec.message() : std::string("no such file or directory")));
  }
  if (!fs::is_directory(status)) {
    return LoadDefinitionsFromString(ReadYamlFile(file_or_dir, limits), file_or_dir.string(),
                                     limits);
  }
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(file_or_dir, ec)) {
    const fs::path& p = entry.path();
    const std::string ext = p.extension().string();
    if ((ext == ".yaml" || ext == ".yml") && !p.filename().string().starts_with(".") &&
        entry.is_regular_file()) {
      files.push_back(p);
    }
  }
  if (ec) {
    throw ConfigError(file_or_dir.string(), 0, "", "cannot list directory: " + ec.message());
  }
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });
  std::vector<WorkflowDefinition> out;
  for (const fs::path& file : files) {
    for (WorkflowDefinition& d :
         LoadDefinitionsFromString(ReadYamlFile(file, limits), file.string(), limits)) {
      out.push_back(std::move(d));
    }
  }
  return out;
}

// ---- DefinitionSet -------------------------------------------------------

DefinitionSet::DefinitionSet(std::vector<WorkflowDefinition> definitions) {
  for (WorkflowDefinition& d : definitions) Add(std::move(d));
}

void DefinitionSet::Add(WorkflowDefinition definition) {
  if (definition.hash.empty()) FinalizeDefinition(definition);
  auto key = std::make_pair(definition.name, definition.version);
  if (auto it = by_key_.find(key); it != by_key_.end()) {
    throw ConfigError(definition.source, 0, "",
                      "workflow " + Quoted(definition.name) + " version " +
                          std::to_string(definition.version) + " is already defined at " +
                          it->second.source);
  }
  by_key_.emplace(std::move(key), std::move(definition));
}

const WorkflowDefinition* DefinitionSet::Find(std::string_view name) const {
  auto it = by_key_.upper_bound(std::make_pair(std::string(name), INT_MAX));
  if (it == by_key_.begin()) return nullptr;
  --it;
  return it->first.first == name ? &it->second : nullptr;
}

const WorkflowDefinition* DefinitionSet::Find(std::string_view name, int version) const {
  auto it = by_key_.find(std::make_pair(std::string(name), version));
  return it == by_key_.end() ? nullptr : &it->second;
}

const WorkflowDefinition* DefinitionSet::FindByHash(std::string_view hash) const {
  for (const auto& [key, d] : by_key_) {
    if (d.hash == hash) return &d;
  }
  return nullptr;
}

std::vector<const WorkflowDefinition*> DefinitionSet::All() const {
  std::vector<const WorkflowDefinition*> out;
  out.reserve(by_key_.size());
  for (const auto& [key, d] : by_key_) out.push_back(&d);
  return out;
}

DefinitionSet LoadDefinitionSet(const std::vector<std::filesystem::path>& paths,
                                const YamlLimits& limits) {
  DefinitionSet set;
  for (const auto& path : paths) {
    for (WorkflowDefinition& d : LoadDefinitions(path, limits)) set.Add(std::move(d));
  }
  return set;
}

void ValidateSteps(const DefinitionSet& definitions,
                   const std::function<std::string(const std::string& workflow,
                                                   const std::string& step)>& problem_of) {
  std::vector<ConfigError> errors;
  for (const WorkflowDefinition* d : definitions.All()) {
    for (const StepDefinition& s : d->steps) {
      const std::string where =
          "workflow " + d->name + " v" + std::to_string(d->version) + ", step " + s.name;
      if (const std::string problem = problem_of(d->name, s.run); !problem.empty()) {
        errors.emplace_back(s.source, 0, where, "run: " + problem);
      }
      if (!s.compensate) continue;
      if (const std::string problem = problem_of(d->name, *s.compensate); !problem.empty()) {
        errors.emplace_back(s.source, 0, where, "compensate: " + problem);
      }
    }
  }
  if (errors.empty()) return;
  if (errors.size() == 1) throw errors.front();
  const ConfigError& first = errors.front();
  throw ConfigError(first.source(), 0, first.key_path(),
                    first.problem() + "; and " + std::to_string(errors.size() - 1) +
                        " more plugin step reference(s) that cannot run");
}

}  // namespace cairn
