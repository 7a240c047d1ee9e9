// A plain HTTP/1.1 client against a listener on 127.0.0.1 (the daemon's
// health and metrics, the console), for tests that check what is served.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cairn::test {

struct HttpResult {
  int status = 0;  // 0: no connection or no answer
  std::string body;
  std::string headers;  // the status line and header lines, as received

  // The value of the first header with this name (case-insensitive), "" if none.
  std::string Header(const std::string& name) const;
};

// GET path on 127.0.0.1:port, waiting at most 5 s for the answer.
HttpResult HttpGet(uint16_t port, const std::string& path);

// Any method with extra header lines ("Cookie: a=b") and a body (sent with
// its Content-Length), waiting at most 5 s for the answer.
HttpResult HttpSend(uint16_t port, const std::string& method, const std::string& path,
                    const std::vector<std::string>& headers = {}, const std::string& body = "");

}  // namespace cairn::test
