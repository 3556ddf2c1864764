# Sanitizer builds (REDZONE_SANITIZE, see docs/testing.md), include()d at the end of tests/CMakeLists.txt so
# it sees every test: each test gets the sanitizer runtime's options, and a test that cannot run under the
# sanitizer is disabled and labelled `sanitizer-excluded` here with its reason (ctest lists it as "Not Run
# (Disabled)"; docs/testing.md explains each).
if(NOT REDZONE_SANITIZE)
  return()
endif()
set(rz_supp ${CMAKE_CURRENT_LIST_DIR}/sanitizers)
# ASan: libredzone.so is preloaded into programs that link the runtime themselves, so the runtime is not
# first in the library list; that is harmless here (it still comes before libc, so its allocator wins), and
# the check that would refuse to start is off. Leaks are reported. UBSan and ASan reports are fatal (the
# build also uses -fno-sanitize-recover=all).
set(rz_env
  "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=1:halt_on_error=1:abort_on_error=0:strict_string_checks=1:detect_invalid_pointer_pairs=0"
  "LSAN_OPTIONS=suppressions=${rz_supp}/lsan.supp:print_suppressions=0"
  "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:report_error_type=1"
  "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=${rz_supp}/tsan.supp:print_suppressions=0")
get_property(rz_tests DIRECTORY PROPERTY TESTS)
foreach(t ${rz_tests})
  set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT ${rz_env})
endforeach()
