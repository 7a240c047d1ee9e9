# Script mode helper for Boundaries.cmake: fails when a source includes a
# header that only another room may include. Each rule: the include pattern,
# then the folders (relative to the source root) where it is allowed.
string(REPLACE "|" ";" SOURCES "${SOURCES}")
set(rules
  "#include <pqxx/|core/store/"
  "#include \"store_internal.hpp\"|core/store/"
  "#include <dlfcn.h>|core/plugins/"
  "#include \"step_context.hpp\"|core/plugins/"
  "#include <yaml-cpp/|core/definitions/,core/config/,tests/")
set(problems "")
foreach(source IN LISTS SOURCES)
  file(RELATIVE_PATH relative ${ROOT} ${source})
  file(STRINGS ${source} includes REGEX "^[ \t]*#[ \t]*include")
  foreach(rule IN LISTS rules)
    string(REPLACE "|" ";" parts "${rule}")
    list(GET parts 0 pattern)
    list(GET parts 1 allowed)
    string(REPLACE "," ";" allowed "${allowed}")
    set(permitted FALSE)
    foreach(folder IN LISTS allowed)
      string(FIND "${relative}" "${folder}" at)
      if(at EQUAL 0)
        set(permitted TRUE)
      endif()
    endforeach()
    if(permitted)
      continue()
    endif()
    foreach(line IN LISTS includes)
      string(STRIP "${line}" line)
      string(FIND "${line}" "${pattern}" hit)
      if(hit EQUAL 0)
        string(APPEND problems "  ${relative}: '${line}' is allowed only under ${allowed}\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(problems)
  message(FATAL_ERROR "room boundaries crossed:\n${problems}")
endif()
file(TOUCH ${STAMP})
