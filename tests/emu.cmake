# Tests of the emulated CUDA driver (native/emu), linked directly against it. include()d from
# tests/CMakeLists.txt.
if(NOT TARGET PkgConfig::CRITERION)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(CRITERION REQUIRED IMPORTED_TARGET criterion)
endif()

add_executable(test_emu ${CMAKE_CURRENT_LIST_DIR}/test_emu.c)
target_link_libraries(test_emu PRIVATE redzone_cuda_emu PkgConfig::CRITERION Threads::Threads)
add_test(NAME emu COMMAND test_emu)
