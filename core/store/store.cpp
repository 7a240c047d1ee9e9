// The store's session layer: connecting, transactions, SQLSTATE translation,
// the stack lock and row decoding. Queries themselves live in sql/queries.
#include <spdlog/spdlog.h>

#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include "identifier.hpp"
#include "sql_catalog.hpp"
#include "store_internal.hpp"

namespace cairn::store {

namespace {

constexpr std::string_view kPoolerAdvice =
    "cairn needs a session of its own per connection (stack locks are session advisory "
    "locks, wake-ups use LISTEN, statements are prepared per session): connect to "
    "PostgreSQL directly, or through a pooler in session mode (PgBouncer pool_mode=session)";

// SQLSTATEs worth retrying: the same statement can succeed a moment later.
bool IsTransientSqlState(const std::string& state) {
  if (state.rfind("08", 0) == 0) return true;  // connection exceptions
  static const std::unordered_set<std::string> kTransient = {
      "40001",  // serialization_failure
      "40P01",  // deadlock_detected
      "57P01",  // admin_shutdown
      "57P02",  // crash_shutdown
      "57P03",  // cannot_connect_now
      "53300",  // too_many_connections
      "55P03",  // lock_not_available
      "57014",  // query_canceled (statement timeout)
  };
  return kTransient.count(state) > 0;
}

std::string Trimmed(std::string message) {
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
    message.pop_back();
  }
  return message;
}

}  // namespace

ErrorKind Classify(const std::string& state) {
  if (IsTransientSqlState(state)) return ErrorKind::kTransient;
  // Data exceptions (a malformed id, timestamp or JSON value in the input)
  // and limits exceeded (an input, payload or context over its cap in the
  // limits table, an index row too large).
  if (state.rfind("22", 0) == 0 || state.rfind("54", 0) == 0) return ErrorKind::kInvalidArgument;
  return ErrorKind::kPermanent;
}

[[noreturn]] void RethrowTranslated(const std::string& operation) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const pqxx::in_doubt_error& e) {
    throw DatabaseError(ErrorKind::kInDoubt, operation, "", e.what());
  } catch (const pqxx::broken_connection& e) {
    throw DatabaseError(ErrorKind::kTransient, operation, "08006", e.what());
  } catch (const pqxx::sql_error& e) {
    std::string state = e.sqlstate();
    // libpqxx 6.4 builds insufficient_privilege without its SQLSTATE.
    if (state.empty() && dynamic_cast<const pqxx::insufficient_privilege*>(&e) != nullptr) {
      state = "42501";
    }
    std::string message = Trimmed(e.what());
    if (state == "42P05" || state == "26000") {
      // A prepared statement that exists, or is missing, where this session
      // made it: the session is shared behind a pooler in transaction mode.
      message += "; " + std::string(kPoolerAdvice);
    }
    throw DatabaseError(Classify(state), operation, state, message);
  } catch (const pqxx::transaction_rollback& e) {
    // Not an sql_error in libpqxx 6.4, and without a SQLSTATE: its type says
    // which one it was.
    const std::string state = dynamic_cast<const pqxx::serialization_failure*>(&e) ? "40001"
                              : dynamic_cast<const pqxx::deadlock_detected*>(&e)   ? "40P01"
                              : dynamic_cast<const pqxx::statement_completion_unknown*>(&e)
                                  ? "40003"
                                  : "40000";
    throw DatabaseError(Classify(state), operation, state, Trimmed(e.what()));
  } catch (const pqxx::failure& e) {
    throw DatabaseError(ErrorKind::kPermanent, operation, "", e.what());
  } catch (const pqxx::usage_error& e) {
    throw DatabaseError(ErrorKind::kPermanent, operation, "", e.what());
  } catch (const pqxx::conversion_error& e) {
    throw DatabaseError(ErrorKind::kPermanent, operation, "", e.what());
  }
  // Anything else (the caller's own exceptions) passes through untouched.
}

[[noreturn]] void Tx::Impl::RethrowTranslated(const std::string& operation) {
  store::RethrowTranslated(operation);
}

namespace {

// Every error leaving a connection passes here once: translated, then told
// to the connection's observer.
[[noreturn]] void RethrowObserved(const ConnectionOptions& options, const std::string& operation) {
  try {
    RethrowTranslated(operation);
  } catch (const DatabaseError& e) {
    if (options.observer) options.observer->Failed(e.kind());
    throw;
  }
}

}  // namespace

const std::string& Connection::Impl::Prepare(const std::string& name) {
  if (prepared.insert(name).second) {
    connection->prepare(name, sql::WithSchema(sql::Query(name), options.schema));
  }
  return name;
}

