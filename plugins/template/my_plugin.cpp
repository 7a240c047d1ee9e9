// A cairn step plugin: copy this directory, rename the plugin and its steps,
// and build it as README.md says. A step is a function from a StepContext
// (input, context, attempt, SQL for transactional steps, signal and
// start_child) to an Outcome (Next, Jump, Wait, WaitChildren, Sleep,
// SleepUntil, Complete, Fail, FailPermanent). Steps may run on several threads
// at once and more than once per run: keep them stateless and make external
// side effects idempotent.
#include <cairn/sdk.hpp>
#include <string>

namespace {

// Reads input.name and stores a greeting in the run's context.
cairn::sdk::Outcome Greet(cairn::sdk::StepContext& ctx) {
  const std::string name = ctx.input().value("name", "world");
  ctx.set("greeting", "hello, " + name);
  return cairn::sdk::Next();
}

// Finishes the run with the greeting as output.
cairn::sdk::Outcome Finish(cairn::sdk::StepContext& ctx) {
  return cairn::sdk::Complete({{"greeting", ctx.context().value("greeting", "")}});
}

}  // namespace

// Plugin name, version, and steps. Step names are global across all loaded
// plugins: prefix them with something of yours.
// clang-format off
CAIRN_PLUGIN("my_plugin", "0.1.0",
             CAIRN_STEP("my_plugin_greet", Greet),
             CAIRN_STEP("my_plugin_finish", Finish))
// clang-format on
