// See plugin_step.hpp.
#include "plugin_step.hpp"

#include <exception>
#include <utility>

#include "step_context.hpp"

namespace cairn::plugins {
namespace {

class PluginStep final : public Step {
 public:
  PluginStep(std::string name, std::string plugin, cairn_step_fn invoke, void* user_data)
      : name_(std::move(name)),
        plugin_(std::move(plugin)),
        invoke_(invoke),
        user_data_(user_data) {}

  const std::string& name() const override { return name_; }
  const std::string& plugin() const override { return plugin_; }

  StepOutcome Invoke(const StepCall& call) override {
    const std::string input = call.input != nullptr ? DumpJson(*call.input) : "{}";
    const std::string context = call.context != nullptr ? DumpJson(*call.context) : "{}";
    const std::string& step = call.step.empty() ? name_ : call.step;

    cairn_step_call c{};
    c.struct_size = sizeof(cairn_step_call);
    c.host = &HostApi();
    c.run_id = call.run_id.c_str();
    c.workflow = call.workflow.c_str();
    c.step = step.c_str();
    c.attempt = call.attempt;
    c.transactional = call.sql != nullptr ? 1 : 0;
    c.input = cairn_bytes{input.data(), input.size()};
    c.context = cairn_bytes{context.data(), context.size()};
    c.compensates = call.compensates.empty() ? nullptr : call.compensates.c_str();

    cairn_step_ctx ctx;
    ctx.call = &call;
    ctx.plugin = &plugin_;
    ctx.step = &step;

    // An int, not a cairn_result: a C plugin may return any int, and in C++
    // an enum value outside CAIRN_OK..CAIRN_ERROR is undefined behaviour.
    int result = CAIRN_OK;
    bool escaped = false;
    try {
      result = invoke_(user_data_, &c, &ctx);
    } catch (...) {
      // Only a C++ plugin that bypasses the SDK can get here, and unwinding
      // through its frames may already have gone wrong; contain what we can.
      escaped = true;
    }

    if (ctx.transaction_error) std::rethrow_exception(ctx.transaction_error);

    StepOutcome outcome = std::move(ctx.outcome);
    auto fail = [&](bool retryable, std::string code, std::string message) {
      Json updates = std::move(outcome.context_updates);
      outcome = StepOutcome{};
      outcome.context_updates = std::move(updates);
      outcome.kind = OutcomeKind::kFail;
      outcome.retryable = retryable;
      outcome.error_code = std::move(code);
      outcome.error_message = std::move(message);
    };
    if (escaped) {
      fail(true, "exception",
           "step '" + name_ + "' of plugin '" + plugin_ + "' let an exception escape into cairn");
    } else if (!ctx.plugin_error.empty()) {
      fail(false, "plugin_error",
           "step '" + name_ + "' of plugin '" + plugin_ +
               "' misused the host API: " + ctx.plugin_error);
    } else if (result == CAIRN_OK) {
      // The chosen outcome stands; none chosen is kNext (the default).
    } else if (result == CAIRN_RETRY || result == CAIRN_ERROR) {
      const bool retryable = result == CAIRN_RETRY;
      if (outcome.kind == OutcomeKind::kFail) {
        outcome.retryable = retryable;
      } else {
        std::string message = "step returned " +
                              std::string(retryable ? "CAIRN_RETRY" : "CAIRN_ERROR") +
                              " without calling fail()";
        if (!ctx.last_error.empty()) message += " (last host error: " + ctx.last_error + ")";
        fail(retryable, "step_error", std::move(message));
      }
    } else {
      fail(false, "plugin_error",
           "step '" + name_ + "' of plugin '" + plugin_ + "' returned an unknown result " +
               std::to_string(result));
    }
    return outcome;
  }

 private:
  std::string name_;
  std::string plugin_;
  cairn_step_fn invoke_;
  void* user_data_;
};

}  // namespace

std::shared_ptr<Step> MakePluginStep(std::string name, std::string plugin, cairn_step_fn invoke,
                                     void* user_data) {
  return std::make_shared<PluginStep>(std::move(name), std::move(plugin), invoke, user_data);
}

}  // namespace cairn::plugins
