// Unit tests of workflow definitions: YAML loading and validation (errors name
// file, line and key path), the size, depth and node caps of the YAML input,
// durations, the content hash and the DefinitionSet. No database.
#include "definition.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <utility>

#include "temp_dir.hpp"
#include "test_paths.hpp"
#include "yaml_input.hpp"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

using process::TempDir;

// The message of the ConfigError that loading text throws, or "" when none.
std::string LoadError(const std::string& text, const std::string& source = "wf.yaml") {
  try {
    LoadDefinitionsFromString(text, source);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

const char* kOrder = R"(workflows:
  - name: order
    version: 1
    queue: orders
    steps:
      - name: reserve
        run: reserve_stock
        timeout: 30s
        transactional: false
        compensate: release_stock
        retry:
          max_attempts: 5
          initial_backoff: 1s
          max_backoff: 1m
          multiplier: 2.0
          jitter: 0.2
          non_retryable: [card_declined, invalid_input]
      - name: charge
        run: charge_payment
        transactional: true
)";

// A valid one-step workflow whose step body is `step` (indented for a step).
std::string OneStep(const std::string& step_body, const std::string& header = "") {
  return "workflows:\n  - name: w\n    version: 1\n" + header + "    steps:\n      - name: a\n" +
         step_body;
}

TEST(DefinitionLoader, LoadsEveryField) {
  const auto defs = LoadDefinitionsFromString(kOrder, "order.yaml");
  ASSERT_EQ(defs.size(), 1u);
  const WorkflowDefinition& d = defs[0];
  EXPECT_EQ(d.name, "order");
  EXPECT_EQ(d.version, 1);
  EXPECT_EQ(d.queue, "orders");
  EXPECT_EQ(d.source, "order.yaml:2");
  ASSERT_EQ(d.steps.size(), 2u);
  const StepDefinition& r = d.steps[0];
  EXPECT_EQ(r.name, "reserve");
  EXPECT_EQ(r.run, "reserve_stock");
  EXPECT_EQ(r.timeout, milliseconds(30000));
  EXPECT_FALSE(r.transactional);
  EXPECT_EQ(r.compensate, std::optional<std::string>("release_stock"));
  EXPECT_EQ(r.retry.max_attempts, 5);
  EXPECT_EQ(r.retry.initial_backoff, milliseconds(1000));
  EXPECT_EQ(r.retry.max_backoff, milliseconds(60000));
  EXPECT_DOUBLE_EQ(r.retry.multiplier, 2.0);
  EXPECT_DOUBLE_EQ(r.retry.jitter, 0.2);
  EXPECT_EQ(r.retry.non_retryable, (std::vector<std::string>{"card_declined", "invalid_input"}));
  EXPECT_EQ(r.source, "order.yaml:6");
  const StepDefinition& c = d.steps[1];
  EXPECT_EQ(c.run, "charge_payment");
  EXPECT_TRUE(c.transactional);
  EXPECT_FALSE(c.compensate.has_value());
  EXPECT_EQ(c.timeout, milliseconds(5 * 60 * 1000));
  EXPECT_EQ(c.retry.max_attempts, 3);
  EXPECT_EQ(c.retry.initial_backoff, milliseconds(1000));
  EXPECT_EQ(c.retry.max_backoff, milliseconds(5 * 60 * 1000));
  EXPECT_DOUBLE_EQ(c.retry.multiplier, 2.0);
  EXPECT_DOUBLE_EQ(c.retry.jitter, 0.1);
  EXPECT_EQ(d.hash.size(), 64u);
  EXPECT_EQ(d.hash, ComputeHash(d));
}

TEST(DefinitionLoader, AppliesDefaults) {
  const auto defs = LoadDefinitionsFromString(OneStep(""), "wf.yaml");
  ASSERT_EQ(defs.size(), 1u);
  EXPECT_EQ(defs[0].queue, "default");
  EXPECT_EQ(defs[0].steps[0].run, "a");  // run defaults to the step name
  EXPECT_FALSE(defs[0].steps[0].transactional);
}

TEST(DefinitionLoader, LoadsSeveralWorkflowsFromOneFile) {
  const std::string text =
      std::string(kOrder) + "  - name: order\n    version: 2\n    steps:\n      - name: x\n";
  const auto defs = LoadDefinitionsFromString(text, "wf.yaml");
  ASSERT_EQ(defs.size(), 2u);
  EXPECT_EQ(defs[1].version, 2);
  EXPECT_NE(defs[0].hash, defs[1].hash);
}

TEST(DefinitionLoader, RejectsUnknownKeyWithFileAndLine) {
  const std::string text = OneStep("        run: x\n        timeuot: 30s\n");
  EXPECT_EQ(LoadError(text),
            "wf.yaml:7: workflows[0].steps[0].timeuot: unknown key \"timeuot\" (did you mean "
            "\"timeout\"?)");
  EXPECT_EQ(LoadError("workflows:\n  - name: w\n    version: 1\n    stepz: []\n"),
            "wf.yaml:4: workflows[0].stepz: unknown key \"stepz\" (did you mean \"steps\"?)");
  EXPECT_EQ(LoadError("workflow: []\n"),
            "wf.yaml:1: workflow: unknown key \"workflow\" (did you mean \"workflows\"?)");
  EXPECT_EQ(LoadError(OneStep("        zzzzzzzzz: 1\n")),
            "wf.yaml:6: workflows[0].steps[0].zzzzzzzzz: unknown key \"zzzzzzzzz\" (expected "
            "one of: name run timeout transactional compensate on_wait_timeout retry)");
}

TEST(DefinitionLoader, RejectsDuplicateKey) {
  EXPECT_EQ(LoadError(OneStep("        run: x\n        run: y\n")),
            "wf.yaml:7: workflows[0].steps[0].run: duplicate key");
}

struct BadCase {
  std::string text;
  std::string message;
};

TEST(DefinitionLoader, EveryValidationErrorNamesFileLineAndKey) {
  const std::vector<BadCase> cases = {
      {OneStep("        retry:\n          max_attempts: 0\n"),
       "wf.yaml:7: workflows[0].steps[0].retry.max_attempts: must be an integer >= 1, got "
       "\"0\""},
      {OneStep("        retry:\n          max_attempts: three\n"),
       "wf.yaml:7: workflows[0].steps[0].retry.max_attempts: must be an integer >= 1, got "
       "\"three\""},
      {OneStep("        retry:\n          multiplier: 0.5\n"),
       "wf.yaml:7: workflows[0].steps[0].retry.multiplier: must be a number >= 1"},
      {OneStep("        retry:\n          jitter: 1.5\n"),
       "wf.yaml:7: workflows[0].steps[0].retry.jitter: must be a number between 0 and 1"},
      {OneStep("        retry:\n          jitter: -0.1\n"),
       "wf.yaml:7: workflows[0].steps[0].retry.jitter: must be a number between 0 and 1"},
      {OneStep("        retry:\n          initial_backoff: 10s\n          max_backoff: 5s\n"),
       "wf.yaml:8: workflows[0].steps[0].retry.max_backoff: must be >= initial_backoff (10s), "
       "got 5s"},
      {OneStep("        retry:\n          non_retryable: [a, \"\"]\n"),
       "wf.yaml:7: workflows[0].steps[0].retry.non_retryable[1]: must not be empty"},
      {OneStep("        retry:\n          non_retryable: a\n"),
       "wf.yaml:7: workflows[0].steps[0].retry.non_retryable: must be a list"},
      {OneStep("        timeout: 0\n"),
       "wf.yaml:6: workflows[0].steps[0].timeout: must be longer than 0"},
      {OneStep("        timeout: soon\n"),
       "wf.yaml:6: workflows[0].steps[0].timeout: invalid duration \"soon\""},
      {OneStep("        transactional: true\n        timeout: 10m\n"),
       "wf.yaml:7: workflows[0].steps[0].timeout: a transactional step runs inside its "
       "checkpoint's transaction, which the server ends after 10m idle; at most 9m30s, got 10m "
       "(make the step non-transactional to run longer)"},
      {OneStep("        transactional: maybe\n"),
       "wf.yaml:6: workflows[0].steps[0].transactional: must be true or false, got \"maybe\""},
      {OneStep("        on_wait_timeout: nowhere\n"),
       "wf.yaml:6: workflows[0].steps[0].on_wait_timeout: names \"nowhere\", which is not a step "
       "of this workflow"},
      {OneStep("        compensate: \"\"\n"),
       "wf.yaml:6: workflows[0].steps[0].compensate: must name a plugin step, not be empty"},
      {OneStep("        compensate:\n        timeout: 1s\n"),
       "wf.yaml:6: workflows[0].steps[0].compensate: must name a plugin step, not be empty"},
      {OneStep("        run: \"bad name\"\n"),
       "wf.yaml:6: workflows[0].steps[0].run: must match ^[A-Za-z_][A-Za-z0-9_.-]{0,127}$, got "
       "\"bad name\""},
      {OneStep("      - name: a\n"),
       "wf.yaml:6: workflows[0].steps[1].name: duplicate step name \"a\" (also steps[0])"},
      {OneStep("      - run: b\n"),
       "wf.yaml:6: workflows[0].steps[1]: missing required key \"name\""},
      {OneStep("", "    queue: \"\"\n"), "wf.yaml:4: workflows[0].queue: must not be empty"},
      {OneStep("", "    deadline: 0\n"), "wf.yaml:4: workflows[0].deadline: must be longer than 0"},
      {OneStep("", "    deadline: soon\n"),
       "wf.yaml:4: workflows[0].deadline: invalid duration \"soon\""},
      {"workflows:\n  - name: 9lives\n    version: 1\n    steps:\n      - name: a\n",
       "wf.yaml:2: workflows[0].name: must match ^[A-Za-z_][A-Za-z0-9_.-]{0,127}$, got "
       "\"9lives\""},
      {"workflows:\n  - name: w\n    version: 0\n    steps:\n      - name: a\n",
       "wf.yaml:3: workflows[0].version: must be an integer >= 1, got \"0\""},
      {"workflows:\n  - name: w\n    steps:\n      - name: a\n",
       "wf.yaml:2: workflows[0]: missing required key \"version\""},
      {"workflows:\n  - name: w\n    version: 1\n    steps: []\n",
       "wf.yaml:4: workflows[0].steps: must list at least one step"},
      {"workflows:\n  - name: w\n    version: 1\n    steps: {a: 1}\n",
       "wf.yaml:4: workflows[0].steps: must be a list of steps"},
      {"workflows:\n  - name: w\n    version: 1\n    steps:\n      - just_a_string\n",
       "wf.yaml:5: workflows[0].steps[0]: must be a mapping"},
      {"workflows: []\n", "wf.yaml:1: workflows: must list at least one workflow"},
      {"workflows: {}\n", "wf.yaml:1: workflows: must be a list of workflows"},
      {"other: 1\n", "wf.yaml:1: other: unknown key \"other\""},
      {"", "wf.yaml: empty definition file"},
      {"# only a comment\n", "wf.yaml: empty definition file"},
      {"- a\n", "wf.yaml:1: must be a mapping"},
  };
  for (const BadCase& c : cases) {
    const std::string message = LoadError(c.text);
    EXPECT_EQ(message.substr(0, c.message.size()), c.message) << "input:\n" << c.text;
  }
}

TEST(DefinitionLoader, ReportsMalformedYamlWithFileAndLine) {
  const std::string message =
      LoadError("workflows:\n  - name: w\n    version: 1\n    steps: [a, b\n", "bad.yaml");
  EXPECT_EQ(message.rfind("bad.yaml:", 0), 0u) << message;
  EXPECT_NE(message.find("malformed YAML"), std::string::npos) << message;

  const std::string tabbed = LoadError("workflows:\n  - name: w\n\t version: 1\n", "tab.yaml");
  EXPECT_EQ(tabbed.rfind("tab.yaml:3: malformed YAML", 0), 0u) << tabbed;

  EXPECT_EQ(LoadError("workflows:\n  - name: w\n   version: 1\n", "i.yaml"),
            "i.yaml:3: malformed YAML: end of sequence not found");
  EXPECT_EQ(LoadError("workflows: a: b\n", "m.yaml"),
            "m.yaml:1: malformed YAML: illegal map value");
}

TEST(DefinitionLoader, RefusesSeveralDocuments) {
  const std::string text = OneStep("") + "---\n" + OneStep("");
  EXPECT_EQ(LoadError(text).rfind("wf.yaml:", 0), 0u);
  EXPECT_NE(LoadError(text).find("expected one YAML document, found 2"), std::string::npos);
}

TEST(DefinitionLoader, AStrayCommaIsRefusedNotParsedForEver) {
  // yaml-cpp's LoadAll made empty documents from a lone "," for ever,
  // growing without bound (found by the definition and config fuzz targets).
  EXPECT_NE(LoadError(",").find("malformed YAML: unexpected ','"), std::string::npos)
      << LoadError(",");
  EXPECT_NE(LoadError("[a]\n,").find("malformed YAML"), std::string::npos) << LoadError("[a]\n,");
}

TEST(DefinitionLoader, RefusesDeepFlowNestingWithoutOverflowingTheStack) {
  // Deep enough to overflow a recursive parser's stack; yaml-cpp's guard
  // stops it and the error still names the file and line.
  const std::string deep = "workflows:\n  - name: w\n    steps: " + std::string(100000, '[') +
                           std::string(100000, ']') + "\n";
  const std::string message = LoadError(deep, "deep.yaml");
  EXPECT_EQ(message, "deep.yaml:3: YAML nesting is deeper than 64 levels; refusing to parse it");
}

TEST(DefinitionLoader, RefusesDeepBlockNesting) {
  std::string deep = "workflows:\n";
  for (int i = 0; i < 100; ++i)
    deep += std::string(2 * (i + 1), ' ') + "k" + std::to_string(i) + ":\n";
  const std::string message = LoadError(deep, "deep.yaml");
  EXPECT_EQ(message.rfind("deep.yaml:", 0), 0u) << message;
  EXPECT_NE(message.find("deeper than 64 levels"), std::string::npos) << message;

  std::string dashes = "workflows:\n  ";
  for (int i = 0; i < 100; ++i) dashes += "- ";
  dashes += "x\n";
  EXPECT_EQ(LoadError(dashes, "dash.yaml"),
            "dash.yaml:2: YAML nesting is deeper than 64 levels; refusing to parse it");
}

TEST(YamlLimits, CountsNestedCollectionsNotScalarText) {
  YamlLimits limits;
  limits.max_depth = 4;
  // Brackets inside quotes, plain scalars, comments and block scalars are text.
  const std::string text =
      "a: \"[[[[[[[[\"\n"
      "b: '{{{{{{{{ it''s'\n"
      "c: x[[[[[[[[y\n"
      "d: it's [[[[[[[[ plain\n"
      "# [[[[[[[[[[\n"
      "e: |\n"
      "   [[[[[[[[[\n"
      "            deeply\n"
      "                    indented text\n"
      "f: [1, [2, [3]]]\n";
  EXPECT_NO_THROW(yaml::Parse(text, "t.yaml", limits));
  EXPECT_THROW(yaml::Parse("a: [[[[1]]]]\n", "t.yaml", limits), ConfigError);
  EXPECT_THROW(yaml::Parse("a:\n b:\n  c:\n   d:\n    e: 1\n", "t.yaml", limits), ConfigError);
  EXPECT_NO_THROW(yaml::Parse("a:\n b:\n  c: 1\n d:\n  e: 1\n", "t.yaml", limits));
  // A quote that ends the text of a plain scalar does not open a string that
  // would hide the structure after it.
  EXPECT_THROW(yaml::Parse("a: it'\nb: [[[[[1]]]]]\n", "t.yaml", limits), ConfigError);
  // Block scalar content of a map inside a sequence entry ends at the key's column.
  EXPECT_THROW(yaml::Parse("- a: |\n    text\n  b: [[[[[1]]]]]\n", "t.yaml", limits), ConfigError);
}

TEST(YamlLimits, RefusesAliasesThatExpandPastTheNodeLimit) {
  // Each level refers to the one before ten times: 10^9 nodes when read.
  std::string text = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level < 9; ++level) {
    const std::string previous = "*l" + std::to_string(level - 1);
    text += "l" + std::to_string(level) + ": &l" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) text += (i > 0 ? ", " : "") + previous;
    text += "]\n";
  }
  try {
    yaml::Parse(text, "laughs.yaml");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.source(), "laughs.yaml");
    EXPECT_NE(std::string(e.what()).find("more than 1000000 nodes"), std::string::npos) << e.what();
  }
}

