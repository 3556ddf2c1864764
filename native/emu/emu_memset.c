/*
 * The emulated driver's wider and pitched memsets: cuMemsetD16/D32 (n elements of 2 or 4 bytes) and
 * cuMemsetD2D8/16/32 (height rows of width elements, pitch bytes apart), with their async and per-thread
 * forms. As the driver: the destination must be aligned to the element, the pitch must hold a row, and
 * every byte written must lie in one live allocation (else CUDA_ERROR_INVALID_VALUE); nothing to write is
 * CUDA_SUCCESS. Executed by the stream engine (emu_stream.c) like cuMemsetD8.
 */
#include "emu_engine.h"

static rzcu_result do_fill(rzcu_deviceptr dst, unsigned elem, uint32_t pattern, size_t pitch, size_t width,
                           size_t height, bool pitched, bool async, rzcu_stream hstream, bool per_thread)
{
    struct CUctx_st *c;
    CHECK(emu_current_ctx(&c));
    struct CUstream_st *s;
    CHECK(emu_resolve_stream(async ? hstream : NULL, per_thread, c, &s));
    if (width > SIZE_MAX / elem)
        return RZCUDA_ERROR_INVALID_VALUE;
    size_t row_bytes = width * elem, span = row_bytes;
    if (pitched) {
        if (height == 0 || width == 0)
            return RZCUDA_SUCCESS;
        if (pitch < row_bytes || (height - 1 > 0 && height - 1 > (SIZE_MAX - row_bytes) / pitch))
            return RZCUDA_ERROR_INVALID_VALUE;
        span = (height - 1) * pitch + row_bytes;
    }
    if (span == 0)
        return RZCUDA_SUCCESS;
    if (dst % elem || (pitched && pitch % elem))
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_mem_range_writable(dst, span))
        return RZCUDA_ERROR_INVALID_VALUE;
    emu_trace_write(dst, span);
    struct op *op = emu_op_new(s->ctx, OP_SET);
    if (!op)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    op->dst = (void *)(uintptr_t)dst;
    op->n = span;
    op->value = (unsigned char)pattern;
    op->elem = elem;
    op->pattern = pattern;
    op->pitch = pitched ? pitch : 0;
    op->rows = pitched ? height : 0;
    op->row_bytes = pitched ? row_bytes : 0;
    rzcu_result r = emu_submit(s, op, !async);
    return r == RZCUDA_SUCCESS && !async ? emu_ctx_error(s->ctx) : r;
}

#define SET_1D(name, type, elem, async, per_thread)                                                          \
    EMU_API rzcu_result name(rzcu_deviceptr dst, type value, size_t n)                                       \
    {                                                                                                        \
        ENTER(name);                                                                                         \
        return do_fill(dst, elem, value, 0, n, 1, false, async, NULL, per_thread);                           \
    }
#define SET_1D_ASYNC(name, type, elem, per_thread)                                                           \
    EMU_API rzcu_result name(rzcu_deviceptr dst, type value, size_t n, rzcu_stream s)                        \
    {                                                                                                        \
        ENTER(name);                                                                                         \
        return do_fill(dst, elem, value, 0, n, 1, false, true, s, per_thread);                               \
    }
#define SET_2D(name, type, elem, per_thread)                                                                 \
    EMU_API rzcu_result name(rzcu_deviceptr dst, size_t pitch, type value, size_t width, size_t height)       \
    {                                                                                                        \
        ENTER(name);                                                                                         \
        return do_fill(dst, elem, value, pitch, width, height, true, false, NULL, per_thread);               \
    }
#define SET_2D_ASYNC(name, type, elem, per_thread)                                                           \
    EMU_API rzcu_result name(rzcu_deviceptr dst, size_t pitch, type value, size_t width, size_t height,      \
                             rzcu_stream s)                                                                  \
    {                                                                                                        \
        ENTER(name);                                                                                         \
        return do_fill(dst, elem, value, pitch, width, height, true, true, s, per_thread);                   \
    }

SET_1D(cuMemsetD16_v2, unsigned short, 2, false, false)
SET_1D(cuMemsetD16_v2_ptds, unsigned short, 2, false, true)
SET_1D_ASYNC(cuMemsetD16Async, unsigned short, 2, false)
SET_1D_ASYNC(cuMemsetD16Async_ptsz, unsigned short, 2, true)
SET_1D(cuMemsetD32_v2, unsigned int, 4, false, false)
SET_1D(cuMemsetD32_v2_ptds, unsigned int, 4, false, true)
SET_1D_ASYNC(cuMemsetD32Async, unsigned int, 4, false)
SET_1D_ASYNC(cuMemsetD32Async_ptsz, unsigned int, 4, true)
SET_2D(cuMemsetD2D8_v2, unsigned char, 1, false)
SET_2D(cuMemsetD2D8_v2_ptds, unsigned char, 1, true)
SET_2D_ASYNC(cuMemsetD2D8Async, unsigned char, 1, false)
SET_2D_ASYNC(cuMemsetD2D8Async_ptsz, unsigned char, 1, true)
SET_2D(cuMemsetD2D16_v2, unsigned short, 2, false)
SET_2D(cuMemsetD2D16_v2_ptds, unsigned short, 2, true)
SET_2D_ASYNC(cuMemsetD2D16Async, unsigned short, 2, false)
SET_2D_ASYNC(cuMemsetD2D16Async_ptsz, unsigned short, 2, true)
SET_2D(cuMemsetD2D32_v2, unsigned int, 4, false)
SET_2D(cuMemsetD2D32_v2_ptds, unsigned int, 4, true)
SET_2D_ASYNC(cuMemsetD2D32Async, unsigned int, 4, false)
SET_2D_ASYNC(cuMemsetD2D32Async_ptsz, unsigned int, 4, true)
