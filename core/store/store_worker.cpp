// Store operations of a worker: starting and claiming runs, leases,
// registration of workers and definitions, and LISTEN for wake-ups.
#include <poll.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cerrno>
#include <system_error>

#include "identifier.hpp"
#include "sql_catalog.hpp"
#include "store_internal.hpp"

namespace cairn::store {

namespace {

// Runs a statement that starts a run; an unknown workflow is NotFoundError.
template <typename... Params>
pqxx::row StartingRun(Tx& tx, const char* query, const Params&... params) {
  try {
    return Internal(tx).Exec(query, params...)[0];
  } catch (const DatabaseError& e) {
    if (e.sqlstate() == "P0002") throw NotFoundError(e.what());
    throw;
  }
}

}  // namespace

StartedRun StartRun(Tx& tx, const StartRequest& r) {
  if (r.key) ValidateKey("the run key", *r.key);
  std::optional<int64_t> deadline_ms;
  if (r.deadline) deadline_ms = r.deadline->count();
  std::optional<std::string> key_scope;
  if (r.key_scope) key_scope = std::string(ToString(*r.key_scope));
  const pqxx::row row =
      StartingRun(tx, "start_run", r.workflow, r.input.dump(), r.key, r.queue, r.priority, r.run_at,
                  r.namespace_name, r.version, deadline_ms, key_scope);
  return {row["run_id"].c_str(), row["created"].as<bool>()};
}

std::string StartChildRun(Tx& tx, const std::string& parent_run_id,
                          const std::optional<std::string>& parent_wait_key,
                          const ChildStart& child) {
  return StartingRun(tx, "start_child_run", parent_run_id, parent_wait_key, child.workflow,
                     child.input.dump(), child.options.cancel_when_parent_fails,
                     child.options.cancel_when_first_done)[0]
      .c_str();
}

std::unordered_map<RunStatus, int64_t> CountRuns(Tx& tx) {
  std::unordered_map<RunStatus, int64_t> counts;
  for (const auto& row : Internal(tx).Exec("count_runs")) {
    counts[ParseRunStatus(row[0].c_str())] = row[1].as<int64_t>();
  }
  return counts;
}

void DropSchema(Tx& tx) {
  auto& t = Internal(tx);
  t.work.exec(sql::WithSchema(sql::Query("drop_schema"), t.session.options.schema));
}

std::string DatabaseNowPlus(Tx& tx, std::chrono::milliseconds offset) {
  return Internal(tx).Exec("now_plus", static_cast<int64_t>(offset.count()))[0][0].c_str();
}

std::vector<ClaimedRun> ClaimRuns(Tx& tx, const std::vector<std::string>& queues,
                                  const std::vector<std::string>& definition_hashes, int limit,
                                  const std::string& worker_id, std::chrono::milliseconds lease) {
  std::vector<ClaimedRun> runs;
  for (const auto& row :
       Internal(tx).Exec("claim_runs", ArrayLiteral(queues), ArrayLiteral(definition_hashes), limit,
                         worker_id, static_cast<int64_t>(lease.count()), false)) {
    try {
      runs.push_back({DecodeRun(row), row["step_tokens"].as<bool>()});
    } catch (const std::exception& e) {
      // The claim may have committed already (it is one statement): the
      // runs claimed with this one go on, and this one is left to its lease,
      // whose expiries the crash limit counts.
      spdlog::error("run {}: claimed, but its row cannot be read ({}); left to its lease",
                    row["id"].c_str(), e.what());
    }
  }
  return runs;
}

namespace {

pqxx::result ExecSlotClaim(Tx& tx, const ClaimRequest& claim, int limit) {
  return Internal(tx).Exec("claim_runs", ArrayLiteral(claim.queues),
                           ArrayLiteral(claim.definition_hashes), limit, claim.worker_id,
                           static_cast<int64_t>(claim.lease.count()), true);
}

}  // namespace

std::optional<ClaimedNextRun> ClaimRunForSlot(Tx& tx, const ClaimRequest& claim) {
  const pqxx::result rows = ExecSlotClaim(tx, claim, 1);
  if (rows.empty()) return std::nullopt;
  return TakeClaimedNextRun(Internal(tx), rows[0]);
}

void PlanClaimRunForSlot(Tx& tx, const ClaimRequest& claim) { ExecSlotClaim(tx, claim, 0); }

std::chrono::milliseconds TakeStepToken(Tx& tx, const std::string& queue) {
  const pqxx::result rows = Internal(tx).Exec("take_step_token", queue);
  if (rows.empty()) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds(rows[0][0].as<int64_t>());
}

namespace {

template <typename T>
std::optional<T> OptionalValue(const pqxx::field& field) {
  if (field.is_null()) return std::nullopt;
  return field.as<T>();
}

}  // namespace

std::vector<QueueLimit> ListQueueLimits(Tx& tx) {
  std::vector<QueueLimit> limits;
  for (const auto& row : Internal(tx).Exec("queue_limits_list")) {
    QueueLimit limit;
    limit.queue = row["queue"].c_str();
    limit.max_running = OptionalValue<int>(row["max_running"]);
    limit.rate_per_second = OptionalValue<double>(row["rate_per_second"]);
    limit.burst = OptionalValue<int>(row["burst"]);
    limit.tokens = OptionalValue<double>(row["tokens"]);
    limit.running = row["running"].as<int64_t>();
    limits.push_back(std::move(limit));
  }
  return limits;
}

QueueLimitChange SetQueueLimit(Tx& tx, const QueueLimit& limit) {
  if (limit.queue.empty()) throw InvalidArgumentError("a queue limit needs a queue name");
  const pqxx::result rows = Internal(tx).Exec("queue_limit_upsert", limit.queue, limit.max_running,
                                              limit.rate_per_second, limit.burst);
  QueueLimitChange change;
  if (rows.empty()) return change;
  const pqxx::row row = rows[0];
  change.kind =
      row["existed"].as<bool>() ? QueueLimitChange::kUpdated : QueueLimitChange::kInserted;
  change.before.queue = limit.queue;
  change.before.max_running = OptionalValue<int>(row["old_max_running"]);
  change.before.rate_per_second = OptionalValue<double>(row["old_rate_per_second"]);
  change.before.burst = OptionalValue<int>(row["old_burst"]);
  return change;
}

std::vector<std::string> DeleteQueueLimitsExcept(Tx& tx, const std::vector<std::string>& queues) {
  std::vector<std::string> lifted;
  for (const auto& row : Internal(tx).Exec("queue_limits_delete_except", ArrayLiteral(queues))) {
    lifted.emplace_back(row[0].c_str());
  }
  return lifted;
}

std::optional<int64_t> MillisUntilNextDue(Tx& tx, const std::vector<std::string>& queues,
                                          const std::vector<std::string>& definition_hashes) {
  pqxx::result rows =
      Internal(tx).Exec("next_due", ArrayLiteral(queues), ArrayLiteral(definition_hashes));
  if (rows[0][0].is_null()) return std::nullopt;
  return rows[0][0].as<int64_t>();
}

LeaseRenewal RenewLeases(Tx& tx, const std::string& worker_id, const std::vector<HeldRun>& held,
                         std::chrono::milliseconds lease) {
  LeaseRenewal renewal;
  if (held.empty()) return renewal;
  Json batch = Json::array();
  for (const auto& h : held) batch.push_back({{"id", h.run_id}, {"version", h.version}});
  for (const auto& row : Internal(tx).Exec("renew_leases", worker_id, batch.dump(),
                                           static_cast<int64_t>(lease.count()))) {
    const std::string_view outcome = row["outcome"].c_str();
    if (outcome == "renewed") renewal.renewed.emplace_back(row["id"].c_str());
    if (outcome == "busy") renewal.busy.emplace_back(row["id"].c_str());
  }
  return renewal;
}

std::vector<ReapedRun> ReapExpiredLeases(Tx& tx, int crash_limit, int limit) {
  if (crash_limit < 1) throw InvalidArgumentError("the crash limit must be at least 1");
  std::vector<ReapedRun> reaped;
  for (const auto& row : Internal(tx).Exec("reap_leases", limit, crash_limit)) {
    ReapedRun run;
    run.run_id = row["id"].c_str();
    run.workflow = row["workflow"].c_str();
    run.step = OptionalText(row["cursor"]);
    run.attempt = row["attempt"].as<int>();
    run.status = ParseRunStatus(row["status"].c_str());
    run.previous_owner = row["lease_owner"].c_str();
    run.lease_expiries = row["expiries"].as<int>();
    run.crashed = row["crashed"].as<bool>();
    reaped.push_back(std::move(run));
  }
  return reaped;
}

bool ReleaseRun(Tx& tx, const std::string& run_id, int64_t version, const std::string& worker_id,
                std::chrono::milliseconds delay) {
  return !Internal(tx)
              .Exec("release_run", run_id, version, worker_id, static_cast<int64_t>(delay.count()))
              .empty();
}

ServerLimits ReadServerLimits(Tx& tx) {
  const pqxx::row row = Internal(tx).Exec("server_limits")[0];
  return {row["max_connections"].as<int>(), row["reserved"].as<int>(), row["in_use"].as<int>(),
          row["superuser"].as<bool>(), row["role"].c_str()};
}

void RegisterDefinition(Tx& tx, const DefinitionRecord& d) {
  Internal(tx).Exec("register_definition", d.hash, d.workflow, d.version, d.first_step,
                    d.definition.dump());
}

void RegisterWorker(Tx& tx, const WorkerRecord& w) {
  Internal(tx).Exec("register_worker", w.id, w.hostname, w.pid, ArrayLiteral(w.queues),
                    ArrayLiteral(w.served_definitions), w.version, w.concurrency);
}

std::vector<WorkerState> ListWorkers(Tx& tx, std::chrono::milliseconds liveness, int limit) {
  std::vector<WorkerState> workers;
  for (const auto& row :
       Internal(tx).Exec("list_workers", static_cast<int64_t>(liveness.count()), limit)) {
    WorkerState w;
    w.worker.id = row["id"].c_str();
    w.worker.hostname = row["hostname"].c_str();
    w.worker.pid = row["pid"].as<int>();
    w.worker.version = row["version"].c_str();
    w.worker.queues = JsonField(row["queues"]).get<std::vector<std::string>>();
    w.worker.concurrency = row["concurrency"].as<int>();
    w.state = row["state"].c_str();
    w.started_at = row["started_at"].c_str();
    w.heartbeat_at = row["heartbeat_at"].c_str();
    w.heartbeat_age_ms = row["heartbeat_age_ms"].as<int64_t>();
    w.stopped_at = OptionalText(row["stopped_at"]);
    w.running = JsonField(row["running"]);
    workers.push_back(std::move(w));
  }
  return workers;
}

void HeartbeatWorker(Tx& tx, const std::string& worker_id) {
  Internal(tx).Exec("heartbeat_worker", worker_id);
}

void StopWorker(Tx& tx, const std::string& worker_id) {
  Internal(tx).Exec("stop_worker", worker_id);
}

std::vector<Run> StrandedRuns(Tx& tx, std::chrono::milliseconds liveness, int limit) {
  std::vector<Run> runs;
  for (const auto& row :
       Internal(tx).Exec("stranded_runs", static_cast<int64_t>(liveness.count()), limit)) {
    runs.push_back(DecodeRun(row));
  }
  return runs;
}

std::vector<std::pair<std::string, int64_t>> CountStrandedRuns(Tx& tx,
                                                               std::chrono::milliseconds liveness,
                                                               int limit) {
  // Counted over stranded_runs itself, so the rule of what is stranded stays
  // in that one file.
  auto& t = Internal(tx);
  const std::string text = "SELECT s.queue, count(*) FROM (" +
                           std::string(sql::Query("stranded_runs")) +
                           ") s GROUP BY s.queue ORDER BY s.queue";
  std::vector<std::pair<std::string, int64_t>> counts;
  try {
    for (const auto& row : t.work.exec_params(sql::WithSchema(text, t.session.options.schema),
                                              static_cast<int64_t>(liveness.count()), limit)) {
      counts.emplace_back(row[0].c_str(), row[1].as<int64_t>());
    }
  } catch (...) {
    RethrowTranslated("count_stranded_runs");
  }
  return counts;
}

std::vector<BacklogRow> ReadBacklog(Tx& tx) {
  std::vector<BacklogRow> rows;
  for (const auto& row : Internal(tx).Exec("backlog")) {
    BacklogRow r;
    r.queue = row["queue"].c_str();
    r.state = row["state"].c_str();
    r.runs = row["runs"].as<int64_t>();
    if (!row["oldest_due_age"].is_null())
      r.oldest_due_age_seconds = row["oldest_due_age"].as<double>();
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<std::string> RepinRuns(Tx& tx, const std::string& from_hash,
                                   const std::string& to_hash) {
  std::vector<std::string> ids;
  for (const auto& row : Internal(tx).Exec("repin_runs", from_hash, to_hash)) {
    ids.emplace_back(row[0].c_str());
  }
  return ids;
}

struct WakeListener::Impl {
  class Receiver : public pqxx::notification_receiver {
   public:
    Receiver(pqxx::connection_base& connection, const std::string& channel)
        : pqxx::notification_receiver(connection, channel) {}
    void operator()(const std::string&, int) override {}
  };
  Connection session;
  std::unique_ptr<Receiver> receiver;

  explicit Impl(ConnectionOptions options) : session(std::move(options)) {}
};

WakeListener::WakeListener(ConnectionOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  try {
    std::string channel;
    impl_->session.Transact(
        [&](Tx& tx) { channel = Internal(tx).Exec("wake_channel")[0][0].c_str(); });
    impl_->receiver = std::make_unique<Impl::Receiver>(*impl_->session.impl().connection, channel);
  } catch (...) {
    RethrowTranslated("listen");
  }
}

WakeListener::~WakeListener() = default;

bool WakeListener::Wait(std::chrono::milliseconds timeout, int interrupt) {
  try {
    auto& connection = *impl_->session.impl().connection;
    // Notifications already read with a statement's result come first.
    int received = connection.get_notifs();
    if (received == 0) {
      std::array<pollfd, 2> fds{{{connection.sock(), POLLIN, 0}, {interrupt, POLLIN, 0}}};
      const nfds_t count = interrupt >= 0 ? 2 : 1;
      if (::poll(fds.data(), count, static_cast<int>(timeout.count())) < 0 && errno != EINTR) {
        throw std::system_error(errno, std::generic_category(), "poll");
      }
      if (fds[0].revents != 0) received = connection.get_notifs();
    }
    if (!connection.is_open()) {
      throw DatabaseError(ErrorKind::kTransient, "listen", "08006",
                          "the LISTEN connection was lost");
    }
    return received > 0;
  } catch (...) {
    RethrowTranslated("listen");
  }
}

bool WakeListener::OpenGates(const std::vector<std::string>& queues) {
  return LockGateStripes("open_wake_gates", queues);
}

bool WakeListener::AwaitWaiters(const std::vector<std::string>& queues) {
  return LockGateStripes("await_wake_waiters", queues);
}

bool WakeListener::LockGateStripes(const char* query, const std::vector<std::string>& queues) {
  try {
    impl_->session.Autocommit([&](Tx& tx) { Internal(tx).Exec(query, ArrayLiteral(queues)); });
    return true;
  } catch (const DatabaseError& e) {
    if (e.sqlstate() != "55P03") throw;  // lock_not_available
    CloseGates();                        // and the stripes taken before the timeout
    return false;
  }
}

void WakeListener::CloseGates() {
  impl_->session.Autocommit([](Tx& tx) { Internal(tx).Exec("close_wake_gates"); });
}

}  // namespace cairn::store
