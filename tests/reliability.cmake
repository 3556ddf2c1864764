# Issue 7's failure modes and the "nothing lost" proof: unmodified programs under LD_PRELOAD on the emulated
# driver, with faults injected by it, and the call trace (the shim libcudatrace.so plus the driver's own
# `dev` lines) compared with and without redzone. include()d from tests/CMakeLists.txt.
add_executable(rzfault ${CMAKE_CURRENT_LIST_DIR}/programs/rzfault.c)
target_include_directories(rzfault PRIVATE ${REDZONE_INTERNAL_DIRS} ${PROJECT_SOURCE_DIR}/native/emu
                                           ${PROJECT_SOURCE_DIR}/native/include)
target_link_libraries(rzfault PRIVATE redzone_cuda_emu ${CMAKE_DL_LIBS})
set_target_properties(rzfault PROPERTIES SKIP_BUILD_RPATH ON ENABLE_EXPORTS ON)

# Reaches the driver only through dlopen, so it can dlclose it.
add_executable(rzlife ${CMAKE_CURRENT_LIST_DIR}/programs/rzlife.c)
target_include_directories(rzlife PRIVATE ${REDZONE_INTERNAL_DIRS})
target_link_libraries(rzlife PRIVATE Threads::Threads ${CMAKE_DL_LIBS})

# Meets a sticky error (issue 27): tests/test_sticky.c, and nothing_lost.
add_executable(rzsticky ${CMAKE_CURRENT_LIST_DIR}/programs/rzsticky.c)
target_include_directories(rzsticky PRIVATE ${REDZONE_INTERNAL_DIRS} ${PROJECT_SOURCE_DIR}/native/emu)
target_link_libraries(rzsticky PRIVATE redzone_cuda_emu)
set_target_properties(rzsticky PROPERTIES SKIP_BUILD_RPATH ON ENABLE_EXPORTS ON)

foreach(name reliability nothing_lost sticky)
  add_executable(test_${name} ${CMAKE_CURRENT_LIST_DIR}/test_${name}.c)
  target_include_directories(test_${name} PRIVATE ${REDZONE_INTERNAL_DIRS})
  target_link_libraries(test_${name} PRIVATE PkgConfig::CRITERION ${CMAKE_DL_LIBS})
  target_compile_definitions(test_${name} PRIVATE
    EMU_DIR="${PROJECT_BINARY_DIR}/emu" EXAMPLES="${PROJECT_BINARY_DIR}/examples" GDBPROG="$<TARGET_FILE:gdbprog>"
    LIBREDZONE="$<TARGET_FILE:redzone>" READPAST="$<TARGET_FILE:readpast>" REDZONE_CLI="${PROJECT_BINARY_DIR}/bin/redzone"
    RZFAULT="$<TARGET_FILE:rzfault>" RZLIFE="$<TARGET_FILE:rzlife>" RZPROG="$<TARGET_FILE:rzprog>" RZTRANSP="$<TARGET_FILE:rztransp>"
    RZSTICKY="$<TARGET_FILE:rzsticky>" TRACE_SHIM="$<TARGET_FILE:redzone_cuda_trace>")
  add_dependencies(test_${name} redzone redzone_cuda_emu redzone_cuda_trace rzprog rzfault rzlife rzsticky gdbprog readpast
                   copy_overrun kernel_overrun read_overrun runtime_overrun)
  add_test(NAME ${name} COMMAND test_${name} --jobs 2)
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "CRITERION_NO_EARLY_EXIT=1" TIMEOUT 300)
endforeach()
