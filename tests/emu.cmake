# Tests of the emulated CUDA driver (native/emu), linked directly against it. include()d from
# tests/CMakeLists.txt.
if(NOT TARGET PkgConfig::CRITERION)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(CRITERION REQUIRED IMPORTED_TARGET criterion)
endif()

add_executable(test_emu ${CMAKE_CURRENT_LIST_DIR}/test_emu.c)
target_link_libraries(test_emu PRIVATE redzone_cuda_emu PkgConfig::CRITERION Threads::Threads)
# the emulated kernels of test_emu.c are found with dlsym: export them
set_target_properties(test_emu PROPERTIES ENABLE_EXPORTS ON)
add_test(NAME emu COMMAND test_emu)
