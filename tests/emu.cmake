# Tests of the emulated CUDA driver (native/emu), linked directly against it. include()d from
# tests/CMakeLists.txt.
if(NOT TARGET PkgConfig::CRITERION)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(CRITERION REQUIRED IMPORTED_TARGET criterion)
endif()

# One executable, one file per concern (the ctest entry `emu` runs them all).
add_executable(test_emu
  ${CMAKE_CURRENT_LIST_DIR}/emu_test_util.c
  ${CMAKE_CURRENT_LIST_DIR}/test_emu_core.c
  ${CMAKE_CURRENT_LIST_DIR}/test_emu_mem.c
  ${CMAKE_CURRENT_LIST_DIR}/test_emu_stream.c
  ${CMAKE_CURRENT_LIST_DIR}/test_emu_copy.c
  ${CMAKE_CURRENT_LIST_DIR}/test_emu_copy2d.c
  ${CMAKE_CURRENT_LIST_DIR}/test_emu_batch3d.c
  ${CMAKE_CURRENT_LIST_DIR}/test_emu_ipc.c
  ${CMAKE_CURRENT_LIST_DIR}/test_emu_pool.c
  ${CMAKE_CURRENT_LIST_DIR}/test_emu_kernel.c
  ${CMAKE_CURRENT_LIST_DIR}/test_emu_vmm.c
  ${CMAKE_CURRENT_LIST_DIR}/test_emu_mempool.c)
target_link_libraries(test_emu PRIVATE redzone_cuda_emu PkgConfig::CRITERION Threads::Threads)
# the emulated kernels of test_emu_*.c are found with dlsym: export them
set_target_properties(test_emu PROPERTIES ENABLE_EXPORTS ON)
add_test(NAME emu COMMAND test_emu)

# The emulated driver's imitations of real-driver rules added for issue 15 (one process per test: the
# environment each sets is read once).
add_executable(test_emu_real ${CMAKE_CURRENT_LIST_DIR}/test_emu_real.c ${CMAKE_CURRENT_LIST_DIR}/test_emu_capture.c)
target_link_libraries(test_emu_real PRIVATE redzone_cuda_emu PkgConfig::CRITERION Threads::Threads)
set_target_properties(test_emu_real PROPERTIES ENABLE_EXPORTS ON)
add_test(NAME emu_real COMMAND test_emu_real)

# Sticky errors (issue 27): process-wide and permanent, as cuda.h documents them.
add_executable(test_emu_sticky ${CMAKE_CURRENT_LIST_DIR}/test_emu_sticky.c)
target_link_libraries(test_emu_sticky PRIVATE redzone_cuda_emu PkgConfig::CRITERION Threads::Threads)
set_target_properties(test_emu_sticky PROPERTIES ENABLE_EXPORTS ON)
add_test(NAME emu_sticky COMMAND test_emu_sticky)