TEST(DefinitionLoader, RefusesOversizedInput) {
  YamlLimits limits;
  limits.max_bytes = 100;
  try {
    LoadDefinitionsFromString(std::string(200, '#'), "big.yaml", limits);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "big.yaml: input is 200 bytes, more than the limit of 100 bytes");
  }

  TempDir dir;
  const fs::path big = dir.Write("big.yaml", "# " + std::string(5 * 1024 * 1024, 'x') + "\n");
  try {
    LoadDefinitions(big);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              big.string() + ": file is 5242883 bytes, more than the limit of 4194304 bytes");
  }
}

TEST(DefinitionHash, StableAcrossFormattingAndComments) {
  const std::string flow =
      "# the same workflow, written differently\n"
      "workflows: [{name: order, version: 1, queue: orders, steps: [\n"
      "  {name: reserve, run: reserve_stock, timeout: 30000ms, compensate: release_stock,\n"
      "   retry: {non_retryable: [card_declined, invalid_input], jitter: 0.20, multiplier: 2,\n"
      "           max_backoff: 60, initial_backoff: 1000ms, max_attempts: 5}},  # a comment\n"
      "  {name: charge, run: charge_payment, transactional: true, timeout: 5m}]}]\n";
  const auto a = LoadDefinitionsFromString(kOrder, "a.yaml");
  const auto b = LoadDefinitionsFromString(flow, "b.yaml");
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].hash, b[0].hash);
  EXPECT_EQ(ToJson(a[0]), ToJson(b[0]));
}

