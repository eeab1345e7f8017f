# The libFuzzer targets (test/fuzz) need clang: Debian's clang-19 and its
# fuzzer runtime (libclang-rt-19-dev, installed by scripts/setup.sh). The
# main build may use any compiler, so the fuzzers are a sub-build of this
# same source tree in build/fuzz, configured with clang-19 and
# SHARD_FUZZ_INSTRUMENTED=ON (every library compiled with
# -fsanitize=fuzzer-no-link,address), building only the fuzz executables.
#
# SHARD_FUZZERS: AUTO (build them when clang-19 can link a fuzzer), ON (the
# same, an error when it cannot) or OFF.

set(SHARD_FUZZERS AUTO CACHE STRING "Build the libFuzzer targets (AUTO|ON|OFF)")
set_property(CACHE SHARD_FUZZERS PROPERTY STRINGS AUTO ON OFF)
set(SHARD_FUZZERS_ENABLED OFF)
if(SHARD_FUZZERS STREQUAL "OFF")
  return()
endif()

find_program(SHARD_FUZZ_CXX NAMES clang++-19
  HINTS /usr/lib/llvm-19/bin DOC "clang++ for the fuzz sub-build")
find_program(SHARD_FUZZ_CC NAMES clang-19
  HINTS /usr/lib/llvm-19/bin DOC "clang for the fuzz sub-build")
set(why "")
if(NOT SHARD_FUZZ_CXX OR NOT SHARD_FUZZ_CC)
  set(why "clang-19 not found")
else()
  # Can it link a fuzzer? (The runtime is a separate Debian package.)
  set(probe_dir ${CMAKE_BINARY_DIR}/CMakeFiles/shard-fuzz-probe)
  file(WRITE ${probe_dir}/probe.cpp
    "#include <cstddef>\n#include <cstdint>\n"
    "extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t *, size_t) "
    "{ return 0; }\n")
  execute_process(
    COMMAND ${SHARD_FUZZ_CXX} -fsanitize=fuzzer,address
            ${probe_dir}/probe.cpp -o ${probe_dir}/probe
    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    set(why "${SHARD_FUZZ_CXX} cannot link a fuzzer (install libclang-rt-19-dev): ${err}")
  endif()
endif()
if(why)
  if(SHARD_FUZZERS STREQUAL "ON")
    message(FATAL_ERROR "SHARD_FUZZERS=ON: ${why}")
  endif()
  message(STATUS "Fuzzers: not built (${why})")
  return()
endif()

set(SHARD_FUZZERS_ENABLED ON)
set(SHARD_FUZZ_BINARY_DIR ${CMAKE_BINARY_DIR}/fuzz)
message(STATUS "Fuzzers: built with ${SHARD_FUZZ_CXX} in ${SHARD_FUZZ_BINARY_DIR}")

set(launcher_args)
if(CMAKE_CXX_COMPILER_LAUNCHER)
  list(APPEND launcher_args
    -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
    -DCMAKE_C_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER})
endif()
set(SHARD_FUZZ_BUILD_JOBS 2 CACHE STRING
  "Parallel jobs of the fuzz sub-build (it runs beside the main build's)")
include(ExternalProject)
ExternalProject_Add(shard-fuzzers
  SOURCE_DIR ${SHARD_SOURCE_DIR}
  BINARY_DIR ${SHARD_FUZZ_BINARY_DIR}
  CMAKE_GENERATOR Ninja
  CMAKE_ARGS
    -DCMAKE_CXX_COMPILER=${SHARD_FUZZ_CXX}
    -DCMAKE_C_COMPILER=${SHARD_FUZZ_CC}
    -DCMAKE_BUILD_TYPE=RelWithDebInfo
    -DSHARD_FUZZ_INSTRUMENTED=ON
    -DSHARD_BUILD_TESTS=OFF
    -DPython3_EXECUTABLE=${Python3_EXECUTABLE}
    ${launcher_args}
  BUILD_COMMAND ${CMAKE_COMMAND} --build <BINARY_DIR>
    -j ${SHARD_FUZZ_BUILD_JOBS}
    --target shard-fuzz-npy shard-fuzz-plan shard-fuzz-import
  BUILD_ALWAYS ON
  INSTALL_COMMAND ""
  BUILD_BYPRODUCTS
    ${SHARD_FUZZ_BINARY_DIR}/bin/shard-fuzz-npy
    ${SHARD_FUZZ_BINARY_DIR}/bin/shard-fuzz-plan
    ${SHARD_FUZZ_BINARY_DIR}/bin/shard-fuzz-import)
