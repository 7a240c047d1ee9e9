# The boundaries between cairn's rooms that target dependencies alone cannot
# enforce, checked on every build:
#  - at configure time, no target but cairn_store links libpqxx;
#  - at build time, no source outside a room includes what only that room may
#    (libpqxx and the store's internals, dlopen, yaml-cpp), because those
#    headers sit in /usr/include where every target can reach them.
# Included at the end of the top-level CMakeLists.txt, when every target exists.

function(cairn_collect_targets dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    cairn_collect_targets(${subdir} sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

cairn_collect_targets(${PROJECT_SOURCE_DIR} cairn_all_targets)

set(cairn_checked_sources "")
foreach(target IN LISTS cairn_all_targets)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY" OR type STREQUAL "UTILITY")
    continue()
  endif()
  get_target_property(links ${target} LINK_LIBRARIES)
  get_target_property(interface_links ${target} INTERFACE_LINK_LIBRARIES)
  foreach(link IN LISTS links interface_links)
    if(link MATCHES "PQXX|pqxx" AND NOT target STREQUAL "cairn_store")
      message(FATAL_ERROR "${target} links ${link}: only cairn_store (core/store) may link "
                          "libpqxx; reach the database through the store's functions")
    endif()
  endforeach()
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  foreach(source IN LISTS sources)
    if(NOT IS_ABSOLUTE ${source})
      set(source ${source_dir}/${source})
    endif()
    # Generated sources (the embedded SQL) live in the build folder.
    string(FIND "${source}" "${CMAKE_BINARY_DIR}/" generated)
    if(source MATCHES "\\.(cpp|hpp|c|h)$" AND NOT generated EQUAL 0)
      list(APPEND cairn_checked_sources ${source})
    endif()
  endforeach()
endforeach()
list(REMOVE_DUPLICATES cairn_checked_sources)
list(SORT cairn_checked_sources)

set(cairn_boundary_stamp ${CMAKE_BINARY_DIR}/boundaries.stamp)
string(REPLACE ";" "|" cairn_checked_list "${cairn_checked_sources}")
add_custom_command(
  OUTPUT ${cairn_boundary_stamp}
  COMMAND ${CMAKE_COMMAND}
    -DROOT=${PROJECT_SOURCE_DIR}
    "-DSOURCES=${cairn_checked_list}"
    -DSTAMP=${cairn_boundary_stamp}
    -P ${PROJECT_SOURCE_DIR}/cmake/CheckBoundaries.cmake
  DEPENDS ${cairn_checked_sources} ${PROJECT_SOURCE_DIR}/cmake/CheckBoundaries.cmake
  COMMENT "Checking room boundaries"
  VERBATIM)
add_custom_target(cairn_boundaries DEPENDS ${cairn_boundary_stamp})
foreach(target IN LISTS cairn_all_targets)
  get_target_property(type ${target} TYPE)
  if(NOT type STREQUAL "INTERFACE_LIBRARY" AND NOT type STREQUAL "UTILITY")
    add_dependencies(${target} cairn_boundaries)
  endif()
endforeach()
