# Sanitizer and fuzzing builds, each in a build folder of its own (see
# "Sanitizers" in CONTRIBUTING.md):
#   -DCAIRN_SANITIZE=address  ASan + UBSan (gcc or clang)
#   -DCAIRN_SANITIZE=thread   TSan (gcc or clang)
#   -DCAIRN_FUZZ=ON           the libFuzzer targets of tests/fuzz (clang only),
#                             with ASan + UBSan
# The flags go to every target of the tree, plugins included: a plugin
# dlopen'ed by an instrumented cairn is instrumented too, and with gcc it
# records the shared sanitizer runtime as a dependency (so --no-undefined
# still holds) that the executable has already loaded. Step processes are
# the same binary and inherit ASAN_OPTIONS, UBSAN_OPTIONS and TSAN_OPTIONS.
include_guard(GLOBAL)

set(CAIRN_SANITIZE "" CACHE STRING "sanitizers: empty, address (ASan + UBSan) or thread (TSan)")
set_property(CACHE CAIRN_SANITIZE PROPERTY STRINGS "" address thread)
option(CAIRN_FUZZ "build the libFuzzer targets of tests/fuzz (clang only; implies ASan + UBSan)" OFF)

set(cairn_sanitizer_flags "")
if(CAIRN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "CAIRN_FUZZ=ON needs clang (libFuzzer): configure a build folder of its "
                        "own with -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++")
  endif()
  if(CAIRN_SANITIZE AND NOT CAIRN_SANITIZE STREQUAL "address")
    message(FATAL_ERROR "CAIRN_FUZZ=ON builds with ASan + UBSan; it cannot be combined with "
                        "CAIRN_SANITIZE=${CAIRN_SANITIZE}")
  endif()
  # Coverage instrumentation everywhere; the fuzz executables alone link the
  # libFuzzer driver (-fsanitize=fuzzer, tests/fuzz/CMakeLists.txt).
  set(cairn_sanitizer_flags -fsanitize=fuzzer-no-link,address,undefined
    -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
elseif(CAIRN_SANITIZE STREQUAL "address")
  set(cairn_sanitizer_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer)
elseif(CAIRN_SANITIZE STREQUAL "thread")
  set(cairn_sanitizer_flags -fsanitize=thread -fno-omit-frame-pointer)
elseif(CAIRN_SANITIZE)
  message(FATAL_ERROR "CAIRN_SANITIZE=${CAIRN_SANITIZE}: give address, thread or nothing")
endif()

if(cairn_sanitizer_flags)
  message(STATUS "cairn: sanitizers ${cairn_sanitizer_flags}")
  add_compile_options(${cairn_sanitizer_flags})
  add_link_options(${cairn_sanitizer_flags})
  # clang links its sanitizer runtimes into executables only; a plugin
  # (MODULE) takes the runtime's symbols from the executable that loads it.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set(CAIRN_PLUGIN_ALLOW_UNDEFINED ON)
  endif()
endif()
