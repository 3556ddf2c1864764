# Sanitizer builds (REDZONE_SANITIZE, see docs/testing.md), include()d at the end of tests/CMakeLists.txt so
# it sees every test: each test gets the sanitizer runtimes' options, and a test that cannot run under a
# sanitizer is disabled and labelled `sanitizer-excluded` here, with its reason (ctest lists it as "Not Run
# (Disabled)"; configuring prints the list; docs/testing.md explains each).
if(NOT REDZONE_SANITIZE)
  return()
endif()
set(rz_supp ${CMAKE_CURRENT_LIST_DIR}/sanitizers)

# ASan: the instrumented libredzone.so is preloaded into programs that link the runtime themselves, so the
# runtime is not first in the library list; harmless (it still comes before libc), so that check is off
# (native/src/base/sanitize.c sets the same default for programs started without this environment). Leaks are
# reported, except in programs run under gdb: LeakSanitizer cannot work under ptrace. Every report is
# fatal (the build also uses -fno-sanitize-recover=all).
set(rz_asan "verify_asan_link_order=0:halt_on_error=1:abort_on_error=0:strict_string_checks=1")
set(rz_lsan "LSAN_OPTIONS=suppressions=${rz_supp}/lsan.supp:print_suppressions=0")
set(rz_ubsan "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:report_error_type=1")
set(rz_tsan "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=${rz_supp}/tsan.supp:print_suppressions=0")

# rz_exclude(<regex matching REDZONE_SANITIZE> "<reason>" <test>...)
function(rz_exclude sanitizers reason)
  if(NOT REDZONE_SANITIZE MATCHES "${sanitizers}")
    return()
  endif()
  set(excluded "")
  foreach(t ${ARGN})
    if(TEST ${t})
      set_property(TEST ${t} APPEND PROPERTY LABELS sanitizer-excluded)
      set_property(TEST ${t} PROPERTY DISABLED TRUE)
      list(APPEND excluded ${t})
    endif()
  endforeach()
  if(excluded)
    string(REPLACE ";" " " excluded "${excluded}")
    message(STATUS "redzone: not run under -fsanitize=${REDZONE_SANITIZE}: ${excluded}: ${reason}")
  endif()
endfunction()

rz_exclude("address|thread" "a core file of an instrumented process holds the sanitizer's shadow memory, terabytes of address space that gcore writes out"
  gdb_core cudagdb_core gdb16_core gdb_state)
rz_exclude("address|thread" "case_nvtx writes a core file of the instrumented process (as gdb_core does)"
  gdb_nvtx cudagdb_nvtx gdb16_nvtx)
rz_exclude("address|thread" "instruction counts come from valgrind's callgrind, which cannot run a sanitizer's binaries (and would count the sanitizer's instructions); the main tree asserts them"
  start_instructions launch_instructions launch_churn_instructions)
rz_exclude("address|thread" "scripts/demo is the normal build's path for a newcomer: under a sanitizer its guard-page step dies in the sanitizer's own SIGSEGV handler (AddressSanitizer:DEADLYSIGNAL), which is the sanitizer's doing, not the demo's"
  demo)
rz_exclude("address|thread" "case_quarantine writes a core file of the instrumented process (as gdb_core does): 67 GB under ASan"
  gdb_quarantine cudagdb_quarantine gdb16_quarantine)
rz_exclude("thread" "Criterion cannot start under ThreadSanitizer (\"Could not initialize inheritable arena\": its runner maps memory where TSan keeps its own); the concurrency these cover runs under TSan in rzstress (the stress test)"
  options registry stats api band bounds check agent symbols emu emu_real emu_sticky preload reliability nothing_lost sticky semantics scale transparency
  lifetime writers attribution streamorder ipc files signals quarantine)
rz_exclude("thread" "these cases assert where stepping from a violation stop lands and which frames the stop selects: under TSan the program's code calls the TSan runtime (__tsan_read8, with line information) at every access, which `step` enters and the stacks hold, and the holder of a busy registry is as often the agent inside the runtime's locks (as gdb_threads); the main and ASan trees run them"
  gdb_break cudagdb_break gdb16_break gdb_exit_stop cudagdb_exit_stop gdb16_exit_stop gdb_lock_held cudagdb_lock_held gdb16_lock_held)

