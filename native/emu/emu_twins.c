/*
 * Host twins of kernels the library built for the GPU brings in its own module (native/kernels/rz_check.cu):
 * the emulated driver runs them where a GPU would run the PTX, so the library's device path is the one the
 * tests run. A program's own cuda_emu_kernel_<name> of the same name comes first (emu_kernel_lookup).
 * Only rz_check_changed (the launch checks') has a twin: the scans' rz_check_bands stays absent, as tests of
 * the scans' fallback to copies expect (tests/test_check.c supplies its own).
 */
#include <stdint.h>
#include <string.h>

#include "emu_internal.h"

/* The twin reads the program's device bytes while kernels on other streams may write them: on a GPU that is
 * the program's affair (the check sees either value), here two host threads, which ThreadSanitizer would
 * report as a race in the emulator; as the copy engine does (emu_stream.c), the twin's device accesses are
 * hidden from it in a TSan build. */
#ifdef __SANITIZE_THREAD__
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define TWIN_DEVICE_BEGIN() (AnnotateIgnoreReadsBegin(__FILE__, __LINE__), AnnotateIgnoreWritesBegin(__FILE__, __LINE__))
#define TWIN_DEVICE_END() (AnnotateIgnoreWritesEnd(__FILE__, __LINE__), AnnotateIgnoreReadsEnd(__FILE__, __LINE__))
#else
#define TWIN_DEVICE_BEGIN() ((void)0)
#define TWIN_DEVICE_END() ((void)0)
#endif

struct twin_desc { /* rz_check.cu's struct rz_check_desc */
    uint64_t band;
    uint32_t bytes;
    uint8_t expected;
    uint8_t reserved[3];
};

/* rz_check_changed: every band that differs from its expected byte, with its bytes, into the result area. */
static void emu_twin_rz_check_changed(const cuda_emu_launch_t *launch, void **params)
{
    const struct twin_desc *d = (const struct twin_desc *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    unsigned n = CUDA_EMU_PARAM(unsigned, 1), cap = CUDA_EMU_PARAM(unsigned, 3);
    unsigned bytecap = CUDA_EMU_PARAM(unsigned, 4), base_count = CUDA_EMU_PARAM(unsigned, 5);
    unsigned base_bytes = CUDA_EMU_PARAM(unsigned, 6);
    unsigned *out = (unsigned *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 2);
    unsigned char *data = (unsigned char *)(out + 2 + 2 * (size_t)cap);
    unsigned long long threads = (unsigned long long)launch->grid.x * launch->block.x;
    TWIN_DEVICE_BEGIN();
    for (unsigned i = 0; i < n && i < threads; i++) {
        const unsigned char *p = (const unsigned char *)(uintptr_t)d[i].band;
        if (d[i].bytes == 0 || (p[0] == d[i].expected && memcmp(p, p + 1, d[i].bytes - 1) == 0))
            continue;
        unsigned k = out[0]++ - base_count;
        if (k >= cap)
            continue;
        unsigned off = out[1] - base_bytes;
        out[1] += d[i].bytes;
        out[2 + 2 * k] = i;
        if (off <= bytecap && d[i].bytes <= bytecap - off) {
            memcpy(data + off, p, d[i].bytes);
            out[3 + 2 * k] = off;
        } else {
            out[3 + 2 * k] = 0xffffffffu;
        }
    }
    TWIN_DEVICE_END();
}

static const size_t rz_check_changed_params[] = {sizeof(rzcu_deviceptr), sizeof(unsigned), sizeof(rzcu_deviceptr),
                                                 sizeof(unsigned), sizeof(unsigned), sizeof(unsigned),
                                                 sizeof(unsigned), 0};

bool emu_twin_lookup(const char *name, cuda_emu_kernel_fn **fn, const size_t **sizes, size_t *n)
{
    if (strcmp(name, "rz_check_changed") != 0)
        return false;
    *fn = emu_twin_rz_check_changed;
    *sizes = rz_check_changed_params;
    *n = sizeof rz_check_changed_params / sizeof rz_check_changed_params[0] - 1;
    return true;
}
