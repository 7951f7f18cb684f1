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
