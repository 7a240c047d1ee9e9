// libFuzzer target: the host functions of the plugin ABI that take JSON
// buffers and strings from a plugin (cairn/plugin.h). The input is a script
// of host calls with fuzzed arguments (NULL pointers and lengths included),
// run by a step of the real adapter (MakePluginStep); the outcome must then
// cross the step-process wire (step_protocol.hpp) unchanged, and every JSON
// value in it must print as the store prints it. A report, an exception that
// escapes the adapter, or a broken invariant (abort) is a defect.
#include <cairn/plugin.h>
#include <fuzzer/FuzzedDataProvider.h>
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "plugin_step.hpp"
#include "step_protocol.hpp"

// plugin_abi_calls.c
extern "C" cairn_result FuzzWaitChildren(const cairn_host_api* host, cairn_step_ctx* ctx, int mode,
                                         const char* event, int64_t timeout_ms);
extern "C" void FuzzLog(const cairn_host_api* host, cairn_step_ctx* ctx, int level,
                        const char* message);

namespace {

// A string argument: sometimes NULL, else fuzzed bytes up to the first NUL.
struct CString {
  std::optional<std::string> text;
  const char* get() const { return text ? text->c_str() : nullptr; }
};
CString ConsumeCString(FuzzedDataProvider& in) {
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) return {};
  return {in.ConsumeRandomLengthString(64)};
}

// A JSON buffer: {NULL, n} sometimes, else fuzzed bytes (not NUL-terminated
// where it ends, as the ABI allows).
struct Buffer {
  std::vector<char> bytes;
  bool null = false;
  size_t null_len = 0;
  cairn_bytes get() const {
    if (null) return {nullptr, null_len};
    return {bytes.data(), bytes.size()};
  }
};
Buffer ConsumeBuffer(FuzzedDataProvider& in) {
  Buffer buffer;
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) {
    buffer.null = true;
    buffer.null_len = in.ConsumeIntegralInRange<size_t>(0, 4);
    return buffer;
  }
  const std::string text = in.ConsumeRandomLengthString(512);
  buffer.bytes.assign(text.begin(), text.end());
  return buffer;
}

cairn_result FuzzedStep(void* user_data, const cairn_step_call* call, cairn_step_ctx* ctx) {
  auto& in = *static_cast<FuzzedDataProvider*>(user_data);
  const cairn_host_api& host = *call->host;
  while (in.remaining_bytes() > 0) {
    switch (in.ConsumeIntegralInRange<int>(0, 14)) {
      case 0: {
        const CString key = ConsumeCString(in);
        const Buffer json = ConsumeBuffer(in);
        host.set_context(ctx, key.get(), json.get());
        break;
      }
      case 1: {
        const Buffer json = ConsumeBuffer(in);
        host.complete(ctx, json.get());
        break;
      }
      case 2: {
        const CString key = ConsumeCString(in);
        const Buffer json = ConsumeBuffer(in);
        host.signal(ctx, key.get(), json.get());
        break;
      }
      case 3: {
        const CString workflow = ConsumeCString(in);
        const Buffer json = ConsumeBuffer(in);
        host.start_child(ctx, workflow.get(), json.get());
        break;
      }
      case 4: {
        const int retryable = in.ConsumeIntegral<int>();
        const CString code = ConsumeCString(in);
        const CString message = ConsumeCString(in);
        host.fail(ctx, retryable, code.get(), message.get());
        break;
      }
      case 5: {
        const CString step = ConsumeCString(in);
        host.jump(ctx, step.get());
        break;
      }
      case 6: {
        const CString event = ConsumeCString(in);
        const CString key = ConsumeCString(in);
        host.wait(ctx, event.get(), key.get(), in.ConsumeIntegral<int64_t>());
        break;
      }
      case 7:
        host.sleep_ms(ctx, in.ConsumeIntegral<int64_t>());
        break;
      case 8: {
        const CString when = ConsumeCString(in);
        host.sleep_until(ctx, when.get());
        break;
      }
      case 9: {
        const int mode = in.ConsumeIntegral<int>();
        const CString event = ConsumeCString(in);
        FuzzWaitChildren(&host, ctx, mode, event.get(), in.ConsumeIntegral<int64_t>());
        break;
      }
      case 10: {
        const CString sql = ConsumeCString(in);
        const Buffer params = ConsumeBuffer(in);
        cairn_bytes rows{nullptr, 0};
        host.sql_exec(ctx, sql.get(), params.get(), in.ConsumeBool() ? &rows : nullptr);
        break;
      }
      case 11: {
        const CString message = ConsumeCString(in);
        FuzzLog(&host, ctx, in.ConsumeIntegral<int>(), message.get());
        break;
      }
      case 12:
        host.next(ctx);
        break;
      case 13:
        if (host.last_error(ctx) == nullptr) std::abort();
        break;
      case 14: {
        const CString workflow = ConsumeCString(in);
        const Buffer json = ConsumeBuffer(in);
        host.start_child_with(ctx, workflow.get(), json.get(), in.ConsumeIntegral<uint32_t>());
        break;
      }
    }
  }
  return static_cast<cairn_result>(in.ConsumeIntegralInRange<int>(0, 3));
}

// What the store does with the outcome's values: a strict dump (no
// replacement of invalid UTF-8).
void PrintLikeTheStore(const cairn::StepOutcome& o) {
  (void)o.context_updates.dump();
  (void)o.output.dump();
  for (const auto& [key, payload] : o.signals) {
    (void)cairn::Json(key).dump();
    (void)payload.dump();
  }
  for (const cairn::ChildStart& child : o.children) {
    (void)cairn::Json(child.workflow).dump();
    (void)child.input.dump();
  }
  for (const std::string* text :
       {&o.jump_to, &o.wait_event, &o.wait_key, &o.error_code, &o.error_message}) {
    (void)cairn::Json(*text).dump();
  }
  if (o.sleep_until) (void)cairn::Json(*o.sleep_until).dump();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const auto step = cairn::plugins::MakePluginStep("fuzzed", "fuzz", &FuzzedStep, &in);
  const cairn::Json input = {{"order", 1}};
  const cairn::Json context = cairn::Json::object();
  cairn::StepCall call;
  call.run_id = "00000000-0000-0000-0000-000000000001";
  call.workflow = "fuzz";
  call.step = "fuzzed";
  call.attempt = 1;
  call.input = &input;
  call.context = &context;
  const cairn::StepOutcome outcome = step->Invoke(call);
  PrintLikeTheStore(outcome);
  // Across the step-process wire and back: the same outcome.
  const cairn::Json wire = cairn::Json::parse(cairn::plugins::OutcomeToJson(outcome).dump(
      -1, ' ', false, cairn::Json::error_handler_t::replace));
  const cairn::StepOutcome back = cairn::plugins::OutcomeFromJson(wire);
  if (cairn::plugins::OutcomeToJson(back) != cairn::plugins::OutcomeToJson(outcome)) std::abort();
  return 0;
}
