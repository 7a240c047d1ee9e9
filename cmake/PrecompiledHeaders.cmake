# Precompiled headers. Most of cairn's translation units parse the same heavy
# headers (nlohmann/json, gtest, libpqxx, spdlog and the standard library):
# parsing them took about 5 s of the 10-19 s each file costs to compile.
# Compiling them once per target, and once for every test binary, roughly
# halves a cold build, which is what keeps CI's address stage inside its budget.
#
# -DCAIRN_PRECOMPILED_HEADERS=OFF compiles every file on its own headers, to
# check that each includes what it uses.
option(CAIRN_PRECOMPILED_HEADERS "compile the heavy headers once per target" ON)

# What every room and test parses: the standard headers most files include,
# and the JSON library the model's headers bring in.
set(CAIRN_COMMON_PRECOMPILED_HEADERS
  <algorithm> <atomic> <chrono> <functional> <map> <memory> <mutex> <optional>
  <set> <string> <string_view> <thread> <utility> <vector>
  <nlohmann/json.hpp>)

# cairn_precompile_headers(<target> [HEADERS <header>...] | REUSE_FROM <target>)
# Precompiles the common headers plus HEADERS (which the target must be able
# to include: only libraries it links), or reuses another target's
# precompiled headers (the same compiler flags; GCC's -Winvalid-pch, which
# CMake adds, reports a header it could not use).
function(cairn_precompile_headers target)
  cmake_parse_arguments(ARG "" "REUSE_FROM" "HEADERS" ${ARGN})
  if(NOT CAIRN_PRECOMPILED_HEADERS)
    return()
  endif()
  if(ARG_REUSE_FROM)
    target_precompile_headers(${target} REUSE_FROM ${ARG_REUSE_FROM})
  else()
    target_precompile_headers(${target} PRIVATE
      ${CAIRN_COMMON_PRECOMPILED_HEADERS} ${ARG_HEADERS})
  endif()
endfunction()
