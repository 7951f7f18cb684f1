# Installs tests/integration/package-lock.json's packages (playwright-core, statsd) into DIR, once: skipped while DIR
# holds the same lock file and the packages, so reruns need no network. Run by ctest as the fixture of
# integration.ui and integration.statsd:
#   cmake -DNPM=/usr/bin/npm -DSRC=tests/integration -DDIR=build/dev/tests/ui-node -P npm_ci.cmake
foreach(var NPM SRC DIR)
  if(NOT ${var})
    message(FATAL_ERROR "npm_ci.cmake: -D${var}= is required")
  endif()
endforeach()

file(READ ${SRC}/package-lock.json wanted)
if(EXISTS ${DIR}/package-lock.json AND EXISTS ${DIR}/node_modules/playwright-core/package.json
   AND EXISTS ${DIR}/node_modules/statsd/package.json)
  file(READ ${DIR}/package-lock.json have)
  if(have STREQUAL wanted)
    message(STATUS "playwright-core and statsd already installed in ${DIR}")
    return()
  endif()
endif()

file(MAKE_DIRECTORY ${DIR})
file(COPY ${SRC}/package.json ${SRC}/package-lock.json DESTINATION ${DIR})
# --prefer-offline: a package in npm's cache is taken from there; --ignore-scripts: nothing runs at install.
execute_process(COMMAND ${NPM} ci --no-audit --no-fund --prefer-offline --ignore-scripts
                WORKING_DIRECTORY ${DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "npm ci in ${DIR} failed (${rc}): the packages could not be installed")
endif()