rz_exclude("thread" "gdb stops every thread but the agent, and under TSan a stopped thread can hold the TSan runtime's own locks (its allocator, its thread registry), which the agent then waits for: scans time out at random, and the case accepts only a held registry as the reason to refuse"
  gdb_threads cudagdb_threads gdb16_threads)
rz_exclude("address" "with the agent method (plain gdb) a stopped thread can hold ASan's allocator lock, which the agent then waits for: scans time out at random (seen in a clean-clone run), and the case accepts only a held registry as the reason to refuse; cuda-gdb's case (the memory method, no agent) still runs"
  gdb_threads gdb16_threads)

rz_exclude("address|thread|undefined" "the docs' example output is compared line by line, and a sanitizer runtime may add its own lines or frames to it; what it runs (redzone run, bisect, the examples) runs under the sanitizers in preload and bisect, and the main tree runs the comparison"
  docs_readme_tour)

rz_exclude("address|thread|undefined" "the fuzzer is its own clang build, with ASan and UBSan already, the same in every tree: the main tree runs it"
  fuzz_options)
rz_exclude("address|thread|undefined" "the GPU run's rehearsal configures and builds its own uninstrumented tree (as the GPU machine does), the same in every tree: the main tree runs it"
  gpu_run_emulated)
rz_exclude("address|thread|undefined" "the NVIDIA driver is not instrumented and its package is unpacked into the main tree only (scripts/real-driver); what the library does there does not depend on the sanitizer, and driver_not_started and driver_table run the same checks on the emulated driver in every tree: the main tree runs them"
  real_driver_no_gpu driver_table_real)

# rz_exclude_cases(<regex matching REDZONE_SANITIZE> <test> "<reason>" <suite/case glob>...): leaves some
# Criterion cases of one test out (Criterion's own filter, CRITERION_TEST_PATTERN); the rest still run.
function(rz_exclude_cases sanitizers test reason)
  if(NOT REDZONE_SANITIZE MATCHES "${sanitizers}" OR NOT TEST ${test})
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY rz_excluded_cases_${test} ${ARGN})
  set_property(TEST ${test} APPEND PROPERTY LABELS sanitizer-excluded-cases)
  string(REPLACE ";" " " cases "${ARGN}")
  message(STATUS "redzone: ${test}: not run under -fsanitize=${REDZONE_SANITIZE}: ${cases}: ${reason}")
endfunction()

rz_exclude_cases("address|undefined" preload
  "the program dies of a deliberate null-pointer store or a fault in an emulated kernel: UBSan reports the store and ASan's SEGV handler takes the fault, before the library's own fatal-signal handling the cases check"
  "preload/fatal_signal_final_scan_on_sigsegv" "preload/fatal_signal_scan_*" "preload/guard_page_faults_*")
rz_exclude_cases("address" preload
  "ASan intercepts backtrace(), so every allocation stack starts with its interceptor's frame, and the case checks the exact first frame"
  "preload/allocation_stacks_under_violation_reports")
rz_exclude_cases("address" reliability
  "LeakSanitizer, run when the forked child exits, prints a notice (\"Running thread ... was not suspended\") into the output the case compares line by line"
  "life/fork_child_without_cuda")

get_property(rz_tests DIRECTORY PROPERTY TESTS)
foreach(t ${rz_tests})
  set(asan "${rz_asan}:detect_leaks=1")
  if(t MATCHES "^(gdb|cudagdb|gdb16)_|^redzone_gdb_launcher$")
    set(asan "${rz_asan}:detect_leaks=0") # the program runs under gdb (ptrace)
  elseif(t STREQUAL "emu")
    # test_emu checks that touching freed emulated device memory faults (Criterion expects SIGSEGV): ASan
    # must let that signal through instead of reporting it.
    set(asan "${asan}:handle_segv=0")
  elseif(t STREQUAL "signals")
    # rzsignal's faults are the program's own (its handler, or the default action after redzone's final
    # scan), compared with a run without redzone: ASan's SEGV handler would report them instead.
    set(asan "${asan}:handle_segv=0")
  endif()
  set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "ASAN_OPTIONS=${asan}" ${rz_lsan} ${rz_ubsan} ${rz_tsan})
  get_property(cases GLOBAL PROPERTY rz_excluded_cases_${t})
  if(cases)
    string(REPLACE ";" "|" cases "${cases}")
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "CRITERION_TEST_PATTERN=!(${cases})")
  endif()
endforeach()

