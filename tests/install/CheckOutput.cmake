# Runs a program and checks its exit code, its whole stdout and (optionally) its stderr; ctest's
# PASS_REGULAR_EXPRESSION would only look for a match anywhere and ignore the exit code.
#
#   cmake -DEXPECTED_EXIT=<code> [-DEXPECTED_STDOUT_FILE=<file>] [-DEXPECTED_STDERR_REGEX=<regex>]
#         -P CheckOutput.cmake -- <program> [<argument>...]
#
# Without EXPECTED_STDOUT_FILE, stdout must be empty.
cmake_minimum_required(VERSION 3.25)

if(NOT DEFINED EXPECTED_EXIT)
  message(FATAL_ERROR "EXPECTED_EXIT is not set")
endif()

# The command is everything after "--" (arguments before it belong to cmake itself).
set(command)
set(seen_separator FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(seen_separator)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(seen_separator TRUE)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "no command given after --")
endif()

execute_process(COMMAND ${command}
  RESULT_VARIABLE exit_code
  OUTPUT_VARIABLE stdout
  ERROR_VARIABLE stderr
  TIMEOUT 60)

set(expected_stdout "")
if(DEFINED EXPECTED_STDOUT_FILE)
  file(READ "${EXPECTED_STDOUT_FILE}" expected_stdout)
endif()

set(problems)
if(NOT exit_code STREQUAL "${EXPECTED_EXIT}")
  list(APPEND problems "exit code: expected ${EXPECTED_EXIT}, got '${exit_code}'")
endif()
if(NOT stdout STREQUAL expected_stdout)
  list(APPEND problems "stdout: expected\n[${expected_stdout}]\ngot\n[${stdout}]")
endif()
if(DEFINED EXPECTED_STDERR_REGEX AND NOT stderr MATCHES "${EXPECTED_STDERR_REGEX}")
  list(APPEND problems "stderr does not match '${EXPECTED_STDERR_REGEX}'")
endif()

if(problems)
  list(JOIN problems "\n" report)
  list(JOIN command " " shown)
  message(FATAL_ERROR "${shown}\n${report}\n--- stderr ---\n${stderr}")
endif()
