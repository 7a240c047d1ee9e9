# Embeds the console's static files (HTML fragments, CSS, JS) into one
# generated C++ source, so the binary serves them without files on disk or a
# network (no CDN). Each file is found by its name (console.css).
function(cairn_embed_assets)
  cmake_parse_arguments(ARG "" "OUTPUT" "FILES" ${ARGN})
  string(REPLACE ";" "|" file_list "${ARG_FILES}")
  add_custom_command(
    OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND}
      -DOUTPUT=${ARG_OUTPUT}
      "-DFILES=${file_list}"
      -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/GenerateAssets.cmake
    DEPENDS ${ARG_FILES} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/GenerateAssets.cmake
    COMMENT "Embedding console assets"
    VERBATIM)
endfunction()
