// A plain HTTP/1.1 GET against a daemon's health or metrics listener on
// 127.0.0.1, for tests that check what the daemon serves.
#pragma once

#include <cstdint>
#include <string>

namespace cairn::test {

struct HttpResult {
  int status = 0;  // 0: no connection or no answer
  std::string body;
};

// GET path on 127.0.0.1:port, waiting at most 5 s for the answer.
HttpResult HttpGet(uint16_t port, const std::string& path);

}  // namespace cairn::test
