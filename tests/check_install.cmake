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

# ---- issue 31, item 7: what other build systems, man and bash find in an install ------------------------
foreach(f ${CMAKE_INSTALL_LIBDIR}/cmake/redzone/redzoneConfig.cmake ${CMAKE_INSTALL_LIBDIR}/cmake/redzone/redzoneConfigVersion.cmake
          ${CMAKE_INSTALL_LIBDIR}/cmake/redzone/redzoneTargets.cmake ${CMAKE_INSTALL_LIBDIR}/pkgconfig/redzone.pc
          share/man/man1/redzone.1 share/bash-completion/completions/redzone share/doc/redzone/frameworks.md
          share/redzone/examples/rz_api.c)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "install lacks ${f}")
  endif()
endforeach()

# `redzone --help` of an install names the installed docs (and they are there).
execute_process(COMMAND ${PREFIX}/bin/redzone --help OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
string(FIND "${out}" "the docs in ${PREFIX}/share/doc/redzone/" at)
string(FIND "${out}" "man redzone" man_at)
if(NOT rc EQUAL 0 OR at EQUAL -1 OR man_at EQUAL -1)
  message(FATAL_ERROR "installed `redzone --help` does not point at ${PREFIX}/share/doc/redzone (rc ${rc}):\n${out}${err}")
endif()

# The man page is the launcher's help text: the run flags from the option table are in it.
file(READ ${PREFIX}/share/man/man1/redzone.1 man)
foreach(want ".TH REDZONE 1" ".SH \"REDZONE RUN\"" "\\-\\-stacks N" "\\-\\-front N" "\\-\\-guard" "\\-\\-unpool"
             "METRALE_REDZONE_STACKS" ".SH \"REDZONE BISECT\"" ".SH \"REDZONE GDB\"")
  string(FIND "${man}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "redzone.1 lacks ${want}")
  endif()
endforeach()
find_program(RZ_MAN_PROGRAM man)
if(RZ_MAN_PROGRAM)
  execute_process(COMMAND ${RZ_MAN_PROGRAM} -l ${PREFIX}/share/man/man1/redzone.1 OUTPUT_VARIABLE out ERROR_VARIABLE err
                  RESULT_VARIABLE rc)
  string(FIND "${out}" "--stacks N" at)
  if(NOT rc EQUAL 0 OR at EQUAL -1)
    message(FATAL_ERROR "man -l redzone.1 failed or lacks --stacks (rc ${rc}):\n${err}")
  endif()
else()
  message(STATUS "man is not installed here: redzone.1 checked as text only")
endif()

# The bash completion completes subcommands and the run flags.
execute_process(COMMAND bash -c "source \"$0\"; COMP_WORDS=(redzone r); COMP_CWORD=1; _redzone; echo \"\${COMPREPLY[*]}\"; COMP_WORDS=(redzone run --sta); COMP_CWORD=2; _redzone; echo \"\${COMPREPLY[*]}\""
                        ${PREFIX}/share/bash-completion/completions/redzone
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out STREQUAL "run\n--stacks\n")
  message(FATAL_ERROR "bash completion: got '${out}' (rc ${rc}) for `redzone r` and `redzone run --sta`:\n${err}")
endif()
message(STATUS "installed man page, completion and help work")

# A consumer built with the CMake package and with pkg-config: it links libredzone.so and calls it.
set(consumer ${BUILD}/install-consumer)
file(REMOVE_RECURSE ${consumer})
file(WRITE ${consumer}/src/main.c "#include <stdio.h>\n#include <redzone.h>\nint main(void) {\n    printf(\"consumer: %s, next index %llu\\n\", rz_status_name(0), (unsigned long long)rz_next_index());\n    return 0;\n}\n")
file(WRITE ${consumer}/src/CMakeLists.txt "cmake_minimum_required(VERSION 3.20)\nproject(consumer C)\nfind_package(redzone 0.1 REQUIRED)\nadd_executable(consumer main.c)\ntarget_link_libraries(consumer PRIVATE redzone::redzone)\n")
execute_process(COMMAND ${CMAKE_COMMAND} -S ${consumer}/src -B ${consumer}/build -G Ninja -DCMAKE_PREFIX_PATH=${PREFIX}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${consumer}/build OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "find_package(redzone) consumer did not build (rc ${rc}):\n${out}${err}")
endif()
execute_process(COMMAND ${consumer}/build/consumer OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^consumer: [A-Z_]+, next index 0\n$")
  message(FATAL_ERROR "the CMake-package consumer did not run (rc ${rc}): ${out}${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig
                        pkg-config --cflags --libs redzone OUTPUT_VARIABLE pc ERROR_VARIABLE err RESULT_VARIABLE rc
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config redzone failed: ${err}")
endif()
separate_arguments(pc_flags UNIX_COMMAND "${pc}")
execute_process(COMMAND cc ${consumer}/src/main.c -o ${consumer}/consumer-pc ${pc_flags}
                        -Wl,-rpath,${PREFIX}/${CMAKE_INSTALL_LIBDIR} RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0)
  execute_process(COMMAND ${consumer}/consumer-pc OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
endif()
if(NOT rc EQUAL 0 OR NOT out MATCHES "^consumer: [A-Z_]+, next index 0\n$")
  message(FATAL_ERROR "the pkg-config consumer (cc main.c ${pc}) did not build or run (rc ${rc}): ${out}${err}")
endif()
message(STATUS "consumers built with find_package(redzone) and pkg-config run")

# ---- issue 31, item 9: README's library example, built from installed files and a toolkit's cuda.h -------
set(cuda_root "")
foreach(root $ENV{CUDA_PATH} /usr/local/cuda /usr)
  if(NOT cuda_root AND EXISTS ${root}/include/cuda.h)
    set(cuda_root ${root})
  endif()
endforeach()
file(READ ${CMAKE_CURRENT_LIST_DIR}/../README.md readme)
string(REGEX MATCH "```sh\n[^`]*rz_api\\.c[^`]*```" block "${readme}")
if(NOT block)
  message(FATAL_ERROR "README.md has no ```sh block building rz_api.c")
endif()
string(REGEX REPLACE "^```sh\n|```$" "" block "${block}")
if(NOT cuda_root)
  message(STATUS "README's rz_api.c example NOT built: no CUDA toolkit's cuda.h here (CUDA_PATH, /usr/local/cuda, /usr)")
else()
  set(work ${BUILD}/install-readme-example)
  file(REMOVE_RECURSE ${work})
  file(MAKE_DIRECTORY ${work})
  file(WRITE ${work}/readme.sh "${block}")
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PREFIX=${PREFIX} CUDA=${cuda_root} sh -e readme.sh
                  WORKING_DIRECTORY ${work} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  string(FIND "${err}" "redzone: copy past the end of alloc#0: bytes [0..=7] written by cuMemcpyHtoD" at)
  string(FIND "${out}" "rz_api: rz_scan found 0 violated zone(s)" scan_at)
  if(NOT rc EQUAL 0 OR at EQUAL -1 OR scan_at EQUAL -1)
    message(FATAL_ERROR "README's rz_api.c commands (CUDA=${cuda_root}) did not build and run as shown (rc ${rc}):\n${block}\n${out}${err}")
  endif()
  message(STATUS "README's rz_api.c example builds from the install and ${cuda_root}/include/cuda.h, and runs")
endif()
