/*
 * Sanitizer builds only (CMake REDZONE_SANITIZE; never part of a normal build): the defaults the sanitizer
 * runtimes read when they start, so a program that preloads this instrumented libredzone.so needs no extra
 * environment. ASan's check that its runtime comes first in the library list is off: the preloaded library
 * comes first, but the program's own runtime (the program must be instrumented too, see docs/testing.md)
 * still comes before libc, so its allocator and interceptors are the ones used. ASAN_OPTIONS and
 * UBSAN_OPTIONS still override these. The runtimes call these while they initialise: not instrumented.
 * Also built into the emulated driver's trace shim (libcudatrace.so), which tests preload too.
 */

#define RZ_SANITIZER_HOOK __attribute__((visibility("default"), used, no_sanitize("address", "thread", "undefined")))

RZ_SANITIZER_HOOK const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "verify_asan_link_order=0"; }

RZ_SANITIZER_HOOK const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "halt_on_error=1:print_stacktrace=1"; }
