# Test registration shared by every test folder.
#
# nv_add_test(NAME SOURCES src... [LIBS lib...] [PLAIN] [LABELS l...])
#   Builds one test executable and registers it with CTest. Criterion tests (the default)
#   write a JSON report into ${NV_TEST_RESULTS}, which tools/test_summary.py aggregates into
#   the closing `N passed, N failed, N skipped` line. PLAIN tests are ordinary executables
#   (exit 0 = pass, 77 = skipped), used where Criterion cannot run (TSan).
set(NV_TEST_RESULTS ${CMAKE_BINARY_DIR}/test-results)
file(MAKE_DIRECTORY ${NV_TEST_RESULTS})
find_library(CRITERION_LIBRARY criterion)

function(nv_add_test name)
  cmake_parse_arguments(T "PLAIN" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS})
  if(T_PLAIN)
    add_test(NAME ${name} COMMAND ${name})
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
  else()
    if(NOT CRITERION_LIBRARY)
      message(FATAL_ERROR "Criterion not found: run tools/setup.sh (libcriterion-dev)")
    endif()
    target_link_libraries(${name} PRIVATE ${CRITERION_LIBRARY})
    add_test(NAME ${name} COMMAND ${name} --json=${NV_TEST_RESULTS}/${name}.json)
  endif()
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT 900)
endfunction()