Connection::Connection(ConnectionOptions options) : impl_(std::make_unique<Impl>()) {
  ValidateSchemaName(options.schema);
  impl_->quoted_schema = QuoteIdentifier(options.schema);
  impl_->options = std::move(options);
  try {
    impl_->connection = std::make_unique<pqxx::connection>(impl_->options.url);
    // A silent reconnect would drop session locks without telling anyone:
    // a lost session must surface as an error. libpqxx 6.4 deprecates the
    // call (7.x no longer reconnects at all) but still reconnects without it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    impl_->connection->inhibit_reactivation(true);
#pragma GCC diagnostic pop
    pqxx::nontransaction setup(*impl_->connection);
    Tx::Impl tx_impl{*impl_, setup};
    auto ms = [](std::chrono::milliseconds d) { return std::to_string(d.count()) + "ms"; };
    auto bound = [&](std::chrono::milliseconds d) { return d.count() > 0 ? ms(d) : std::string(); };
    tx_impl.Exec("session_setup", impl_->options.application_name,
                 ms(impl_->options.idle_in_transaction_timeout),
                 bound(impl_->options.statement_timeout), bound(impl_->options.lock_timeout),
                 impl_->options.generic_plans);
  } catch (...) {
    RethrowObserved(impl_->options, "connect");
  }
  if (impl_->options.observer) impl_->options.observer->Opened();
}

Connection::~Connection() {
  if (impl_->options.observer) impl_->options.observer->Closed();
}

const std::string& Connection::schema() const { return impl_->options.schema; }
const std::string& Connection::quoted_schema() const { return impl_->quoted_schema; }
int Connection::BackendPid() const { return impl_->connection->backendpid(); }
bool Connection::IsOpen() const { return impl_->connection && impl_->connection->is_open(); }

void Connection::TransactImpl(const std::function<void(Tx&)>& fn) {
  try {
    pqxx::work work(*impl_->connection);
    Tx::Impl tx_impl{*impl_, work};
    Tx tx(tx_impl);
    fn(tx);
    if (tx_impl.roll_back) {
      work.abort();
    } else {
      work.commit();
    }
  } catch (...) {
    RethrowObserved(impl_->options, "transaction");
  }
}

void Tx::RollBackOnReturn() { impl_.roll_back = true; }

void Connection::ExecuteOutsideTransaction(const std::function<void(Tx&)>& fn) {
  try {
    pqxx::nontransaction work(*impl_->connection);
    Tx::Impl tx_impl{*impl_, work};
    Tx tx(tx_impl);
    fn(tx);
  } catch (...) {
    RethrowObserved(impl_->options, "statement");
  }
}

namespace {

// Rounds of the session check. Behind a PgBouncer in transaction mode that
// two other busy clients shared, a check of one round passed 11 to 18 times
// in 200 (tests/daemon/pooler_pgtest.cpp); one of 8 rounds, in none of 600.
constexpr int kSessionCheckRounds = 8;

// The server process serving a new transaction of `connection`, and the
// token session_probe_mark left in its session (empty when there is none).
std::pair<std::string, std::string> ReadSessionProbe(pqxx::connection& connection) {
  pqxx::nontransaction tx(connection);
  const pqxx::row row = tx.exec_params1(std::string(sql::Query("session_probe_read")));
  return {row[0].c_str(), row[1].is_null() ? std::string() : row[1].c_str()};
}

}  // namespace

void CheckSessionPooling(const ConnectionOptions& options) {
  std::string token = std::to_string(std::random_device{}()) + "-" +
                      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  bool shared = false;
  try {
    // Unnamed statements only: a named prepared one is what breaks behind
    // the pooler.
    // Both connect at once: each is a new server process.
    auto connecting = std::async(std::launch::async,
                                 [&] { return std::make_unique<pqxx::connection>(options.url); });
    pqxx::connection probe(options.url);
    const std::unique_ptr<pqxx::connection> connected = connecting.get();
    pqxx::connection& other = *connected;
    std::string probe_pid;
    {
      pqxx::nontransaction tx(probe);
      probe_pid = tx.exec_params1(std::string(sql::Query("session_probe_mark")), token)[0].c_str();
    }
    // The two take turns, each statement its own transaction. Behind a
    // transaction pooler the other is handed the server the probe just let
    // go (PgBouncer reuses the last one first), or the probe is handed one
    // that another client used meanwhile: either shows in a round. A third
    // client of the pool can hand the probe's own server back to it in
    // between, so one round proves little; that it does so in every round
    // is the chance left. A direct or session-mode connection keeps each of
    // the two on its own server process throughout.
    std::string other_pid;
    for (int round = 0; round < kSessionCheckRounds && !shared; ++round) {
      const auto [other_now, other_token] = ReadSessionProbe(other);
      const auto [probe_now, probe_token] = ReadSessionProbe(probe);
      if (other_pid.empty()) other_pid = other_now;
      shared = other_now == probe_pid || other_now != other_pid || other_token == token ||
               probe_now != probe_pid || probe_token != token;
    }
  } catch (...) {
    RethrowTranslated("checking the session");
  }
  if (shared) {
    throw InvalidArgumentError(
        "the database connection does not keep its session between transactions: a "
        "connection pooler in transaction or statement mode (such as PgBouncer with "
        "pool_mode=transaction) is in the way. " +
        std::string(kPoolerAdvice));
  }
}

