// Names of run and wait statuses as stored in the database.
#include "model.hpp"

#include <array>
#include <utility>

#include "errors.hpp"

namespace cairn {

namespace {
constexpr std::array<std::pair<RunStatus, std::string_view>, 8> kRunStatusNames = {{
    {RunStatus::kReady, "ready"},
    {RunStatus::kRunning, "running"},
    {RunStatus::kWaiting, "waiting"},
    {RunStatus::kCompleted, "completed"},
    {RunStatus::kFailed, "failed"},
    {RunStatus::kCancelled, "cancelled"},
    {RunStatus::kCompensating, "compensating"},
    {RunStatus::kCompensationFailed, "compensation_failed"},
}};

constexpr std::array<std::pair<WaitStatus, std::string_view>, 5> kWaitStatusNames = {{
    {WaitStatus::kWaiting, "WAITING"},
    {WaitStatus::kResuming, "RESUMING"},
    {WaitStatus::kResumed, "RESUMED"},
    {WaitStatus::kCancelled, "CANCELLED"},
    {WaitStatus::kExpired, "EXPIRED"},
}};
}  // namespace

const char* ToString(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kTransient:
      return "transient";
    case ErrorKind::kInDoubt:
      return "in_doubt";
    case ErrorKind::kPermanent:
      return "permanent";
    case ErrorKind::kInvalidArgument:
      return "invalid_argument";
    case ErrorKind::kNotFound:
      return "not_found";
    case ErrorKind::kConflict:
      return "conflict";
  }
  return "unknown";
}

std::string_view ToString(KeyScope scope) {
  return scope == KeyScope::kForever ? "forever" : "unfinished";
}

std::optional<KeyScope> ParseKeyScope(std::string_view name) {
  if (name == "forever") return KeyScope::kForever;
  if (name == "unfinished") return KeyScope::kUnfinished;
  return std::nullopt;
}

std::string_view ToString(RunStatus status) {
  for (const auto& [value, name] : kRunStatusNames) {
    if (value == status) return name;
  }
  return "unknown";
}

RunStatus ParseRunStatus(std::string_view name) {
  for (const auto& [value, known] : kRunStatusNames) {
    if (known == name) return value;
  }
  std::string valid;
  for (const auto& entry : kRunStatusNames) {
    valid += (valid.empty() ? "" : ", ") + std::string(entry.second);
  }
  throw InvalidArgumentError("unknown run status \"" + std::string(name) + "\" (one of: " + valid +
                             ")");
}

bool IsFinished(RunStatus status) {
  return status == RunStatus::kCompleted || status == RunStatus::kFailed ||
         status == RunStatus::kCancelled || status == RunStatus::kCompensationFailed;
}

std::string_view ToString(ChildWait mode) { return mode == ChildWait::kAll ? "all" : "first"; }

ChildWait ParseChildWait(std::string_view name) {
  for (ChildWait mode : {ChildWait::kAll, ChildWait::kFirst}) {
    if (ToString(mode) == name) return mode;
  }
  throw InvalidArgumentError("unknown child wait \"" + std::string(name) +
                             "\" (one of: all, first)");
}

Json CancelWhen(const ChildOptions& options) {
  Json names = Json::array();
  if (options.cancel_when_parent_fails) names.push_back("parent_fails");
  if (options.cancel_when_first_done) names.push_back("first_done");
  return names;
}

std::string_view ToString(WaitStatus status) {
  for (const auto& [value, name] : kWaitStatusNames) {
    if (value == status) return name;
  }
  return "unknown";
}

WaitStatus ParseWaitStatus(std::string_view name) {
  for (const auto& [value, known] : kWaitStatusNames) {
    if (known == name) return value;
  }
  throw InvalidArgumentError("unknown wait status \"" + std::string(name) + "\"");
}

}  // namespace cairn