TEST(DefinitionHash, ChangesOnEverySemanticChange) {
  const WorkflowDefinition base = LoadDefinitionsFromString(kOrder, "a.yaml")[0];
  std::vector<std::function<void(WorkflowDefinition&)>> changes = {
      [](auto& d) { d.name = "order2"; },
      [](auto& d) { d.version = 2; },
      [](auto& d) { d.queue = "other"; },
      [](auto& d) { std::swap(d.steps[0], d.steps[1]); },
      [](auto& d) { d.steps.pop_back(); },
      [](auto& d) { d.steps[0].name = "reserve2"; },
      [](auto& d) { d.steps[0].run = "other"; },
      [](auto& d) { d.steps[0].timeout = milliseconds(30001); },
      [](auto& d) { d.steps[0].transactional = true; },
      [](auto& d) { d.steps[0].compensate.reset(); },
      [](auto& d) { d.steps[1].compensate = "undo"; },
      [](auto& d) { d.steps[0].on_wait_timeout = d.steps[1].name; },
      [](auto& d) { d.steps[0].retry.max_attempts = 6; },
      [](auto& d) { d.steps[0].retry.initial_backoff = milliseconds(999); },
      [](auto& d) { d.steps[0].retry.max_backoff = milliseconds(60001); },
      [](auto& d) { d.steps[0].retry.multiplier = 2.5; },
      [](auto& d) { d.steps[0].retry.jitter = 0.25; },
      [](auto& d) { d.steps[0].retry.non_retryable.pop_back(); },
      [](auto& d) { d.deadline = milliseconds(60000); },
  };
  std::set<std::string> hashes{base.hash};
  for (const auto& change : changes) {
    WorkflowDefinition d = base;
    change(d);
    EXPECT_TRUE(hashes.insert(ComputeHash(d)).second) << ToJson(d).dump();
  }
  // Where it was declared is not part of the content.
  WorkflowDefinition moved = base;
  moved.source = "elsewhere.yaml:99";
  moved.steps[0].source = "elsewhere.yaml:100";
  EXPECT_EQ(ComputeHash(moved), base.hash);
}

