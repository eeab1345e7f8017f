# Runs COMMAND (a ;-list) and passes when it exits with EXPECTED_CODE within
# MAX_SECONDS, its output matches the regex EXPECTED_OUTPUT and does not
# match the regex FORBIDDEN_OUTPUT: a job where one rank aborted must end,
# with that rank's code, promptly, by the intended path.
#
#   cmake -DCOMMAND=... -DEXPECTED_CODE=3 -DMAX_SECONDS=20
#         -DEXPECTED_OUTPUT=... -DFORBIDDEN_OUTPUT=... -P ExpectAbort.cmake
string(TIMESTAMP start "%s")
execute_process(
  COMMAND ${COMMAND}
  RESULT_VARIABLE code
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out
  TIMEOUT ${MAX_SECONDS})
string(TIMESTAMP end "%s")
math(EXPR seconds "${end} - ${start}")
message("${out}")
message("exit: ${code} after ${seconds} s")
if(NOT code STREQUAL "${EXPECTED_CODE}")
  message(FATAL_ERROR "expected exit code ${EXPECTED_CODE}, got '${code}'")
endif()
if(NOT out MATCHES "${EXPECTED_OUTPUT}")
  message(FATAL_ERROR "output does not match '${EXPECTED_OUTPUT}'")
endif()
if(FORBIDDEN_OUTPUT AND out MATCHES "${FORBIDDEN_OUTPUT}")
  message(FATAL_ERROR "output matches '${FORBIDDEN_OUTPUT}'")
endif()