bool Connection::TryLockStack(const std::string& run_id) {
  auto held = impl_->stack_holds.find(run_id);
  if (held != impl_->stack_holds.end()) {
    ++held->second;
    return true;
  }
  bool acquired = false;
  ExecuteOutsideTransaction([&](Tx& tx) {
    acquired = Internal(tx).Exec("stack_try_lock", schema(), run_id)[0][0].as<bool>();
  });
  if (acquired) impl_->stack_holds.emplace(run_id, 1);
  return acquired;
}

void Connection::UnlockStack(const std::string& run_id) { UnlockStacks({run_id}); }

void Connection::UnlockStacks(const std::vector<std::string>& run_ids) {
  std::vector<std::string> released;
  for (const std::string& run_id : run_ids) {
    auto held = impl_->stack_holds.find(run_id);
    if (held == impl_->stack_holds.end()) continue;
    if (--held->second > 0) continue;
    impl_->stack_holds.erase(held);
    released.push_back(run_id);
  }
  // A broken session has released its locks already.
  if (released.empty() || !IsOpen()) return;
  ExecuteOutsideTransaction(
      [&](Tx& tx) { Internal(tx).Exec("stack_unlock", schema(), ArrayLiteral(released)); });
}

void Connection::ReleaseUncountedStackLocks() {
  if (!IsOpen()) return;
  std::vector<std::string> counted;
  for (const auto& [run_id, holds] : impl_->stack_holds) counted.push_back(run_id);
  ExecuteOutsideTransaction([&](Tx& tx) {
    // A lock taken twice needs two releases; each pass releases one level.
    for (int pass = 0; pass < 8; ++pass) {
      const pqxx::result released =
          Internal(tx).Exec("stack_release_uncounted", schema(), ArrayLiteral(counted));
      if (released[0][0].as<int64_t>() == 0) return;
    }
  });
}

bool Connection::HoldsStack(const std::string& run_id) const {
  return impl_->stack_holds.count(run_id) > 0;
}

StackLockedRun LockStackAndLoadRun(Connection& connection, const std::string& run_id) {
  return std::move(LockStacksAndLoadRuns(connection, {run_id}).front());
}

std::vector<StackLockedRun> LockStacksAndLoadRuns(Connection& connection,
                                                  const std::vector<std::string>& run_ids) {
  auto& holds = connection.impl().stack_holds;
  std::vector<bool> held;
  for (const std::string& run_id : run_ids) held.push_back(holds.count(run_id) > 0);
  return connection.Autocommit([&](Tx& tx) {
    const pqxx::result rows = Internal(tx).Exec("lock_stack_and_load_run", connection.schema(),
                                                ArrayLiteral(run_ids), ArrayLiteral(held));
    std::vector<StackLockedRun> out(rows.size());
    // Every lock first: the session holds them now, whatever a decoding
    // below throws.
    for (size_t i = 0; i < rows.size(); ++i) {
      out[i].locked = rows[i]["locked"].as<bool>();
      if (out[i].locked) ++holds[rows[i]["locked_run_id"].c_str()];
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      const pqxx::row row = rows[i];
      if (!out[i].locked || row["id"].is_null()) continue;
      out[i].run = DecodeRunForExecution(row);
    }
    return out;
  });
}

StackLock::StackLock(Connection& connection, std::string run_id)
    : connection_(connection), run_id_(std::move(run_id)) {
  if (!connection_.TryLockStack(run_id_)) throw LockUnavailableError(run_id_);
}

StackLock::~StackLock() {
  try {
    connection_.UnlockStack(run_id_);
  } catch (const std::exception& e) {
    // The session is gone or going; its locks go with it.
    spdlog::warn("releasing the stack lock of run {} failed: {}", run_id_, e.what());
  }
}