TEST(DefinitionJson, RoundTripsTheCanonicalForm) {
  const WorkflowDefinition d = LoadDefinitionsFromString(kOrder, "a.yaml")[0];
  const nlohmann::json j = ToJson(d);
  EXPECT_EQ(j["steps"][0]["timeout_ms"], 30000);
  EXPECT_EQ(j["steps"][0]["retry"]["max_backoff_ms"], 60000);
  EXPECT_TRUE(j["steps"][1]["compensate"].is_null());
  EXPECT_FALSE(j.contains("hash"));
  const WorkflowDefinition back = DefinitionFromJson(j, "db");
  EXPECT_EQ(back.hash, d.hash);
  EXPECT_EQ(ToJson(back), j);

  nlohmann::json bad = j;
  bad["steps"][0]["retry"]["jitter"] = 3;
  EXPECT_THROW(DefinitionFromJson(bad), ConfigError);
  bad = j;
  bad["extra"] = 1;
  EXPECT_THROW(DefinitionFromJson(bad), ConfigError);
}

TEST(DefinitionJson, CarriesTheDeadlineOnlyWhenThereIsOne) {
  const WorkflowDefinition timed =
      LoadDefinitionsFromString(OneStep("", "    deadline: 1h30m\n"), "wf.yaml")[0];
  EXPECT_EQ(timed.deadline, std::optional<milliseconds>(milliseconds(90 * 60 * 1000)));
  const nlohmann::json j = ToJson(timed);
  EXPECT_EQ(j["deadline_ms"], 90 * 60 * 1000);
  const WorkflowDefinition back = DefinitionFromJson(j, "db");
  EXPECT_EQ(back.deadline, timed.deadline);
  EXPECT_EQ(back.hash, timed.hash);

  // Without one the canonical form has no such key, so definitions written
  // before deadlines existed keep their hash (and their runs stay pinned).
  const WorkflowDefinition plain = LoadDefinitionsFromString(OneStep(""), "wf.yaml")[0];
  EXPECT_FALSE(plain.deadline.has_value());
  EXPECT_FALSE(ToJson(plain).contains("deadline_ms"));
  EXPECT_FALSE(DefinitionFromJson(ToJson(plain), "db").deadline.has_value());
}

