/*
 * An ended context's device state, forgotten in one step: its library stream (device_ctx.c), its check
 * kernel's module and buffer (check_kernel.c), the launch checks' tables and areas (check_changed.c) and its stream-fill slots (stream_fills.c). It sits above those
 * three so that none of them calls another to forget (the check kernel and the fills use device_ctx.c).
 */
#include "ctx_forget.h"
#include "check_kernel.h"
#include "check_changed.h"
#include "device_ctx.h"
#include "stream_fills.h"

void rz__dev_forget_ctx(void *ctx) {
    rz__dev_streams_forget_ctx(ctx);
    rz__check_kernel_forget(ctx);
    rz__changed_forget(ctx);
    rz__fill_forget_ctx(ctx);
}
