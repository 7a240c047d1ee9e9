# Embeds sql/migrations/*.sql and the *.sql of each QUERIES_DIR (sql/queries,
# sql/bench) into one generated C++ source, so the binary carries its SQL and
# logs can name every query. Queries are named by file stem, unique across
# the folders; migrations keep their file name, whose leading number is the
# schema version. A query may include another one's text with {query:NAME}
# (GenerateSql.cmake).
function(cairn_embed_sql)
  cmake_parse_arguments(ARG "" "OUTPUT;MIGRATIONS_DIR" "QUERIES_DIR" ${ARGN})
  file(GLOB migrations CONFIGURE_DEPENDS ${ARG_MIGRATIONS_DIR}/*.sql)
  set(queries)
  set(names)
  foreach(dir IN LISTS ARG_QUERIES_DIR)
    file(GLOB found CONFIGURE_DEPENDS ${dir}/*.sql)
    foreach(path IN LISTS found)
      get_filename_component(name ${path} NAME_WE)
      if(name IN_LIST names)
        message(FATAL_ERROR "two embedded queries are named ${name}: ${path} and another")
      endif()
      list(APPEND names ${name})
    endforeach()
    list(APPEND queries ${found})
  endforeach()
  list(SORT migrations)
  list(SORT queries)
  # Lists travel to the script joined by "|" so no shell splits them.
  string(REPLACE ";" "|" migration_list "${migrations}")
  string(REPLACE ";" "|" query_list "${queries}")
  add_custom_command(
    OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND}
      -DOUTPUT=${ARG_OUTPUT}
      "-DMIGRATIONS=${migration_list}"
      "-DQUERIES=${query_list}"
      -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/GenerateSql.cmake
    DEPENDS ${migrations} ${queries} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/GenerateSql.cmake
    COMMENT "Embedding SQL"
    VERBATIM)
  set(CAIRN_SQL_SOURCE ${ARG_OUTPUT} PARENT_SCOPE)
endfunction()
