# Fails when a C++ source of Shard is not formatted as .clang-format says.
#   cmake -DCLANG_FORMAT=... -DSOURCE_DIR=... -P check_format.cmake
# Fix with: clang-format -i <the files it names>
set(dirs frontend ir passes plan runtime tools test/unit)
set(files)
foreach(dir ${dirs})
  file(GLOB_RECURSE found ${SOURCE_DIR}/${dir}/*.cpp ${SOURCE_DIR}/${dir}/*.h
                          ${SOURCE_DIR}/${dir}/*.cu ${SOURCE_DIR}/${dir}/*.cuh)
  list(APPEND files ${found})
endforeach()
list(SORT files)
list(LENGTH files count)
execute_process(
  COMMAND ${CLANG_FORMAT} --style=file --dry-run --Werror ${files}
  WORKING_DIRECTORY ${SOURCE_DIR}
  RESULT_VARIABLE rc
  ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  string(REGEX MATCHALL "[^\n]*: error: code should be clang-formatted" bad "${out}")
  list(TRANSFORM bad REPLACE ":[0-9]+:[0-9]+: error: code should be clang-formatted" "")
  list(REMOVE_DUPLICATES bad)
  string(REPLACE ";" "\n  " bad "${bad}")
  message(FATAL_ERROR "not clang-formatted (fix with clang-format -i):\n  ${bad}")
endif()
message(STATUS "${count} C++ sources are clang-formatted")
