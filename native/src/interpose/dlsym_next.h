/*
 * The exported dlsym of an interposer (libredzone.so, hooks.c; the emulated driver's trace shim,
 * native/emu/trace_shim.c). Every library's dlsym calls land in whichever of them comes first in the global
 * scope, and glibc answers dlsym(RTLD_NEXT, ...) relative to the object its return address points into.
 * Called from C in the interposer, it would answer for the interposer instead of its caller: a later
 * interposer asking for the next definition of a function it defines itself (a sanitizer runtime asking for
 * mmap, a profiler) would get its own back and recurse. So on x86-64 dlsym is a few instructions of assembly
 * that send RTLD_NEXT requests to the real dlsym with a jump, the caller's return address untouched, and
 * everything else to the interposer's own function. Elsewhere the C fallback relies on the compiler turning
 * that call into a tail call (it does at -O2; the dlsym_rtld_next test checks). Sanitizer runtimes call
 * dlsym while they initialise, before their shadow memory exists: this path runs no instrumented code, and
 * OTHER and RESOLVE must be RZ_DLSYM_NO_SANITIZE.
 *
 * RZ_DLSYM_INTERPOSER(OTHER, SLOT, RESOLVE) defines dlsym. OTHER: void *(void *, const char *), hidden, for
 * every handle but RTLD_NEXT; SLOT: a hidden, `used` pointer to the real dlsym, NULL until resolved;
 * RESOLVE: rz_dlsym_fn *(void), hidden and `used`, resolves SLOT (rz_dlsym_resolve below) and returns it.
 */
#ifndef REDZONE_DLSYM_NEXT_H
#define REDZONE_DLSYM_NEXT_H

#include <dlfcn.h>
#include <stddef.h>

#define RZ_DLSYM_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))

typedef void *rz_dlsym_fn(void *, const char *);

/* libc's dlsym (dlvsym finds only its versioned definition, never an interposer's), stored in *slot. */
RZ_DLSYM_NO_SANITIZE static inline rz_dlsym_fn *rz_dlsym_resolve(rz_dlsym_fn **slot) {
    rz_dlsym_fn *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (f == NULL) {
        /* glibc 2.34 moved dlsym into libc with a new version; older ones have only GLIBC_2.2.5. */
        f = (rz_dlsym_fn *)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (f == NULL)
            f = (rz_dlsym_fn *)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    }
    return f;
}

#if defined(__x86_64__)
#define RZ_DLSYM_INTERPOSER(OTHER, SLOT, RESOLVE)                                                             \
    __asm__(".text\n"                                                                                          \
            ".globl dlsym\n"                                                                                   \
            ".type dlsym, @function\n"                                                                         \
            "dlsym:\n"                                                                                         \
            "    cmpq $-1, %rdi\n" /* RTLD_NEXT */                                                              \
            "    jne " #OTHER "\n"                                                                             \
            "    movq " #SLOT "(%rip), %rax\n"                                                                 \
            "    testq %rax, %rax\n"                                                                           \
            "    jz 1f\n"                                                                                      \
            "    jmp *%rax\n"                                                                                  \
            "1:  pushq %rdi\n"                                                                                 \
            "    pushq %rsi\n"                                                                                 \
            "    subq $8, %rsp\n" /* the stack 16-byte aligned at the call */                                   \
            "    call " #RESOLVE "\n"                                                                          \
            "    addq $8, %rsp\n"                                                                              \
            "    popq %rsi\n"                                                                                  \
            "    popq %rdi\n"                                                                                  \
            "    testq %rax, %rax\n"                                                                           \
            "    jz 2f\n"                                                                                      \
            "    jmp *%rax\n"                                                                                  \
            "2:  ret\n" /* no real dlsym: NULL */                                                               \
            ".size dlsym, .-dlsym\n")
#else
#define RZ_DLSYM_INTERPOSER(OTHER, SLOT, RESOLVE)                                                             \
    __attribute__((visibility("default"))) void *dlsym(void *restrict handle, const char *restrict name);     \
    RZ_DLSYM_NO_SANITIZE void *dlsym(void *restrict handle, const char *restrict name) {                      \
        if (handle == RTLD_NEXT) {                                                                             \
            rz_dlsym_fn *real = RESOLVE();                                                                     \
            return real ? real(handle, name) : NULL; /* a tail call: the caller's return address stays */     \
        }                                                                                                      \
        return OTHER(handle, name);                                                                            \
    }                                                                                                          \
    _Static_assert(1, "dlsym defined")
#endif

#endif /* REDZONE_DLSYM_NEXT_H */
