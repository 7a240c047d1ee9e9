// See records_json.hpp.
#include "records_json.hpp"

namespace cairn::cli {

Json RunToJson(const Run& run) {
  auto optional = [](const auto& value) -> Json {
    if (!value) return nullptr;
    return *value;
  };
  return {
      {"id", run.id},
      {"namespace", run.namespace_name},
      {"workflow", run.workflow},
      {"definition_version", run.definition_version},
      {"definition_hash", run.definition_hash},
      {"key", optional(run.key)},
      {"key_scope", run.key ? Json(std::string(ToString(run.key_scope))) : Json(nullptr)},
      {"queue", run.queue},
      {"priority", run.priority},
      {"status", std::string(ToString(run.status))},
      {"cursor", optional(run.cursor)},
      {"attempt", run.attempt},
      {"version", run.version},
      {"input", run.input},
      {"context", run.context},
      {"output", optional(run.output)},
      {"error", optional(run.error)},
      {"run_at", run.run_at},
      {"lease_owner", optional(run.lease_owner)},
      {"lease_expires_at", optional(run.lease_expires_at)},
      {"parent_run_id", optional(run.parent_run_id)},
      {"cancel_when", CancelWhen(run.child_options)},
      {"deadline_at", optional(run.deadline_at)},
      {"cancel_reason", optional(run.cancel_reason)},
      {"compensations", run.compensations},
      {"final_status", run.final_status ? Json(std::string(ToString(*run.final_status))) : Json()},
      {"created_at", run.created_at},
      {"updated_at", run.updated_at},
      {"finished_at", optional(run.finished_at)}};
}

Json WaitToJson(const WaitRecord& wait) {
  return {{"correlation_key", wait.correlation_key},
          {"event", wait.event},
          {"status", std::string(ToString(wait.status))},
          {"continuation_step", wait.continuation_step},
          {"children", wait.children ? Json(std::string(ToString(*wait.children))) : Json()},
          {"expires_at", wait.expires_at ? Json(*wait.expires_at) : Json()},
          {"payload", wait.payload ? *wait.payload : Json()}};
}

Json EventToJson(const RunEvent& e) {
  return {{"position", e.position},
          {"step", e.step ? Json(*e.step) : Json()},
          {"attempt", e.attempt},
          {"kind", e.kind},
          {"field", e.field ? Json(*e.field) : Json()},
          {"value", e.value ? *e.value : Json()},
          {"created_at", e.created_at}};
}

Json WorkerToJson(const store::WorkerState& w) {
  return {{"id", w.worker.id},
          {"state", w.state},
          {"host", w.worker.hostname},
          {"pid", w.worker.pid},
          {"version", w.worker.version},
          {"queues", w.worker.queues},
          {"concurrency", w.worker.concurrency},
          {"started_at", w.started_at},
          {"heartbeat_at", w.heartbeat_at},
          {"heartbeat_age_ms", w.heartbeat_age_ms},
          {"stopped_at", w.stopped_at ? Json(*w.stopped_at) : Json(nullptr)},
          {"running", w.running}};
}

Json ScheduleToJson(const store::ScheduleRecord& s) {
  auto optional = [](const std::optional<std::string>& v) -> Json {
    return v ? Json(*v) : Json(nullptr);
  };
  return {{"name", s.name},
          {"workflow", s.workflow},
          {"cron", s.cron},
          {"timezone", s.timezone},
          {"queue", s.queue.empty() ? Json(nullptr) : Json(s.queue)},
          {"input", s.input},
          {"missed", s.missed_policy},
          {"catch_up_limit", s.catch_up_limit},
          {"enabled", s.enabled},
          {"next_fire_at", s.enabled ? optional(s.next_fire_at) : Json(nullptr)},
          {"last_fire_at", optional(s.last_fire_at)}};
}

}  // namespace cairn::cli
