/*
 * Stream work the library queues or asks for itself (stream_ops.c): its own streams (create, wait for),
 * whether a stream's work is done or is being captured, host functions, copies of bands to the host and
 * band memsets queued in a stream.
 */
#ifndef REDZONE_STREAM_OPS_H
#define REDZONE_STREAM_OPS_H

#include "common.h"
#include "driver.h"

/* Whether the driver has each entry point (cuStreamQuery, cuStreamIsCapturing, cuLaunchHostFunc,
 * cuMemcpyBatchAsync_v2); the calls below need theirs. */
static inline int rz__dev_has_stream_query(void) { return rz__drv.cuStreamQuery != NULL; }

static inline int rz__dev_has_stream_is_capturing(void) { return rz__drv.cuStreamIsCapturing != NULL; }

static inline int rz__dev_has_host_func(void) { return rz__drv.cuLaunchHostFunc != NULL; }

static inline int rz__dev_has_copy_batch(void) { return rz__drv.cuMemcpyBatchAsync_v2 != NULL; }

/* cuStreamCreate, cuStreamSynchronize (the caller sets the capture mode around a wait where it must). */
rzcu_result rz__dev_stream_create(rzcu_stream *out, unsigned int flags);

rzcu_result rz__dev_stream_sync(rzcu_stream s);

/* cuStreamQuery, cuStreamIsCapturing. */
rzcu_result rz__dev_stream_query(rzcu_stream s);

rzcu_result rz__dev_stream_is_capturing(rzcu_stream s, rzcu_capture_status *status);

/* cuLaunchHostFunc: fn(data) runs once s reaches it. */
rzcu_result rz__dev_host_func(rzcu_stream s, rzcu_host_fn fn, void *data);

/* cuMemcpyDtoHAsync_v2: bytes from device src to host dst, in s's order. */
rzcu_result rz__dev_copy_to_host_async(void *dst, rz_devptr_t src, size_t bytes, rzcu_stream s);

/* cuMemcpyBatchAsync_v2: n copies in one call, in s's order. */
rzcu_result rz__dev_copy_batch_async(rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes, size_t n,
                                     RZCU_MEMCPY_ATTRIBUTES *attrs, size_t *attr_idxs, size_t nattrs, rzcu_stream s);

/* cuMemsetD8Async: bytes at dst set to value, in s's order (s as the program named it, rz__stream_of). */
rzcu_result rz__dev_fill_async(rz_devptr_t dst, uint8_t value, size_t bytes, rzcu_stream s);

#endif /* REDZONE_STREAM_OPS_H */
