// See step_protocol.hpp.
#include "step_protocol.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>

namespace cairn::plugins {
namespace {

// Sends the header and the body in one call where the socket takes them: a
// frame sent in two would wake its reader once for each.
bool WriteAll(int fd, std::array<iovec, 2> parts) {
  size_t first = 0;
  while (first < parts.size()) {
    msghdr message{};
    message.msg_iov = parts.data() + first;
    message.msg_iovlen = parts.size() - first;
    const ssize_t n = ::sendmsg(fd, &message, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    auto sent = static_cast<size_t>(n);
    while (first < parts.size() && sent >= parts[first].iov_len) {
      sent -= parts[first].iov_len;
      ++first;
    }
    if (first < parts.size()) {
      parts[first].iov_base = static_cast<char*>(parts[first].iov_base) + sent;
      parts[first].iov_len -= sent;
    }
  }
  return true;
}

// Reads exactly size bytes; kMessage when it did.
ReadStatus ReadAll(int fd, char* data, size_t size,
                   std::optional<std::chrono::steady_clock::time_point> deadline) {
  while (size > 0) {
    int wait_ms = -1;
    if (deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          *deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return ReadStatus::kTimeout;
      wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 60'000));
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return ReadStatus::kClosed;
    if (ready == 0) continue;  // the deadline is checked above
    const ssize_t n = ::read(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ReadStatus::kClosed;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return ReadStatus::kMessage;
}

std::optional<std::string> OptionalString(const Json& json, const char* key) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return std::nullopt;
  return it->get<std::string>();
}

std::optional<int64_t> OptionalInt(const Json& json, const char* key) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return std::nullopt;
  return it->get<int64_t>();
}

}  // namespace

bool WriteFrame(int fd, const Json& message) {
  std::string body = message.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (body.size() > kMaxFrameBytes) return false;
  const auto size = static_cast<uint32_t>(body.size());
  std::array<char, 4> header = {
      static_cast<char>(size & 0xff), static_cast<char>((size >> 8) & 0xff),
      static_cast<char>((size >> 16) & 0xff), static_cast<char>((size >> 24) & 0xff)};
  return WriteAll(fd, {iovec{header.data(), header.size()}, iovec{body.data(), body.size()}});
}

ReadResult ReadFrame(int fd, std::optional<std::chrono::steady_clock::time_point> deadline) {
  std::array<unsigned char, 4> header{};
  ReadResult result;
  result.status = ReadAll(fd, reinterpret_cast<char*>(header.data()), header.size(), deadline);
  if (result.status != ReadStatus::kMessage) return result;
  const uint32_t size =
      header[0] | (header[1] << 8) | (header[2] << 16) | (static_cast<uint32_t>(header[3]) << 24);
  if (size > kMaxFrameBytes) {
    result.status = ReadStatus::kMalformed;
    return result;
  }
  std::string body(size, '\0');
  result.status = ReadAll(fd, body.data(), body.size(), deadline);
  if (result.status != ReadStatus::kMessage) return result;
  result.message = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (result.message.is_discarded() || !result.message.is_object()) {
    result.status = ReadStatus::kMalformed;
  }
  return result;
}

Json OutcomeToJson(const StepOutcome& o) {
  Json json = {{"kind", static_cast<int>(o.kind)},
               {"context_updates", o.context_updates},
               {"jump_to", o.jump_to},
               {"wait_event", o.wait_event},
               {"wait_key", o.wait_key},
               {"output", o.output},
               {"retryable", o.retryable},
               {"error_code", o.error_code},
               {"error_message", o.error_message},
               {"signals", Json::array()},
               {"children", Json::array()}};
  if (o.wait_children) json["wait_children"] = ToString(*o.wait_children);
  if (o.wait_timeout_ms) json["wait_timeout_ms"] = *o.wait_timeout_ms;
  if (o.sleep_ms) json["sleep_ms"] = *o.sleep_ms;
  if (o.sleep_until) json["sleep_until"] = *o.sleep_until;
  for (const auto& [key, payload] : o.signals) json["signals"].push_back({key, payload});
  for (const ChildStart& child : o.children) {
    json["children"].push_back(
        {child.workflow,
         child.input,
         {{"cancel_when_parent_fails", child.options.cancel_when_parent_fails},
          {"cancel_when_first_done", child.options.cancel_when_first_done}}});
  }
  return json;
}

StepOutcome OutcomeFromJson(const Json& json) {
  StepOutcome o;
  const int kind = json.at("kind").get<int>();
  if (kind < static_cast<int>(OutcomeKind::kNext) || kind > static_cast<int>(OutcomeKind::kFail)) {
    throw std::invalid_argument("unknown outcome kind " + std::to_string(kind));
  }
  o.kind = static_cast<OutcomeKind>(kind);
  o.context_updates = json.at("context_updates");
  o.jump_to = json.at("jump_to").get<std::string>();
  o.wait_event = json.at("wait_event").get<std::string>();
  o.wait_key = json.at("wait_key").get<std::string>();
  if (auto mode = OptionalString(json, "wait_children")) o.wait_children = ParseChildWait(*mode);
  o.wait_timeout_ms = OptionalInt(json, "wait_timeout_ms");
  o.sleep_ms = OptionalInt(json, "sleep_ms");
  o.sleep_until = OptionalString(json, "sleep_until");
  o.output = json.at("output");
  o.retryable = json.at("retryable").get<bool>();
  o.error_code = json.at("error_code").get<std::string>();
  o.error_message = json.at("error_message").get<std::string>();
  for (const auto& signal : json.at("signals")) {
    o.signals.emplace_back(signal.at(0).get<std::string>(), signal.at(1));
  }
  for (const auto& child : json.at("children")) {
    ChildStart start{child.at(0).get<std::string>(), child.at(1), {}};
    const Json& options = child.at(2);
    start.options.cancel_when_parent_fails = options.at("cancel_when_parent_fails").get<bool>();
    start.options.cancel_when_first_done = options.at("cancel_when_first_done").get<bool>();
    o.children.push_back(std::move(start));
  }
  return o;
}

Json PluginInfoToJson(const PluginInfo& info) {
  return {{"name", info.name},           {"version", info.version},     {"file", info.file},
          {"abi_major", info.abi_major}, {"abi_minor", info.abi_minor}, {"steps", info.steps}};
}

PluginInfo PluginInfoFromJson(const Json& json) {
  PluginInfo info;
  info.name = json.at("name").get<std::string>();
  info.version = json.at("version").get<std::string>();
  info.file = json.at("file").get<std::string>();
  info.abi_major = json.at("abi_major").get<int>();
  info.abi_minor = json.at("abi_minor").get<int>();
  info.steps = json.at("steps").get<std::vector<std::string>>();
  return info;
}

namespace {

const char* ClaimStatusName(IdempotencyClaimStatus status) {
  switch (status) {
    case IdempotencyClaimStatus::kClaimed:
      return "claimed";
    case IdempotencyClaimStatus::kInProgress:
      return "in_progress";
    case IdempotencyClaimStatus::kCompleted:
      return "completed";
  }
  return "in_progress";
}

Json OptionalField(const std::optional<std::string>& value) {
  return value ? Json(*value) : Json(nullptr);
}

}  // namespace

Json IdempotencyClaimToJson(const IdempotencyClaim& claim) {
  const IdempotencyRecord& r = claim.record;
  Json json = {{"status", ClaimStatusName(claim.status)},
               {"in_doubt", claim.in_doubt},
               {"namespace", r.namespace_name},
               {"key", r.key},
               {"owner", OptionalField(r.owner)},
               {"claims", r.claims},
               {"expires_at", r.expires_at},
               {"expired", r.expired},
               {"created_at", r.created_at},
               {"claimed_at", r.claimed_at},
               {"completed_at", OptionalField(r.completed_at)},
               {"error", OptionalField(r.error)}};
  if (claim.status == IdempotencyClaimStatus::kCompleted) {
    json["result"] = r.result.value_or(Json());
  }
  return json;
}

IdempotencyClaim IdempotencyClaimFromJson(const Json& json) {
  IdempotencyClaim claim;
  const std::string status = json.at("status").get<std::string>();
  if (status == "claimed") {
    claim.status = IdempotencyClaimStatus::kClaimed;
  } else if (status == "in_progress") {
    claim.status = IdempotencyClaimStatus::kInProgress;
  } else if (status == "completed") {
    claim.status = IdempotencyClaimStatus::kCompleted;
  } else {
    throw std::invalid_argument("unknown idempotency claim status " + status);
  }
  claim.in_doubt = json.at("in_doubt").get<bool>();
  IdempotencyRecord& r = claim.record;
  r.status = claim.status == IdempotencyClaimStatus::kCompleted ? "completed" : "in_progress";
  r.namespace_name = json.at("namespace").get<std::string>();
  r.key = json.at("key").get<std::string>();
  r.owner = OptionalString(json, "owner");
  r.claims = json.at("claims").get<int>();
  r.expires_at = json.at("expires_at").get<std::string>();
  r.expired = json.at("expired").get<bool>();
  r.created_at = json.at("created_at").get<std::string>();
  r.claimed_at = json.at("claimed_at").get<std::string>();
  r.completed_at = OptionalString(json, "completed_at");
  r.error = OptionalString(json, "error");
  if (json.contains("result")) r.result = json.at("result");
  return claim;
}

}  // namespace cairn::plugins
