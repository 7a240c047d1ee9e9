# Writes the manual page cairn(1): `cairn help --man` into OUTPUT. Run as a
# build step with -DCAIRN=<the cairn binary> -DOUTPUT=<file>.
execute_process(COMMAND "${CAIRN}" help --man OUTPUT_FILE "${OUTPUT}.tmp" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE "${OUTPUT}.tmp")
  message(FATAL_ERROR "${CAIRN} help --man failed (${rc})")
endif()
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
