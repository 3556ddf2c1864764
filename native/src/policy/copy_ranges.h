/*
 * The device ranges each interposed copy and memset touches, for the range check before it (copy_ranges.c
 * computes them, copy_check.c judges each range against the program's sizes). BOUNDS_<base>(entry, since,
 * arguments...) says whether a call of that entry point touches device memory outside a buffer where the
 * driver, seeing the padded block, would let it: one per base name of RZCU_DEVICE_WRITERS, `since` telling
 * the batch copies' two signatures apart. Used by hooks.c's writer wrappers only.
 */
#ifndef REDZONE_COPY_BOUNDS_H
#define REDZONE_COPY_BOUNDS_H

#include "common.h"
#include "copy_check.h"

/* Each returns 1 when a range was reported (the caller returns CUDA_ERROR_INVALID_VALUE), else 0. */
int rz__bounds_both(const char *e, rzcu_deviceptr dst, rzcu_deviceptr src, size_t n);
int rz__bounds_set_1d(const char *e, rzcu_deviceptr dst, size_t n, unsigned elem);
int rz__bounds_set_2d(const char *e, rzcu_deviceptr dst, size_t pitch, size_t width, size_t height, unsigned elem);
int rz__bounds_copy_2d(const char *e, const void *desc);
int rz__bounds_copy_3d(const char *e, const void *desc);
/* cuMemcpyBatchAsync; the variable arguments are the rest of the call's (failIdx among them before 13.0). */
int rz__bounds_batch(const char *e, int since, rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes,
                     size_t count, ...);
/* cuMemcpy3DBatchAsync; the same. */
int rz__bounds_batch3d(const char *e, int since, size_t count, void *ops, ...);

#define BOUNDS_cuMemcpy(e, v, dst, src, n) rz__bounds_both(e, dst, src, n)
#define BOUNDS_cuMemcpyAsync(e, v, dst, src, n, s) rz__bounds_both(e, dst, src, n)
#define BOUNDS_cuMemcpyPeer(e, v, dst, dctx, src, sctx, n) rz__bounds_both(e, dst, src, n)
#define BOUNDS_cuMemcpyPeerAsync(e, v, dst, dctx, src, sctx, n, s) rz__bounds_both(e, dst, src, n)
#define BOUNDS_cuMemcpyHtoD(e, v, dst, src, n) rz__bounds_check(e, RZ_BOUNDS_WRITE, dst, n)
#define BOUNDS_cuMemcpyHtoDAsync(e, v, dst, src, n, s) rz__bounds_check(e, RZ_BOUNDS_WRITE, dst, n)
#define BOUNDS_cuMemcpyDtoH(e, v, dst, src, n) rz__bounds_check(e, RZ_BOUNDS_READ, src, n)
#define BOUNDS_cuMemcpyDtoHAsync(e, v, dst, src, n, s) rz__bounds_check(e, RZ_BOUNDS_READ, src, n)
#define BOUNDS_cuMemcpyDtoD(e, v, dst, src, n) rz__bounds_both(e, dst, src, n)
#define BOUNDS_cuMemcpyDtoDAsync(e, v, dst, src, n, s) rz__bounds_both(e, dst, src, n)
#define BOUNDS_cuMemcpyDtoA(e, v, array, offset, src, n) rz__bounds_check(e, RZ_BOUNDS_READ, src, n)
#define BOUNDS_cuMemcpyAtoD(e, v, dst, array, offset, n) rz__bounds_check(e, RZ_BOUNDS_WRITE, dst, n)
#define BOUNDS_cuMemcpy2D(e, v, desc) rz__bounds_copy_2d(e, desc)
#define BOUNDS_cuMemcpy2DUnaligned(e, v, desc) rz__bounds_copy_2d(e, desc)
#define BOUNDS_cuMemcpy2DAsync(e, v, desc, s) rz__bounds_copy_2d(e, desc)
#define BOUNDS_cuMemcpy3D(e, v, desc) rz__bounds_copy_3d(e, desc)
#define BOUNDS_cuMemcpy3DAsync(e, v, desc, s) rz__bounds_copy_3d(e, desc)
#define BOUNDS_cuMemcpy3DPeer(e, v, desc) rz__bounds_copy_3d(e, desc)
#define BOUNDS_cuMemcpy3DPeerAsync(e, v, desc, s) rz__bounds_copy_3d(e, desc)
#define BOUNDS_cuMemcpyBatchAsync(e, v, ...) rz__bounds_batch(e, v, __VA_ARGS__)
#define BOUNDS_cuMemcpy3DBatchAsync(e, v, ...) rz__bounds_batch3d(e, v, __VA_ARGS__)
#define BOUNDS_cuMemsetD8(e, v, dst, value, n) rz__bounds_set_1d(e, dst, n, 1)
#define BOUNDS_cuMemsetD8Async(e, v, dst, value, n, s) rz__bounds_set_1d(e, dst, n, 1)
#define BOUNDS_cuMemsetD16(e, v, dst, value, n) rz__bounds_set_1d(e, dst, n, 2)
#define BOUNDS_cuMemsetD16Async(e, v, dst, value, n, s) rz__bounds_set_1d(e, dst, n, 2)
#define BOUNDS_cuMemsetD32(e, v, dst, value, n) rz__bounds_set_1d(e, dst, n, 4)
#define BOUNDS_cuMemsetD32Async(e, v, dst, value, n, s) rz__bounds_set_1d(e, dst, n, 4)
#define BOUNDS_cuMemsetD2D8(e, v, dst, pitch, value, w, h) rz__bounds_set_2d(e, dst, pitch, w, h, 1)
#define BOUNDS_cuMemsetD2D8Async(e, v, dst, pitch, value, w, h, s) rz__bounds_set_2d(e, dst, pitch, w, h, 1)
#define BOUNDS_cuMemsetD2D16(e, v, dst, pitch, value, w, h) rz__bounds_set_2d(e, dst, pitch, w, h, 2)
#define BOUNDS_cuMemsetD2D16Async(e, v, dst, pitch, value, w, h, s) rz__bounds_set_2d(e, dst, pitch, w, h, 2)
#define BOUNDS_cuMemsetD2D32(e, v, dst, pitch, value, w, h) rz__bounds_set_2d(e, dst, pitch, w, h, 4)
#define BOUNDS_cuMemsetD2D32Async(e, v, dst, pitch, value, w, h, s) rz__bounds_set_2d(e, dst, pitch, w, h, 4)
#define BOUNDS_cuLaunchCooperativeKernel(e, v, ...) 0 /* a kernel: its bands judge it */
#define BOUNDS_cuGraphLaunch(e, v, ...) 0

#endif /* REDZONE_COPY_BOUNDS_H */
