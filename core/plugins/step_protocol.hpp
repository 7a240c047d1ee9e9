// The wire between the daemon and a step process (process isolation): frames
// of a 4-byte little-endian length and a JSON message, over a Unix stream
// socket. What each side sends:
//   host  -> daemon  {"type":"ready","plugins":[...]} or {"type":"error","message":...}
//   daemon -> host   {"type":"invoke","step":<plugin step>,"call":{...}}
//   host  -> daemon  {"type":"sql","sql":...,"params":[...]}   (transactional steps)
//   daemon -> host   {"type":"rows","rows":[...]} or
//                    {"type":"sql_error","refused":bool,"message":...}
//   host  -> daemon  {"type":"idempotency","op":"claim","key":...,"lease_ms":...}
//                    {"type":"idempotency","op":"complete","key":...,"result":...,"ttl_ms":...}
//                    {"type":"idempotency","op":"fail","key":...,"error":...}
//   daemon -> host   {"type":"idempotency","state":{...}} (claim; IdempotencyClaimToJson),
//                    {"type":"idempotency","done":bool} (complete, fail) or
//                    {"type":"idempotency_error","refused":bool,"message":...}
//   host  -> daemon  {"type":"outcome","outcome":{...}}
// Plain functions on a file descriptor; one thread per descriptor at a time.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "model.hpp"
#include "plugin_registry.hpp"
#include "step.hpp"

namespace cairn::plugins {

// A message may not be larger than this (a frame that says more is refused).
inline constexpr size_t kMaxFrameBytes = 256 * 1024 * 1024;

// Writes one frame. False when the peer is gone (never raises SIGPIPE).
bool WriteFrame(int fd, const Json& message);

enum class ReadStatus { kMessage, kClosed, kTimeout, kMalformed };
struct ReadResult {
  ReadStatus status = ReadStatus::kClosed;
  Json message;
};
// Reads one frame, waiting at most until `deadline` (none: for ever).
ReadResult ReadFrame(int fd,
                     std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

Json OutcomeToJson(const StepOutcome& outcome);
StepOutcome OutcomeFromJson(const Json& json);  // throws on a malformed outcome
Json PluginInfoToJson(const PluginInfo& info);
// A claim as plugins see it (host->idempotency_claim) and as it crosses the
// wire: "status" (claimed, in_progress, completed), "in_doubt", and the
// record's fields.
Json IdempotencyClaimToJson(const IdempotencyClaim& claim);
IdempotencyClaim IdempotencyClaimFromJson(const Json& json);  // throws when malformed
PluginInfo PluginInfoFromJson(const Json& json);

}  // namespace cairn::plugins
