# cairn_add_plugin(): how a cairn plugin is built, the same in cairn's tree
# and out of it (installed with cairn's CMake package: find_package(cairn)).
# Needs the target cairn::sdk (the plugin ABI and the C++ SDK headers).
include_guard(GLOBAL)

# cairn_add_plugin(<target> [NAME <file name without .so>] SOURCES <files...>)
#
# Builds <target> as a MODULE that cairn can dlopen: <NAME>.so (default: the
# target's name) without a "lib" prefix; every symbol hidden but the plugin's
# entry point (so libraries bundled into the plugin never clash with cairn's
# or another plugin's); and linked with --no-undefined, so a symbol the
# plugin lacks fails the link instead of the dlopen.
function(cairn_add_plugin target)
  cmake_parse_arguments(arg "" "NAME" "SOURCES" ${ARGN})
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "cairn_add_plugin(${target}): no SOURCES")
  endif()
  if(NOT arg_NAME)
    set(arg_NAME ${target})
  endif()
  add_library(${target} MODULE ${arg_SOURCES})
  target_link_libraries(${target} PRIVATE cairn::sdk)
  # Not in a clang sanitizer build (cmake/Sanitizers.cmake): there the
  # sanitizer runtime lives in the executable that loads the plugin.
  if(NOT CAIRN_PLUGIN_ALLOW_UNDEFINED)
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    SUFFIX ".so"
    OUTPUT_NAME ${arg_NAME}
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
endfunction()
