/*
 * Stream work the library queues or asks for itself. Thin wrappers: the entry point, its arguments and its
 * answer exactly as the caller gave and gets them (capture-mode sections, where needed, stay the caller's).
 */
#include "common.h"
#include "stream_ops.h"
#include "driver.h"

rzcu_result rz__dev_stream_create(rzcu_stream *out, unsigned int flags) { return rz__drv.cuStreamCreate(out, flags); }

rzcu_result rz__dev_stream_sync(rzcu_stream s) { return rz__drv.cuStreamSynchronize(s); }

rzcu_result rz__dev_stream_query(rzcu_stream s) { return rz__drv.cuStreamQuery(s); }

rzcu_result rz__dev_stream_is_capturing(rzcu_stream s, rzcu_capture_status *status) {
    return rz__drv.cuStreamIsCapturing(s, status);
}

rzcu_result rz__dev_host_func(rzcu_stream s, rzcu_host_fn fn, void *data) {
    return rz__drv.cuLaunchHostFunc(s, fn, data);
}

rzcu_result rz__dev_copy_to_host_async(void *dst, rz_devptr_t src, size_t bytes, rzcu_stream s) {
    return rz__drv.cuMemcpyDtoHAsync_v2(dst, src, bytes, s);
}

rzcu_result rz__dev_copy_batch_async(rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes, size_t n,
                                     RZCU_MEMCPY_ATTRIBUTES *attrs, size_t *attr_idxs, size_t nattrs, rzcu_stream s) {
    return rz__drv.cuMemcpyBatchAsync_v2(dsts, srcs, sizes, n, attrs, attr_idxs, nattrs, s);
}

rzcu_result rz__dev_fill_async(rz_devptr_t dst, uint8_t value, size_t bytes, rzcu_stream s) {
    return rz__drv.cuMemsetD8Async(dst, value, bytes, s);
}
