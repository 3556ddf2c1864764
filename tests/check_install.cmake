# Installs the build into a scratch prefix and checks the promised layout.
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX} RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed")
endif()
include(GNUInstallDirs)
foreach(f ${CMAKE_INSTALL_LIBDIR}/libredzone.so include/redzone.h ${CMAKE_INSTALL_LIBDIR}/redzone/emu/libcuda.so.1
          share/doc/redzone/README.md share/doc/redzone/options.md share/doc/redzone/report-format.md
          share/doc/redzone/counters.md share/doc/redzone/design.md share/doc/redzone/running.md share/doc/redzone/gdb.md share/doc/redzone/bisect.md share/doc/redzone/performance.md bin/redzone share/redzone/gdb/redzone.py share/redzone/gdb/redzone_gdb/paths.py ${CMAKE_INSTALL_LIBDIR}/redzone/libredzone-view.so share/doc/redzone/emulated-driver.md)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "install lacks ${f}")
  endif()
  message(STATUS "installed: ${f}")
endforeach()
if(EXISTS ${PREFIX}/${CMAKE_INSTALL_LIBDIR}/libcuda.so.1)
  message(FATAL_ERROR "the emulated driver must not land next to libredzone.so")
endif()

# The examples README and docs/bisect.md run are installed (issue 21, item 2).
foreach(f ${CMAKE_INSTALL_LIBEXECDIR}/redzone/examples/copy_overrun ${CMAKE_INSTALL_LIBEXECDIR}/redzone/examples/read_overrun
          ${CMAKE_INSTALL_LIBEXECDIR}/redzone/examples/kernel_overrun ${CMAKE_INSTALL_LIBEXECDIR}/redzone/examples/runtime_overrun
          share/redzone/examples/read_overrun.c share/redzone/examples/example.h
          ${CMAKE_INSTALL_LIBDIR}/redzone/rz-options share/redzone/launcher/redzone_cli/cli.py)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "install lacks ${f}")
  endif()
endforeach()
execute_process(COMMAND ${PREFIX}/bin/redzone bisect --emulated-device -- ./read_overrun
                WORKING_DIRECTORY ${PREFIX}/${CMAKE_INSTALL_LIBEXECDIR}/redzone/examples
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
string(FIND "${out}" "read_overrun reads past the end of allocation #0" at)
if(NOT rc EQUAL 0 OR at EQUAL -1)
  message(FATAL_ERROR "installed example: redzone bisect did not name allocation #0 (rc ${rc}):\n${out}${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${PREFIX}/${CMAKE_INSTALL_LIBDIR}/redzone/emu METRALE_REDZONE=64
                        ${PREFIX}/${CMAKE_INSTALL_LIBEXECDIR}/redzone/examples/runtime_overrun
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
string(FIND "${out}" "rz_scan found" at)
if(at EQUAL -1)
  message(FATAL_ERROR "installed runtime_overrun did not run (rc ${rc}):\n${out}${err}")
endif()
message(STATUS "installed examples work")

# The installed launcher finds the installed library and emulated driver relative to itself.
execute_process(COMMAND ${PREFIX}/bin/redzone run --emulated-device -- ${BUILD}/examples/kernel_overrun
                OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
string(FIND "${out}" "REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64" at)
if(NOT rc EQUAL 0 OR at EQUAL -1)
  message(FATAL_ERROR "installed redzone run did not report the overrun (rc ${rc}):\n${out}")
endif()
message(STATUS "installed bin/redzone run works")

# The installed gdb plugin finds the installed view library, rz-exec, library and emulated driver.
execute_process(COMMAND gdb -nx -batch -ex "set pagination off" -ex "source ${PREFIX}/share/redzone/gdb/redzone.py"
                        -ex "set redzone emulated-device on" -ex "break stop_here" -ex "run overrun"
                        -ex "redzone scan" -ex "kill" ${BUILD}/tests/gdbprog
                OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
string(FIND "${out}" "redzone scan: 3 zones checked, 1 violated" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the installed gdb plugin did not scan:\n${out}")
endif()
message(STATUS "installed gdb plugin works")
