// Errors that cross the store boundary. The store translates every libpqxx
// exception into one of these, by SQLSTATE, in core/store/store.cpp alone; the
// engine decides what to do from the kind, never from a message.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace cairn {

enum class ErrorKind {
  kTransient,        // retry the whole operation with backoff
  kInDoubt,          // COMMIT outcome unknown: read the state back, never retry blindly
  kPermanent,        // a bug, a constraint or bad input: retrying will not help
  kInvalidArgument,  // bad input caught before any SQL ran
  kNotFound,
  kConflict,  // OCC version mismatch or a lost compare-and-swap
};

const char* ToString(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }
  bool transient() const { return kind_ == ErrorKind::kTransient; }

 private:
  ErrorKind kind_;
};

// A database error: what the store was doing and what PostgreSQL said.
class DatabaseError : public Error {
 public:
  DatabaseError(ErrorKind kind, std::string operation, std::string sqlstate,
                const std::string& message)
      : Error(kind, operation + ": " + message + (sqlstate.empty() ? "" : " [" + sqlstate + "]")),
        operation_(std::move(operation)),
        sqlstate_(std::move(sqlstate)) {}
  const std::string& operation() const { return operation_; }
  const std::string& sqlstate() const { return sqlstate_; }

 private:
  std::string operation_;
  std::string sqlstate_;
};

// A checkpoint was written against a version that is no longer current: some
// other writer (or a takeover after a lost lease) got there first.
class OccConflictError : public Error {
 public:
  OccConflictError(std::string run_id, int64_t expected, int64_t current)
      : Error(ErrorKind::kConflict, "run " + run_id + ": checkpoint expected version " +
                                        std::to_string(expected) + " but the current version is " +
                                        std::to_string(current)),
        run_id_(std::move(run_id)),
        expected_(expected),
        current_(current) {}
  const std::string& run_id() const { return run_id_; }
  int64_t expected() const { return expected_; }
  int64_t current() const { return current_; }

 private:
  std::string run_id_;
  int64_t expected_;
  int64_t current_;
};

class NotFoundError : public Error {
 public:
  explicit NotFoundError(const std::string& message) : Error(ErrorKind::kNotFound, message) {}
};

class InvalidArgumentError : public Error {
 public:
  explicit InvalidArgumentError(const std::string& message)
      : Error(ErrorKind::kInvalidArgument, message) {}
};

// Another session holds the stack lock of this run.
class LockUnavailableError : public Error {
 public:
  explicit LockUnavailableError(const std::string& run_id)
      : Error(ErrorKind::kConflict,
              "stack lock unavailable: run " + run_id + " is held by another session"),
        run_id_(run_id) {}
  const std::string& run_id() const { return run_id_; }

 private:
  std::string run_id_;
};

class WaitExpiredError : public Error {
 public:
  explicit WaitExpiredError(const std::string& key)
      : Error(ErrorKind::kConflict, "wait record " + key + " has expired"), key_(key) {}
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

class WaitAlreadyClaimedError : public Error {
 public:
  WaitAlreadyClaimedError(const std::string& key, const std::string& status)
      : Error(ErrorKind::kConflict,
              "wait record " + key + " was already claimed (status " + status + ")"),
        key_(key),
        status_(status) {}
  const std::string& key() const { return key_; }
  const std::string& status() const { return status_; }

 private:
  std::string key_;
  std::string status_;
};

}  // namespace cairn
