// See idempotency_session.hpp.
#include "idempotency_session.hpp"

#include <utility>

namespace cairn {

template <class F>
auto IdempotencySession::Transact(F&& fn) {
  std::lock_guard lock(mutex_);
  try {
    if (!connection_ || !connection_->IsOpen()) {
      connection_.reset();
      connection_ = std::make_unique<store::Connection>(options_);
    }
    return connection_->Transact(std::forward<F>(fn));
  } catch (const Error& e) {
    // A session that failed may be broken: the next call starts afresh.
    if (e.kind() == ErrorKind::kTransient || e.kind() == ErrorKind::kInDoubt) connection_.reset();
    throw;
  }
}

class IdempotencySession::Gateway final : public StepIdempotency {
 public:
  Gateway(std::shared_ptr<IdempotencySession> session, std::string namespace_name,
          std::string owner)
      : session_(std::move(session)),
        namespace_(std::move(namespace_name)),
        owner_(std::move(owner)) {}

  IdempotencyClaim Claim(const std::string& key, std::chrono::milliseconds lease) override {
    return session_->Transact([&](store::Tx& tx) {
      return store::ClaimIdempotencyKey(tx, namespace_, key, owner_, lease);
    });
  }

  bool Complete(const std::string& key, const Json& result,
                std::chrono::milliseconds ttl) override {
    return session_->Transact([&](store::Tx& tx) {
      return store::CompleteIdempotencyKey(tx, namespace_, key, owner_, result, ttl);
    });
  }

  bool Fail(const std::string& key, const std::string& error) override {
    return session_->Transact([&](store::Tx& tx) {
      return store::FailIdempotencyKey(tx, namespace_, key, owner_, error);
    });
  }

 private:
  std::shared_ptr<IdempotencySession> session_;
  std::string namespace_;
  std::string owner_;
};

IdempotencySession::IdempotencySession(store::ConnectionOptions options)
    : options_(std::move(options)) {}

std::shared_ptr<StepIdempotency> IdempotencySession::ForRun(const std::string& namespace_name,
                                                            const std::string& run_id) {
  return std::make_shared<Gateway>(shared_from_this(), namespace_name, OwnerOf(run_id));
}

}  // namespace cairn
