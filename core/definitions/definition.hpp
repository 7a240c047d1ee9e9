// Workflow definitions: what a workflow is (name, version, ordered steps with
// retry policy, timeout, compensation), how it is loaded from YAML and
// validated, and its content hash (SHA-256 of the canonical JSON form), which
// pins a run to the exact definition it started with. Whether a step's `run`
// names a loaded plugin step is checked by ValidateSteps against the plugin
// registry, not here. Definitions are immutable values once loaded; a
// DefinitionSet is not synchronised (build it at start-up, then only read).
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "duration.hpp"
#include "model.hpp"
#include "yaml_input.hpp"

namespace cairn {

struct RetryPolicy {
  int max_attempts = 3;  // including the first attempt; >= 1
  std::chrono::milliseconds initial_backoff{std::chrono::seconds(1)};
  std::chrono::milliseconds max_backoff{std::chrono::minutes(5)};
  double multiplier = 2.0;  // >= 1
  double jitter = 0.1;      // fraction of the backoff, 0..1
  // Error codes (StepOutcome::error_code) that fail the step at once.
  std::vector<std::string> non_retryable;

  bool IsRetryable(std::string_view error_code) const;
  // The backoff before attempt `next_attempt` (2 = the first retry), without
  // jitter: initial * multiplier^(next_attempt - 2), capped at max_backoff.
  std::chrono::milliseconds BackoffBefore(int next_attempt) const;
};

struct StepDefinition {
  std::string name;  // unique within the workflow
  std::string run;   // the plugin step it invokes; defaults to name
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  bool transactional = false;
  std::optional<std::string> compensate;  // a plugin step run when unwinding
  // When this step waits and the wait expires: continue at this step of the
  // workflow. Absent: an expired wait fails the run.
  std::optional<std::string> on_wait_timeout;
  RetryPolicy retry;
  std::string source;  // "file:line" where it was declared; not hashed

  // The compensation as a step of its own: the plugin step `compensate`,
  // with this step's timeout, retry policy and transactionality. Only for a
  // step that has one.
  StepDefinition Compensation() const;
};

struct WorkflowDefinition {
  std::string name;
  int version = 1;
  std::string queue = "default";
  // How long a run may take in all, from when it is due: past it the run
  // fails with code "deadline_exceeded" whatever it is doing. Absent: no
  // deadline, unless the start gives one.
  std::optional<std::chrono::milliseconds> deadline;
  // How long a start key holds (KeyScope). Absent: forever, unless the
  // start says otherwise.
  std::optional<KeyScope> key_scope;
  std::vector<StepDefinition> steps;
  std::string hash;    // hex SHA-256 of ToJson(*this).dump(); set by the loaders
  std::string source;  // "file:line" where it was declared; not hashed

  const StepDefinition* FindStep(std::string_view step) const;
  // The position of a step in steps, or nullopt.
  std::optional<std::size_t> IndexOf(std::string_view step) const;
  // The first step's name (a definition always has one after validation).
  const std::string& FirstStep() const;
  // The step after `after`, or nullopt when `after` is the last step.
  // Throws InvalidArgumentError when `after` is not a step of this workflow.
  std::optional<std::string> NextStep(std::string_view after) const;
};

// The keys a workflow file may use, at each level, exactly as the YAML loader
// accepts them (an unknown key is an error). docs/authoring.md documents each
// one; a unit test holds the two together.
const std::vector<std::string_view>& WorkflowFileKeys();  // top level: workflows
const std::vector<std::string_view>& WorkflowKeys();      // one workflow
const std::vector<std::string_view>& StepKeys();          // one step
const std::vector<std::string_view>& RetryKeys();         // a step's retry policy

// True when name matches ^[A-Za-z_][A-Za-z0-9_.-]{0,127}$ (workflow, step,
// plugin step and queue names).
bool IsValidDefinitionName(std::string_view name);

// The canonical form: keys sorted, durations in ms, every field that changes
// behaviour and nothing else (no hash, no source). Stored in the database.
// An optional key is left out when absent (deadline_ms, key_scope), so a definition
// without it keeps the hash it had before the key existed.
nlohmann::json ToJson(const WorkflowDefinition& definition);
// The inverse of ToJson, validated; the hash is recomputed and source is
// set to `source`. Throws InvalidArgumentError.
WorkflowDefinition DefinitionFromJson(const nlohmann::json& json,
                                      const std::string& source = "<json>");

// Hex SHA-256 of ToJson(definition).dump().
std::string ComputeHash(const WorkflowDefinition& definition);

// Validates a definition built in code (for example registered by a plugin)
// with the same rules as the YAML loader, then sets its hash. Throws
// ConfigError naming definition.source.
void FinalizeDefinition(WorkflowDefinition& definition);

// Loads a definition file, or every *.yaml / *.yml file of a directory (not
// recursive) in name order. Throws ConfigError ("file:line: key.path:
// problem") for malformed YAML, oversized or too deeply nested input,
// unknown keys and invalid values.
std::vector<WorkflowDefinition> LoadDefinitions(const std::filesystem::path& file_or_dir,
                                                const YamlLimits& limits = {});
std::vector<WorkflowDefinition> LoadDefinitionsFromString(std::string_view text,
                                                          const std::string& source_name,
                                                          const YamlLimits& limits = {});

// Every loaded definition, by (name, version) and by hash.
class DefinitionSet {
 public:
  DefinitionSet() = default;
  explicit DefinitionSet(std::vector<WorkflowDefinition> definitions);

  // Throws ConfigError naming both places when (name, version) is taken.
  void Add(WorkflowDefinition definition);

  // The latest version of a workflow.
  const WorkflowDefinition* Find(std::string_view name) const;
  const WorkflowDefinition* Find(std::string_view name, int version) const;
  const WorkflowDefinition* FindByHash(std::string_view hash) const;

  // All definitions ordered by name, then version.
  std::vector<const WorkflowDefinition*> All() const;
  std::size_t size() const { return by_key_.size(); }
  bool empty() const { return by_key_.empty(); }

 private:
  std::map<std::pair<std::string, int>, WorkflowDefinition, std::less<>> by_key_;
};

// Loads every path (files or directories) into one set; duplicates across
// paths are errors.
DefinitionSet LoadDefinitionSet(const std::vector<std::filesystem::path>& paths,
                                const YamlLimits& limits = {});

// Checks that every step's `run` and `compensate` name a plugin step its
// workflow can run: problem_of(workflow, plugin step) returns "" when it
// can, else why not ("unknown plugin step ..."). Throws ConfigError naming
// file:line, the workflow, the step and the first problem (and how many
// more there are).
void ValidateSteps(const DefinitionSet& definitions,
                   const std::function<std::string(const std::string& workflow,
                                                   const std::string& step)>& problem_of);

}  // namespace cairn