TEST(DefinitionSet, FindsLatestExactAndByHash) {
  const std::string text = std::string(kOrder) +
                           "  - name: order\n    version: 3\n    steps:\n      - name: x\n"
                           "  - name: order\n    version: 2\n    steps:\n      - name: y\n"
                           "  - name: orders\n    version: 1\n    steps:\n      - name: z\n";
  const DefinitionSet set(LoadDefinitionsFromString(text, "wf.yaml"));
  EXPECT_EQ(set.size(), 4u);
  ASSERT_NE(set.Find("order"), nullptr);
  EXPECT_EQ(set.Find("order")->version, 3);
  ASSERT_NE(set.Find("order", 2), nullptr);
  EXPECT_EQ(set.Find("order", 2)->steps[0].name, "y");
  EXPECT_EQ(set.Find("order", 4), nullptr);
  EXPECT_EQ(set.Find("orde"), nullptr);
  EXPECT_EQ(set.Find("orders")->version, 1);
  EXPECT_EQ(set.Find("zzz"), nullptr);
  const WorkflowDefinition* v2 = set.Find("order", 2);
  EXPECT_EQ(set.FindByHash(v2->hash), v2);
  EXPECT_EQ(set.FindByHash("00"), nullptr);
  const auto all = set.All();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0]->version, 1);
  EXPECT_EQ(all[2]->version, 3);
  EXPECT_EQ(all[3]->name, "orders");
}

