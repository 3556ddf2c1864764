# Concurrency stress (issue #7), include()d from tests/CMakeLists.txt: rzstress drives libredzone.so through
# its interposed entry points (preloaded) on the emulated driver, with scans and poisons running alongside,
# and checks its invariants itself; the same program, smaller, runs under valgrind's helgrind (drd by hand).
# REDZONE_LONG=1 in the environment turns each into its long run (docs/testing.md).
add_executable(rzstress ${CMAKE_CURRENT_LIST_DIR}/stress.c)
target_include_directories(rzstress PRIVATE ${PROJECT_SOURCE_DIR}/native/include ${REDZONE_INTERNAL_DIRS}
                                            ${PROJECT_SOURCE_DIR}/native/emu)
target_link_libraries(rzstress PRIVATE redzone_cuda_emu Threads::Threads ${CMAKE_DL_LIBS})
set_target_properties(rzstress PROPERTIES SKIP_BUILD_RPATH ON)
add_dependencies(rzstress redzone)

set(REDZONE_STRESS_OPS 3000 CACHE STRING "rzstress allocation/free calls per thread in ctest (REDZONE_LONG=1 makes it 100000)")
# A 1 MiB quarantine (not the 64 MiB default): the stress program's scans read every held byte back, and
# with the default that dominates its time under TSan (over 15 minutes in a clean-clone run); 1 MiB still
# holds, evicts and checks blocks from every thread at once, which is what the stress is for.
set(RZ_STRESS_ENV "LD_PRELOAD=$<TARGET_FILE:redzone>;LD_LIBRARY_PATH=${PROJECT_BINARY_DIR}/emu;METRALE_REDZONE_QUARANTINE=1M")
# Judged by its exit status and its output (expect_output.py); the preload is for rzstress only (env), not
# for the judging interpreter.
add_test(NAME stress COMMAND ${RZ_EXPECT} --pass "rzstress: passed" --fail "rzstress: FAIL"
  -- env ${RZ_STRESS_ENV} $<TARGET_FILE:rzstress> --ops ${REDZONE_STRESS_OPS})
set_tests_properties(stress PROPERTIES TIMEOUT 3600 LABELS stress)

# The same program under helgrind, in a build with REDZONE_VALGRIND=ON (only there do the library's lock and
# atomics carry the annotations helgrind needs). 8 threads x 200 calls; REDZONE_LONG=1: 8 x 2,000. drd runs
# the same way by hand (tests/stress/valgrind.sh drd ...; much slower). Skipped, saying why, without valgrind.
if(REDZONE_VALGRIND)
  add_test(NAME stress_helgrind COMMAND ${RZ_EXPECT} --skip-rc 77 --pass "rzstress: passed" --fail "rzstress: FAIL"
    -- ${CMAKE_CURRENT_LIST_DIR}/valgrind.sh helgrind $<TARGET_FILE:rzstress> $<TARGET_FILE:redzone>
       ${PROJECT_BINARY_DIR}/emu --ops 200)
  set_tests_properties(stress_helgrind PROPERTIES TIMEOUT 7200 LABELS "stress;valgrind" SKIP_RETURN_CODE 77)
endif()
