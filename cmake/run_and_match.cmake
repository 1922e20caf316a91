# ctest helper: runs COMMAND (a ;-separated list) and passes only when it exits 0 and its
# standard output matches the regular expression EXPECT. PASS_REGULAR_EXPRESSION alone would
# ignore the exit code.
#   cmake -DCOMMAND="prog;arg1;arg2" -DEXPECT="regex" -P run_and_match.cmake
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "exit status ${status}\n${err}")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match '${EXPECT}'\n${err}")
endif()