TEST(DefinitionSet, RejectsDuplicateVersionAcrossFilesNamingBoth) {
  TempDir dir;
  dir.Write("a.yaml", kOrder);
  dir.Write("b.yml", "# b\n" + std::string(kOrder));
  dir.Write("notes.txt", "not yaml: [");
  try {
    LoadDefinitionSet({dir.path()});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string a = (dir.path() / "a.yaml").string();
    const std::string b = (dir.path() / "b.yml").string();
    EXPECT_EQ(std::string(e.what()),
              b + ":3: workflow \"order\" version 1 is already defined at " + a + ":2");
  }
}

TEST(DefinitionLoader, LoadsDirectoryInNameOrder) {
  TempDir dir;
  dir.Write("b.yaml", "workflows:\n  - {name: bee, version: 1, steps: [{name: s}]}\n");
  dir.Write("a.yml", "workflows:\n  - {name: ant, version: 1, steps: [{name: s}]}\n");
  dir.Write("c.json", "{}");
  const auto defs = LoadDefinitions(dir.path());
  ASSERT_EQ(defs.size(), 2u);
  EXPECT_EQ(defs[0].name, "ant");
  EXPECT_EQ(defs[1].name, "bee");
  EXPECT_EQ(defs[1].steps[0].source, (dir.path() / "b.yaml").string() + ":2");

  EXPECT_THROW(LoadDefinitions(dir.path() / "missing.yaml"), ConfigError);
}

TEST(DefinitionSteps, NavigatesSteps) {
  const WorkflowDefinition d = LoadDefinitionsFromString(kOrder, "a.yaml")[0];
  EXPECT_EQ(d.FirstStep(), "reserve");
  EXPECT_EQ(d.NextStep("reserve"), std::optional<std::string>("charge"));
  EXPECT_EQ(d.NextStep("charge"), std::nullopt);
  EXPECT_THROW(d.NextStep("nope"), InvalidArgumentError);
  ASSERT_NE(d.FindStep("charge"), nullptr);
  EXPECT_EQ(d.FindStep("charge")->run, "charge_payment");
  EXPECT_EQ(d.FindStep("nope"), nullptr);
  EXPECT_EQ(d.IndexOf("charge"), std::optional<std::size_t>(1));
  EXPECT_EQ(d.IndexOf("nope"), std::nullopt);
}

TEST(RetryPolicy, BacksOffExponentiallyUpToTheCap) {
  RetryPolicy r;
  r.initial_backoff = milliseconds(1000);
  r.max_backoff = milliseconds(5000);
  r.multiplier = 2;
  EXPECT_EQ(r.BackoffBefore(2), milliseconds(1000));
  EXPECT_EQ(r.BackoffBefore(3), milliseconds(2000));
  EXPECT_EQ(r.BackoffBefore(4), milliseconds(4000));
  EXPECT_EQ(r.BackoffBefore(5), milliseconds(5000));
  EXPECT_EQ(r.BackoffBefore(500), milliseconds(5000));
  r.non_retryable = {"card_declined"};
  EXPECT_FALSE(r.IsRetryable("card_declined"));
  EXPECT_TRUE(r.IsRetryable("timeout"));
}

// A problem_of that knows these plugin steps, whatever the workflow.
std::function<std::string(const std::string&, const std::string&)> Knowing(
    std::set<std::string> steps) {
  return [steps = std::move(steps)](const std::string&, const std::string& step) {
    return steps.count(step) > 0 ? std::string() : "unknown plugin step \"" + step + "\"";
  };
}

