// The console's static files (daemon/console_assets/), embedded at build
// time by cmake/EmbedAssets.cmake. Immutable after start: thread-safe.
#pragma once

#include <string_view>
#include <vector>

namespace cairn::console {

struct Asset {
  std::string_view name;  // file name, e.g. "console.css"
  std::string_view text;
};

const std::vector<Asset>& Assets();

}  // namespace cairn::console
