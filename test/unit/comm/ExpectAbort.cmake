# Runs COMMAND (a ;-list) and passes when it exits with EXPECTED_CODE within
# MAX_SECONDS, its output matches the regex EXPECTED_OUTPUT and does not
# match the regex FORBIDDEN_OUTPUT: a job where one rank aborted must end,
# with that rank's code, promptly, by the intended path.
#
# With NO_PROCESS_LEFT (a pgrep -f pattern), no process may match it 5 s
# after the job ended (a rank that was stopped must be gone too).
#
#   cmake -DCOMMAND=... -DEXPECTED_CODE=3 -DMAX_SECONDS=20
#         -DEXPECTED_OUTPUT=... -DFORBIDDEN_OUTPUT=... [-DNO_PROCESS_LEFT=...]
#         -P ExpectAbort.cmake
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
if(NO_PROCESS_LEFT)
  foreach(attempt RANGE 50)
    execute_process(COMMAND pgrep -f "${NO_PROCESS_LEFT}"
      RESULT_VARIABLE found OUTPUT_VARIABLE pids OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT found EQUAL 0)
      break()
    endif()
    execute_process(COMMAND sleep 0.1)
  endforeach()
  if(found EQUAL 0)
    string(REPLACE "\n" ";" pids "${pids}")
    execute_process(COMMAND kill -9 ${pids})
    message(FATAL_ERROR "processes left behind: ${pids}")
  endif()
endif()