TEST(ValidateSteps, NamesFileLineWorkflowStepAndTheProblem) {
  const DefinitionSet set(LoadDefinitionsFromString(kOrder, "order.yaml"));
  EXPECT_NO_THROW(
      ValidateSteps(set, Knowing({"reserve_stock", "charge_payment", "release_stock"})));
  try {
    ValidateSteps(set, Knowing({"reserve_stock", "release_stock"}));
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "order.yaml:18: workflow order v1, step charge: run: unknown plugin step "
                 "\"charge_payment\"");
  }
  try {
    ValidateSteps(set, Knowing({}));
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "order.yaml:6: workflow order v1, step reserve: run: unknown plugin step "
              "\"reserve_stock\"; and 2 more plugin step reference(s) that cannot run");
  }
}

TEST(ValidateSteps, AsksPerWorkflowAndNamesACompensationThatCannotRun) {
  const DefinitionSet set(LoadDefinitionsFromString(kOrder, "order.yaml"));
  std::set<std::pair<std::string, std::string>> asked;
  try {
    ValidateSteps(set, [&](const std::string& workflow, const std::string& step) -> std::string {
      asked.insert({workflow, step});
      return step == "release_stock" ? "not loaded in the daemon" : "";
    });
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "order.yaml:6: workflow order v1, step reserve: compensate: not loaded in the "
                 "daemon");
  }
  EXPECT_EQ(asked.count({"order", "reserve_stock"}), 1U);
  EXPECT_EQ(asked.count({"order", "charge_payment"}), 1U);
}

TEST(Duration, ParsesEveryUnit) {
  EXPECT_EQ(ParseDuration("250ms"), milliseconds(250));
  EXPECT_EQ(ParseDuration("30s"), milliseconds(30000));
  EXPECT_EQ(ParseDuration("5m"), milliseconds(300000));
  EXPECT_EQ(ParseDuration("2h"), milliseconds(7200000));
  EXPECT_EQ(ParseDuration("1d"), milliseconds(86400000));
  EXPECT_EQ(ParseDuration("45"), milliseconds(45000));
  EXPECT_EQ(ParseDuration("0"), milliseconds(0));
  EXPECT_EQ(ParseDuration("1h30m"), milliseconds(5400000));
  EXPECT_EQ(ParseDuration(" 10s "), milliseconds(10000));
}

TEST(Duration, RejectsEverythingElseClearly) {
  for (const char* bad : {"", "s", "1.5s", "-5s", "5 s", "5sec", "10x", "1S", "ms5", "5m5",
                          "99999999999999999999", "9999999999999999d", "1e3"}) {
    try {
      ParseDuration(bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const InvalidArgumentError& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.rfind("invalid duration \"", 0), 0u) << message;
      EXPECT_NE(message.find("250ms, 30s, 5m, 2h, 1d"), std::string::npos) << message;
    }
  }
}

TEST(Duration, FormatsSoThatItParsesBack) {
  EXPECT_EQ(FormatDuration(milliseconds(0)), "0s");
  EXPECT_EQ(FormatDuration(milliseconds(90000)), "1m30s");
  EXPECT_EQ(FormatDuration(milliseconds(250)), "250ms");
  EXPECT_EQ(FormatDuration(milliseconds(86400000 + 1)), "1d1ms");
  for (int64_t ms : {1, 999, 1000, 61001, 3600000, 90061001}) {
    EXPECT_EQ(ParseDuration(FormatDuration(milliseconds(ms))), milliseconds(ms));
  }
}

TEST(DefinitionLoader, LoadsTheShippedExamples) {
  const DefinitionSet set =
      LoadDefinitionSet({fs::path(cairn::test::SourceDir()) / "config/workflows"});
  const WorkflowDefinition* order = set.Find("order", 2);
  ASSERT_NE(order, nullptr);
  std::vector<std::string> runs;
  for (const auto& s : order->steps) runs.push_back(s.run);
  EXPECT_EQ(runs,
            (std::vector<std::string>{"reserve_stock", "await_payment", "charge_payment", "ship"}));
  EXPECT_TRUE(order->FindStep("charge_payment")->transactional);
  EXPECT_EQ(order->FindStep("reserve_stock")->compensate,
            std::optional<std::string>("release_stock"));
  EXPECT_EQ(order->FindStep("charge_payment")->compensate,
            std::optional<std::string>("refund_payment"));
  const WorkflowDefinition* bench = set.Find("noop3");
  ASSERT_NE(bench, nullptr);
  ASSERT_EQ(bench->steps.size(), 3u);
  EXPECT_EQ(bench->steps[0].name, "s1");
  EXPECT_EQ(bench->steps[2].name, "s3");
  for (const auto& s : bench->steps) EXPECT_EQ(s.run, "noop");
  const WorkflowDefinition* wait = set.Find("noop_wait");
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->steps[0].run, "noop_wait");
  const std::set<std::string> plugin_steps{"reserve_stock", "charge_payment", "await_payment",
                                           "ship",          "release_stock",  "refund_payment",
                                           "noop",          "noop_wait"};
  EXPECT_NO_THROW(ValidateSteps(set, Knowing(plugin_steps)));
}

