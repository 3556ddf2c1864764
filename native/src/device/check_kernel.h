/*
 * The device check kernel (check_kernel.c).
 */
#ifndef REDZONE_CHECK_KERNEL_H
#define REDZONE_CHECK_KERNEL_H

#include "common.h"
#include "band_io.h"

/* One band for the check kernel (native/kernels/rz_check.cu: struct rz_check_desc, same layout). */
typedef struct rz_check_desc {
    uint64_t band;
    uint32_t bytes;
    uint8_t expected;
    uint8_t reserved[3];
} rz_check_desc_t;

/* Violated positions one launch returns; more and the scan reads every band of the batch instead. */
#define RZ_CHECK_CAP 4096u

/* Check the n bands of io (any mix of contexts; io[i].value is the expected byte) on the device: sets
 * suspect[i] to 1 exactly for the bands that differ. RZ_OK, or RZ_EDRIVER when a context has no check
 * kernel (no PTX built in, or the driver cannot load it: the emulated driver), more than RZ_CHECK_CAP
 * bands differ, or a driver call failed: the caller then reads every band. Registry lock held. */
int rz__check_kernel_run(const rz_band_io_t *io, size_t n, uint8_t *suspect);

/* 1 when the library was built with the check kernel's image (nvcc was found). */
int rz__check_kernel_built(void);

/* That image (a fatbin) and its size. */
const unsigned char *rz__check_kernel_image(size_t *size);

/* 0 keeps scans off the check kernel (benchmarks and tests compare methods); 1 (default) uses it. */
void rz__check_kernel_enable(int on);


/* Whether a scan found a context whose module is still to be loaded; load those (call without the registry
 * lock: loading may JIT-compile). */
int rz__check_kernel_wanted(void);

/* lock/unlock: the lock the scans hold while they use the per-context kernel state (the registry's; the
 * band engine passes it). */
void rz__check_kernel_load(void (*lock)(void), void (*unlock)(void));

void rz__check_kernel_forget(void *ctx);

#endif /* REDZONE_CHECK_KERNEL_H */
