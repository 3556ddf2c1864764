# What an install gives other build systems and shells (issue 31, item 7): the CMake package
# (find_package(redzone) -> redzone::redzone), redzone.pc, the man page redzone(1) and the bash completion,
# made from the launcher's own help text; and `cpack -G DEB` (tests/check_package.sh).
include(CMakePackageConfigHelpers)

set(RZ_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/redzone)
set(RZ_EMU_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/redzone/emu)
install(EXPORT redzoneTargets NAMESPACE redzone:: DESTINATION ${RZ_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/redzoneConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/redzoneConfig.cmake INSTALL_DESTINATION ${RZ_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR RZ_EMU_INSTALL_DIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/redzoneConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/redzoneConfig.cmake ${PROJECT_BINARY_DIR}/cmake/redzoneConfigVersion.cmake
        DESTINATION ${RZ_CMAKE_DIR})

# redzone.pc, relocatable: its prefix is found from where the file lies (${pcfiledir}).
file(RELATIVE_PATH RZ_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${CMAKE_CURRENT_LIST_DIR}/redzone.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/redzone.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/redzone.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# redzone(1) and the completion, from the parsers `redzone --help` prints (native/tools/gen_cli_files.py).
find_package(Python3 COMPONENTS Interpreter REQUIRED)
set(RZ_MAN ${PROJECT_BINARY_DIR}/share/man/man1/redzone.1)
set(RZ_COMPLETION ${PROJECT_BINARY_DIR}/share/bash-completion/completions/redzone)
file(GLOB RZ_CLI_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/native/tools/redzone_cli/*.py)
add_custom_command(OUTPUT ${RZ_MAN} ${RZ_COMPLETION}
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/native/tools/gen_cli_files.py
          ${PROJECT_SOURCE_DIR}/native/tools $<TARGET_FILE:rz-options> ${PROJECT_VERSION}
          "<prefix>/${CMAKE_INSTALL_DOCDIR}" ${RZ_MAN} ${RZ_COMPLETION}
  DEPENDS rz-options ${PROJECT_SOURCE_DIR}/native/tools/gen_cli_files.py ${RZ_CLI_SOURCES}
          ${PROJECT_SOURCE_DIR}/native/src/base/options.inc
  COMMENT "redzone(1) and the bash completion from the launcher's help text" VERBATIM)
add_custom_target(redzone_cli_files ALL DEPENDS ${RZ_MAN} ${RZ_COMPLETION})
install(FILES ${RZ_MAN} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${RZ_COMPLETION} DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)

# cpack -G DEB (in the build tree): a package for /usr. The launcher finds its pieces relative to itself, so
# the same files work wherever they land.
set(CPACK_PACKAGE_NAME redzone)
set(CPACK_PACKAGE_VENDOR "redzone")
set(CPACK_PACKAGE_CONTACT "redzone maintainers <redzone@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "guard bands (red zones) after CUDA device allocations, with an emulated driver")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6, python3")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "gdb, nvidia-cuda-gdb")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_GENERATOR DEB)
set(CPACK_SOURCE_GENERATOR "")
include(CPack)
