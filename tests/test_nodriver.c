/*
 * Without any libcuda.so.1 the library degrades cleanly: allocation calls answer like a driver that is not
 * there (CUDA_ERROR_NOT_INITIALIZED), other calls return RZ_ENODRIVER, and one warning says why. Run by
 * ctest as a plain program (not Criterion): it must not be linked against the emulated driver.
 * Exit 0: all held; 1: a check failed; 77: skipped because this machine has a system libcuda.so.1.
 */
#include <dlfcn.h>
#include <stdio.h>

#include "redzone.h"

#define EXPECT(cond)                                                                                         \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "test_nodriver: FAILED: %s\n", #cond);                                           \
            return 1;                                                                                        \
        }                                                                                                    \
    } while (0)

int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL)
        h = dlopen("libcuda.so.1", RTLD_LAZY);
    if (h != NULL) {
        printf("test_nodriver: skipped: a libcuda.so.1 is installed on this machine, so 'no driver' cannot be shown\n");
        return 77;
    }
    rz_devptr_t p = 0;
    EXPECT(rz_mem_alloc(&p, 100) == 3 /* CUDA_ERROR_NOT_INITIALIZED */);
    EXPECT(p == 0);
    EXPECT(rz_next_index() == 1);
    EXPECT(rz_mem_free(0x1000) == 3);
    EXPECT(rz_scan() == RZ_ENODRIVER);
    EXPECT(rz_poison(0, 1) == RZ_ENODRIVER);
    rz_stats_t s;
    EXPECT(rz_stats_get(&s) == RZ_OK && s.map_calls == 0);
    printf("test_nodriver: all checks held\n");
    return 0;
}
