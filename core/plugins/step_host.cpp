// See step_host.hpp.
#include "step_host.hpp"

#include <spdlog/spdlog.h>

#include <exception>

#include "plugin_registry.hpp"
#include "step_protocol.hpp"

namespace cairn::plugins {
namespace {

// A transactional step's SQL, sent to the daemon and answered there from the
// checkpoint's transaction. Errors come back as the kinds the host API
// expects: a refused statement, or a database error that aborted the
// transaction.
class RemoteStepSql : public StepSql {
 public:
  explicit RemoteStepSql(int fd) : fd_(fd) {}

  Json Execute(const std::string& sql, const Json& params) override {
    if (!WriteFrame(fd_, {{"type", "sql"}, {"sql", sql}, {"params", params}})) {
      throw DatabaseError(ErrorKind::kTransient, "step sql", "", "the daemon went away");
    }
    const ReadResult reply = ReadFrame(fd_);
    if (reply.status != ReadStatus::kMessage) {
      throw DatabaseError(ErrorKind::kTransient, "step sql", "", "the daemon went away");
    }
    const std::string type = reply.message.value("type", "");
    if (type == "rows") return reply.message.at("rows");
    const std::string message = reply.message.value("message", "step sql failed");
    if (reply.message.value("refused", false)) throw InvalidArgumentError(message);
    throw DatabaseError(ErrorKind::kPermanent, "step sql", "", message);
  }

 private:
  int fd_;
};

// The idempotency store, reached through the daemon, which runs each call on
// its idempotency session. Errors come back as the kinds the host API
// expects: a refused argument, or a database failure.
class RemoteStepIdempotency : public StepIdempotency {
 public:
  explicit RemoteStepIdempotency(int fd) : fd_(fd) {}

  IdempotencyClaim Claim(const std::string& key, std::chrono::milliseconds lease) override {
    const Json reply = Ask({{"type", "idempotency"},
                            {"op", "claim"},
                            {"key", key},
                            {"lease_ms", static_cast<int64_t>(lease.count())}});
    return IdempotencyClaimFromJson(reply.at("state"));
  }

  bool Complete(const std::string& key, const Json& result,
                std::chrono::milliseconds ttl) override {
    return Ask({{"type", "idempotency"},
                {"op", "complete"},
                {"key", key},
                {"result", result},
                {"ttl_ms", static_cast<int64_t>(ttl.count())}})
        .at("done")
        .get<bool>();
  }

  bool Fail(const std::string& key, const std::string& error) override {
    return Ask({{"type", "idempotency"}, {"op", "fail"}, {"key", key}, {"error", error}})
        .at("done")
        .get<bool>();
  }

 private:
  Json Ask(const Json& request) {
    if (!WriteFrame(fd_, request)) {
      throw DatabaseError(ErrorKind::kTransient, "idempotency", "", "the daemon went away");
    }
    const ReadResult reply = ReadFrame(fd_);
    if (reply.status != ReadStatus::kMessage) {
      throw DatabaseError(ErrorKind::kTransient, "idempotency", "", "the daemon went away");
    }
    if (reply.message.value("type", "") == "idempotency") return reply.message;
    const std::string message = reply.message.value("message", "idempotency call failed");
    if (reply.message.value("refused", false)) throw InvalidArgumentError(message);
    throw DatabaseError(ErrorKind::kTransient, "idempotency", "", message);
  }

  int fd_;
};

StepOutcome Invoke(int fd, const PluginRegistry& plugins, const Json& request) {
  const std::string step_name = request.at("step").get<std::string>();
  const Json& c = request.at("call");
  std::shared_ptr<Step> step = plugins.Find(step_name);
  if (!step)
    return FailureOutcome("unknown_step", "plugin step \"" + step_name + "\" is not loaded");
  const Json input = c.at("input");
  const Json context = c.at("context");
  RemoteStepSql sql(fd);
  RemoteStepIdempotency idempotency(fd);
  StepCall call;
  call.run_id = c.at("run_id").get<std::string>();
  call.workflow = c.at("workflow").get<std::string>();
  call.step = c.at("step").get<std::string>();
  call.compensates = c.at("compensates").get<std::string>();
  call.attempt = c.at("attempt").get<int>();
  call.input = &input;
  call.context = &context;
  call.sql = c.at("transactional").get<bool>() ? &sql : nullptr;
  call.idempotency = &idempotency;
  try {
    return step->Invoke(call);
  } catch (const std::exception& e) {
    return FailureOutcome("exception", e.what());
  } catch (...) {
    return FailureOutcome("exception", "the step threw a non-standard exception");
  }
}

}  // namespace

int ServeSteps(int fd, const std::vector<std::string>& plugin_paths) {
  PluginRegistry plugins;
  try {
    plugins.Load(plugin_paths);
  } catch (const std::exception& e) {
    WriteFrame(fd, {{"type", "error"}, {"message", e.what()}});
    return 1;
  }
  Json ready = {{"type", "ready"}, {"plugins", Json::array()}};
  for (const PluginInfo& info : plugins.List()) ready["plugins"].push_back(PluginInfoToJson(info));
  if (!WriteFrame(fd, ready)) return 0;
  while (true) {
    const ReadResult request = ReadFrame(fd);
    if (request.status != ReadStatus::kMessage) return 0;  // the daemon closed its end
    try {
      const StepOutcome outcome = Invoke(fd, plugins, request.message);
      if (!WriteFrame(fd, {{"type", "outcome"}, {"outcome", OutcomeToJson(outcome)}})) return 0;
    } catch (const std::exception& e) {
      // A request this host cannot read: say so and let the daemon decide.
      spdlog::error("step host: bad request from the daemon: {}", e.what());
      return 2;
    }
  }
}

}  // namespace cairn::plugins
