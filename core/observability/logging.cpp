// See logging.hpp.
#include "logging.hpp"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <ctime>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

namespace cairn {

namespace {

thread_local std::optional<RunLogFields> tls_run;

std::string UtcTime(std::chrono::system_clock::time_point t) {
  const auto seconds = std::chrono::floor<std::chrono::seconds>(t);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(t - seconds).count();
  const std::time_t whole = std::chrono::system_clock::to_time_t(seconds);
  std::tm tm{};
  gmtime_r(&whole, &tm);
  char buffer[40];
  const size_t n = std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &tm);
  char fraction[32];
  std::snprintf(fraction, sizeof fraction, ".%06lldZ", static_cast<long long>(micros));
  return std::string(buffer, n) + fraction;
}

std::string_view LevelName(spdlog::level::level_enum level) {
  const auto& name = spdlog::level::to_string_view(level);
  return {name.data(), name.size()};
}

class JsonFormatter final : public spdlog::formatter {
 public:
  explicit JsonFormatter(std::string process) : process_(std::move(process)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    nlohmann::ordered_json line = {
        {"time", UtcTime(msg.time)}, {"level", LevelName(msg.level)}, {"pid", ::getpid()}};
    if (!process_.empty()) line["process"] = process_;
    line["message"] = std::string(msg.payload.data(), msg.payload.size());
    if (tls_run) {
      line["run_id"] = tls_run->run_id;
      line["workflow"] = tls_run->workflow;
      line["step"] = tls_run->step;
      line["attempt"] = tls_run->attempt;
    }
    const std::string text =
        line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    dest.append(text.data(), text.data() + text.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>(process_);
  }

 private:
  std::string process_;
};

class TextFormatter final : public spdlog::formatter {
 public:
  explicit TextFormatter(std::string process) : process_(std::move(process)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string text = UtcTime(msg.time) + " " + std::string(LevelName(msg.level)) + " [" +
                       std::to_string(::getpid()) + (process_.empty() ? "" : " " + process_) +
                       "] " + logging::EscapeControl({msg.payload.data(), msg.payload.size()}) +
                       "\n";
    dest.append(text.data(), text.data() + text.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<TextFormatter>(process_);
  }

 private:
  std::string process_;
};

// Passes every line on, but a warning or error identical to one written
// within the window is counted instead; the next one after the window says
// how many were held back.
class RateLimitedSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  RateLimitedSink(spdlog::sink_ptr inner, std::chrono::seconds window)
      : inner_(std::move(inner)), window_(window) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (msg.level < spdlog::level::warn) {
      inner_->log(msg);
      return;
    }
    const std::string key(msg.payload.data(), msg.payload.size());
    const auto now = std::chrono::steady_clock::now();
    auto [it, fresh] = seen_.try_emplace(key, Seen{now, 0});
    if (!fresh && now - it->second.since < window_) {
      ++it->second.held_back;
      return;
    }
    if (fresh || it->second.held_back == 0) {
      inner_->log(msg);
    } else {
      const std::string counted = key + " (and " + std::to_string(it->second.held_back) +
                                  " more identical lines in the last " +
                                  std::to_string(window_.count()) + "s)";
      spdlog::details::log_msg copy(msg.time, msg.source, msg.logger_name, msg.level, counted);
      inner_->log(copy);
    }
    it->second = Seen{now, 0};
    if (seen_.size() > kMaxKeys) Forget(now);
  }

  void flush_() override { inner_->flush(); }
  void set_pattern_(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter_(std::unique_ptr<spdlog::formatter> formatter) override {
    inner_->set_formatter(std::move(formatter));
  }

 private:
  static constexpr size_t kMaxKeys = 1024;
  struct Seen {
    std::chrono::steady_clock::time_point since;
    int64_t held_back = 0;
  };

  // Keeps memory bounded: drops keys whose window is over.
  void Forget(std::chrono::steady_clock::time_point now) {
    for (auto it = seen_.begin(); it != seen_.end();) {
      it = now - it->second.since >= window_ ? seen_.erase(it) : std::next(it);
    }
    if (seen_.size() > kMaxKeys) seen_.clear();
  }

  spdlog::sink_ptr inner_;
  std::chrono::seconds window_;
  std::map<std::string, Seen> seen_;
};

}  // namespace

namespace logging {

std::unique_ptr<spdlog::formatter> MakeFormatter(const std::string& format,
                                                 const std::string& process) {
  if (format == "json") return std::make_unique<JsonFormatter>(process);
  return std::make_unique<TextFormatter>(process);
}

spdlog::sink_ptr MakeRateLimitedSink(spdlog::sink_ptr inner, std::chrono::seconds window) {
  return std::make_shared<RateLimitedSink>(std::move(inner), window);
}

std::string EscapeControl(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", byte);
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace logging

void SetUpLogging(const LogSettings& settings) {
  auto sink = logging::MakeRateLimitedSink(std::make_shared<spdlog::sinks::stderr_sink_mt>(),
                                           settings.repeat_window);
  sink->set_formatter(logging::MakeFormatter(settings.format, settings.process));
  auto logger = std::make_shared<spdlog::logger>("cairn", std::move(sink));
  spdlog::set_default_logger(std::move(logger));
  SetLogLevel(settings.level);
}

void SetLogLevel(const std::string& level) { spdlog::set_level(spdlog::level::from_str(level)); }

ScopedRunLog::ScopedRunLog(RunLogFields fields) : previous_(std::move(tls_run)) {
  tls_run = std::move(fields);
}

ScopedRunLog::~ScopedRunLog() { tls_run = std::move(previous_); }

}  // namespace cairn
