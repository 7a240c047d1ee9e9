// A real `cairn console` of the built binary for tests: on the test's schema,
// on a free port of 127.0.0.1, read-only or with an access token in a file
// of its own. Only for test sources (it needs the build paths).
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon_process.hpp"
#include "http_get.hpp"
#include "pg_harness.hpp"

namespace cairn::test {

class ConsoleProcess {
 public:
  // token: absent for a read-only console.
  ConsoleProcess(const std::string& url, const std::string& schema,
                 const std::optional<std::string>& token)
      : port_(static_cast<uint16_t>(FindFreePort())) {
    DaemonOptions options;
    options.binary = CairnBinary();
    options.command = {
        "console",  "--listen", "127.0.0.1:" + std::to_string(port_), "--database-url", url,
        "--schema", schema};
    if (token) {
      const std::string file = dir_.Write("console-token", *token + "\n");
      ::chmod(file.c_str(), 0600);
      options.command.push_back("--token-file");
      options.command.push_back(file);
    }
    process_ = std::make_unique<DaemonProcess>(options);
    process_->Start();
  }

  // True once it serves; false (its log says why) when it exited first.
  bool WaitServing() {
    return process_->WaitForLog("cairn console: serving http://", std::chrono::seconds(20));
  }

  uint16_t port() const { return port_; }
  std::string Base() const { return "http://127.0.0.1:" + std::to_string(port_); }
  DaemonProcess& process() { return *process_; }

  HttpResult Get(const std::string& path, const std::vector<std::string>& headers = {}) const {
    return HttpSend(port_, "GET", path, headers);
  }
  HttpResult Post(const std::string& path, const std::string& body,
                  const std::vector<std::string>& headers = {}) const {
    return HttpSend(port_, "POST", path, headers, body);
  }

 private:
  TempDir dir_{"cairn-console"};
  uint16_t port_;
  std::unique_ptr<DaemonProcess> process_;
};

}  // namespace cairn::test