std::string ArrayLiteral(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += '"';
    for (char c : values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

std::string ArrayLiteral(const std::vector<bool>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += values[i] ? 't' : 'f';
  }
  return out + "}";
}

std::optional<std::string> OptionalText(const pqxx::field& field) {
  if (field.is_null()) return std::nullopt;
  return std::string(field.c_str(), field.size());
}

Json JsonField(const pqxx::field& field) {
  if (field.is_null()) return Json();
  return Json::parse(field.c_str(), field.c_str() + field.size());
}

std::optional<Json> OptionalJson(const pqxx::field& field) {
  if (field.is_null()) return std::nullopt;
  return JsonField(field);
}

Run DecodeRun(const pqxx::row& row) {
  Run run;
  run.id = row["id"].c_str();
  run.namespace_name = row["namespace"].c_str();
  run.workflow = row["workflow"].c_str();
  run.definition_version = row["definition_version"].as<int>();
  run.definition_hash = row["definition_hash"].c_str();
  run.key = OptionalText(row["run_key"]);
  run.key_scope = ParseKeyScope(row["key_scope"].c_str()).value_or(KeyScope::kForever);
  run.queue = row["queue"].c_str();
  run.priority = row["priority"].as<int>();
  run.input = JsonField(row["input"]);
  run.context = JsonField(row["context"]);
  run.cursor = OptionalText(row["cursor"]);
  run.attempt = row["attempt"].as<int>();
  run.status = ParseRunStatus(row["status"].c_str());
  run.run_at = row["run_at"].c_str();
  run.lease_owner = OptionalText(row["lease_owner"]);
  run.lease_expires_at = OptionalText(row["lease_expires_at"]);
  run.version = row["version"].as<int64_t>();
  run.output = OptionalJson(row["output"]);
  run.error = OptionalText(row["error"]);
  run.parent_run_id = OptionalText(row["parent_run_id"]);
  run.cancel_reason = OptionalText(row["cancel_reason"]);
  run.compensations = JsonField(row["compensations"]);
  if (!row["final_status"].is_null()) {
    run.final_status = ParseRunStatus(row["final_status"].c_str());
  }
  run.parent_wait_key = OptionalText(row["parent_wait_key"]);
  run.child_options.cancel_when_parent_fails = row["cancel_when_parent_fails"].as<bool>();
  run.child_options.cancel_when_first_done = row["cancel_when_first_done"].as<bool>();
  run.deadline_at = OptionalText(row["deadline_at"]);
  run.created_at = row["created_at"].c_str();
  run.updated_at = row["updated_at"].c_str();
  run.finished_at = OptionalText(row["finished_at"]);
  return run;
}

RunForExecution DecodeRunForExecution(const pqxx::row& row) {
  RunForExecution out{DecodeRun(row), std::nullopt, row["past_deadline"].as<bool>()};
  if (!row["resume_key"].is_null()) {
    Resume resume;
    resume.correlation_key = row["resume_key"].c_str();
    resume.event = row["resume_event"].c_str();
    resume.payload = JsonField(row["resume_payload"]);
    resume.claimant = OptionalText(row["resume_claimant"]).value_or("");
    out.resume = std::move(resume);
  }
  return out;
}

ClaimedNextRun TakeClaimedNextRun(Tx::Impl& tx, const pqxx::row& row) {
  ClaimedNextRun claimed;
  claimed.run_id = row["id"].c_str();
  claimed.step_tokens = row["step_tokens"].as<bool>();
  // The lock first: the session holds it now, whatever decoding throws.
  claimed.opened.locked = row["locked"].as<bool>();
  if (claimed.opened.locked) ++tx.session.stack_holds[claimed.run_id];
  try {
    claimed.opened.run = DecodeRunForExecution(row);
  } catch (const std::exception& e) {
    // The claim may have committed already: the run is left to its lease,
    // whose expiries the crash limit counts, as a claim of the poller's is.
    spdlog::error("run {}: claimed, but its row cannot be read ({}); left to its lease",
                  claimed.run_id, e.what());
  }
  return claimed;
}

RunEvent DecodeEvent(const pqxx::row& row) {
  RunEvent event;
  event.position = row["position"].as<int64_t>();
  event.run_id = row["run_id"].c_str();
  event.step = OptionalText(row["step"]);
  event.attempt = row["attempt"].as<int>();
  event.kind = row["kind"].c_str();
  event.field = OptionalText(row["field"]);
  event.value = OptionalJson(row["value"]);
  event.created_at = row["created_at"].c_str();
  return event;
}

WaitRecord DecodeWait(const pqxx::row& row) {
  WaitRecord wait;
  wait.correlation_key = row["correlation_key"].c_str();
  wait.run_id = row["run_id"].c_str();
  wait.event = row["event"].c_str();
  wait.continuation_step = row["continuation_step"].c_str();
  wait.timeout_step = OptionalText(row["timeout_step"]);
  if (!row["children"].is_null()) wait.children = ParseChildWait(row["children"].c_str());
  wait.status = ParseWaitStatus(row["status"].c_str());
  wait.payload = OptionalJson(row["payload"]);
  wait.claimant = OptionalText(row["claimant"]);
  wait.expires_at = OptionalText(row["expires_at"]);
  wait.expired = row["expired"].as<bool>();
  wait.created_at = row["created_at"].c_str();
  wait.claimed_at = OptionalText(row["claimed_at"]);
  wait.resumed_at = OptionalText(row["resumed_at"]);
  return wait;
}

}  // namespace cairn::store