TEST(FinalizeDefinition, ValidatesDefinitionsBuiltInCode) {
  WorkflowDefinition d;
  d.name = "coded";
  d.source = "plugin example";
  StepDefinition s;
  s.name = "only";
  s.run = "only";
  d.steps.push_back(s);
  FinalizeDefinition(d);
  EXPECT_EQ(d.hash.size(), 64u);
  d.steps[0].retry.multiplier = 0;
  try {
    FinalizeDefinition(d);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(
        e.what(),
        "plugin example: workflow coded: steps[0].retry.multiplier: must be a number >= 1");
  }
}

// ---- the authoring reference ----------------------------------------------

// The keys docs/authoring.md documents under a "### " heading: the first
// cells of its table rows that are one key in backquotes ("| `queue` |").
std::set<std::string> DocumentedKeys(const std::string& heading) {
  std::ifstream in(cairn::test::SourceDir() + "/docs/authoring.md");
  EXPECT_TRUE(in) << "docs/authoring.md is missing";
  std::set<std::string> keys;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("#", 0) == 0) {
      inside = line == "### " + heading;
      continue;
    }
    if (!inside || line.rfind("| `", 0) != 0) continue;
    const std::size_t end = line.find("` |", 3);
    if (end != std::string::npos) keys.insert(line.substr(3, end - 3));
  }
  return keys;
}

std::set<std::string> Keys(const std::vector<std::string_view>& keys) {
  return {keys.begin(), keys.end()};
}

// The reference lists exactly the keys the loader accepts, at every level: a
// key added to the parser without its documentation fails here, and so does
// documentation of a key the parser refuses.
TEST(AuthoringReference, ListsExactlyTheKeysTheLoaderAccepts) {
  EXPECT_EQ(DocumentedKeys("The file"), Keys(WorkflowFileKeys()));
  EXPECT_EQ(DocumentedKeys("A workflow"), Keys(WorkflowKeys()));
  EXPECT_EQ(DocumentedKeys("A step"), Keys(StepKeys()));
  EXPECT_EQ(DocumentedKeys("A step's retry policy"), Keys(RetryKeys()));
}

// Every accepted key is read: a file that sets each one away from its
// default loads with each value in place (an accepted key the loader
// ignored would be a silent no-op).
TEST(AuthoringReference, EveryAcceptedKeyIsRead) {
  const auto loaded = LoadDefinitionsFromString(R"(
workflows:
  - name: every_key
    version: 2
    queue: mail
    deadline: 30m
    key_scope: unfinished
    steps:
      - name: reserve
        run: reserve_stock
        timeout: 1m
        transactional: true
        compensate: release_stock
        on_wait_timeout: reserve
        retry:
          max_attempts: 5
          initial_backoff: 2s
          max_backoff: 1m
          multiplier: 3
          jitter: 0.5
          non_retryable: [card_declined]
)",
                                                "every_key.yaml");
  ASSERT_EQ(loaded.size(), 1u);
  const WorkflowDefinition& d = loaded[0];
  EXPECT_EQ(d.name, "every_key");
  EXPECT_EQ(d.version, 2);
  EXPECT_EQ(d.queue, "mail");
  EXPECT_EQ(d.deadline, milliseconds(30 * 60 * 1000));
  EXPECT_EQ(d.key_scope, KeyScope::kUnfinished);
  ASSERT_EQ(d.steps.size(), 1u);
  const StepDefinition& s = d.steps[0];
  EXPECT_EQ(s.name, "reserve");
  EXPECT_EQ(s.run, "reserve_stock");
  EXPECT_EQ(s.timeout, milliseconds(60 * 1000));
  EXPECT_TRUE(s.transactional);
  EXPECT_EQ(s.compensate, "release_stock");
  EXPECT_EQ(s.on_wait_timeout, "reserve");
  EXPECT_EQ(s.retry.max_attempts, 5);
  EXPECT_EQ(s.retry.initial_backoff, milliseconds(2000));
  EXPECT_EQ(s.retry.max_backoff, milliseconds(60 * 1000));
  EXPECT_EQ(s.retry.multiplier, 3.0);
  EXPECT_EQ(s.retry.jitter, 0.5);
  EXPECT_EQ(s.retry.non_retryable, std::vector<std::string>{"card_declined"});
}

}  // namespace
}  // namespace cairn
