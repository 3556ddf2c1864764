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

# The installed launcher finds the installed library and emulated driver relative to itself.
execute_process(COMMAND ${PREFIX}/bin/redzone run --emulated-device -- ${BUILD}/examples/copy_overrun
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
