// See periodic_service.hpp.
#include "periodic_service.hpp"

#include <spdlog/spdlog.h>

namespace cairn {

int64_t ServiceReport::Count(const std::string& what) const {
  for (const auto& [name, count] : counts) {
    if (name == what) return count;
  }
  return 0;
}

std::string ServiceReport::Text() const {
  if (counts.empty()) return "nothing";
  std::string text;
  for (const auto& [name, count] : counts) {
    if (!text.empty()) text += ", ";
    text += std::to_string(count) + " " + name;
  }
  return text;
}

PeriodicService::PeriodicService(PeriodicServiceOptions options) : options_(std::move(options)) {
  options_.connection.application_name = "cairn " + options_.name;
}

PeriodicService::~PeriodicService() { Stop(); }

store::Connection& PeriodicService::Connection() {
  if (connection_ && !connection_->IsOpen()) EndSession();
  if (!connection_) connection_ = std::make_unique<store::Connection>(options_.connection);
  return *connection_;
}

void PeriodicService::EndSession() {
  if (!connection_) return;
  SessionEnding(*connection_);
  connection_.reset();
}

ServiceReport PeriodicService::RunOnce() {
  return WithConnection([&](store::Connection& connection) { return Pass(connection); });
}

void PeriodicService::Start() {
  std::lock_guard lock(thread_mutex_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void PeriodicService::Stop() {
  std::thread thread;
  {
    std::lock_guard lock(thread_mutex_);
    stop_ = true;
    thread = std::move(thread_);
  }
  if (thread.joinable()) {
    stop_cv_.notify_all();
    thread.join();
  }
  std::lock_guard lock(mutex_);
  EndSession();
}

void PeriodicService::Loop() {
  bool failing = false;
  while (true) {
    try {
      const ServiceReport report = RunOnce();
      if (options_.on_report) options_.on_report(report);
      if (failing) spdlog::info("{}: database reachable again", options_.name);
      failing = false;
    } catch (const std::exception& e) {
      // One line per outage, not one per interval.
      if (!failing) {
        spdlog::warn("{}: {} (retrying every {} ms)", options_.name, e.what(),
                     options_.interval.count());
      }
      failing = true;
    }
    std::unique_lock lock(thread_mutex_);
    if (stop_cv_.wait_for(lock, options_.interval, [&] { return stop_; })) return;
  }
}

}  // namespace cairn
