# Runs the real ratekeeper binary as a user would: -DRK=<binary> -DDATA=<tests/testdata>.

execute_process(COMMAND ${RK} replay --algorithm earrrl --limit 0.5 --half-life 10s
  INPUT_FILE ${DATA}/seed-one-per-second.trace
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "replay failed (${code}): ${err}")
endif()
string(REGEX MATCHALL "\n" rows "${out}")
list(LENGTH rows n)
if(NOT n EQUAL 74)
  message(FATAL_ERROR "expected a header and 73 rows, got ${n} lines:\n${out}")
endif()
if(NOT out MATCHES "\n10,user_id_123,1,[0-9.]+,0,0\\.4828[0-9]*\n11,user_id_123,0,0,[0-9.]+,0\\.5152[0-9]*\n")
  message(FATAL_ERROR "request 11 should be the first refused:\n${out}")
endif()

execute_process(COMMAND ${RK} replay --algorithm earrrl --limit 0.5 --half-life 10s
  INPUT_FILE ${DATA}/malformed.trace
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code)
if(NOT code EQUAL 1 OR NOT err MATCHES "line 3: time 'not-a-time'")
  message(FATAL_ERROR "a malformed line 3 should exit 1 naming the line, got ${code}: ${err}")
endif()

execute_process(COMMAND ${RK} replay --algorithm fixed_window --limit 0 INPUT_FILE ${DATA}/malformed.trace
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code)
if(NOT code EQUAL 2 OR NOT err MATCHES "limit must be a number greater than 0")
  message(FATAL_ERROR "a bad limit should exit 2 naming the limit, got ${code}: ${err}")
endif()

execute_process(COMMAND ${RK} frobnicate OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code)
if(NOT code EQUAL 2)
  message(FATAL_ERROR "an unknown command should exit 2, got ${code}")
endif()

# Every command answers --help with its usage on stdout and exit 0 (serve and check-config only where the server is
# built: their usage then names them in the top-level help).
execute_process(COMMAND ${RK} --help OUTPUT_VARIABLE top RESULT_VARIABLE code)
if(NOT code EQUAL 0 OR NOT top MATCHES "usage: ratekeeper <command>")
  message(FATAL_ERROR "ratekeeper --help should print usage and exit 0, got ${code}: ${top}")
endif()
foreach(command serve check-config replay simulate)
  if(NOT top MATCHES "\n  ${command} ")
    continue()
  endif()
  execute_process(COMMAND ${RK} ${command} --help OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code)
  if(NOT code EQUAL 0 OR NOT out MATCHES "usage: ratekeeper ${command}")
    message(FATAL_ERROR "ratekeeper ${command} --help should print its usage and exit 0, got ${code}: ${out}${err}")
  endif()
endforeach()

# A bad command line is answered with its errors and one line pointing at --help, not with the whole help (some 90
# lines for serve) above which the error scrolls out of sight; and a non-zero exit.
function(expect_refused hint)
  cmake_parse_arguments(ARG "" "" "COMMAND;ERRORS" ${ARGN})
  execute_process(COMMAND ${ARG_COMMAND} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code)
  string(JOIN " " shown ${ARG_COMMAND})
  if(code EQUAL 0 OR NOT out STREQUAL "")
    message(FATAL_ERROR "`${shown}` should fail with nothing on stdout, got ${code}:\n${out}${err}")
  endif()
  set(expected "")
  foreach(e IN LISTS ARG_ERRORS)
    string(APPEND expected "${e}\n")
  endforeach()
  string(APPEND expected "${hint}\n")
  if(NOT err STREQUAL expected)
    message(FATAL_ERROR "`${shown}` should print its errors and one hint line:\n${expected}--- got\n${err}")
  endif()
endfunction()

expect_refused("see 'ratekeeper --help' for the commands" COMMAND ${RK} frobnicate
  ERRORS "ratekeeper: unknown command 'frobnicate'")
expect_refused("see 'ratekeeper replay --help' for the flags" COMMAND ${RK} replay --frobnicate 1
  ERRORS "ratekeeper replay: unknown flag --frobnicate")
if(top MATCHES "\n  simulate ")
  expect_refused("see 'ratekeeper simulate --help' for the flags" COMMAND ${RK} simulate --seed x
    ERRORS "ratekeeper simulate: --seed: 'x' is not a whole number from 0 to 18446744073709551615")
endif()
if(top MATCHES "\n  serve ")
  set(rules ${DATA}/../../examples/rules.yaml)
  expect_refused("see 'ratekeeper serve --help' for the flags" COMMAND ${RK} serve --config ${rules} --frobnicate
    ERRORS "ratekeeper serve: unknown flag --frobnicate")
  expect_refused("see 'ratekeeper serve --help' for the flags"
    COMMAND ${RK} serve --config ${rules} --state-file /rk-nonexistent/x.state
    ERRORS
    "ratekeeper serve: --state-file: the directory of '/rk-nonexistent/x.state' (/rk-nonexistent) does not exist")
  set(settings ${CMAKE_CURRENT_BINARY_DIR}/cli_test_settings.yaml)
  file(WRITE ${settings} "config: ${rules}\nthreads: 0\n")
  expect_refused("see 'ratekeeper serve --help' for the flags" COMMAND ${RK} serve --settings ${settings}
    ERRORS "ratekeeper serve: ${settings}:2:10: threads: '0' is not a whole number from 1 to 64")
  expect_refused("see 'ratekeeper check-config --help' for the flags"
    COMMAND ${RK} check-config --settings ${settings}
    ERRORS "ratekeeper check-config: ${settings}:2:10: threads: '0' is not a whole number from 1 to 64")
  file(REMOVE ${settings})
endif()
