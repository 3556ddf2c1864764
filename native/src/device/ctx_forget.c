/*
 * An ended context's device state, forgotten in one step: its library stream (device_ctx.c), its check
 * kernel's module and buffer (check_kernel.c), the launch checks' tables and areas (check_changed.c), its
 * stream-fill slots (stream_fills.c) and its streams' work records (work_epoch.c). It sits above them so that
 * none of them calls another to forget (the check kernel, the fills and the work records use device_ctx.c).
 */
#include "ctx_forget.h"
#include "check_kernel.h"
#include "check_changed.h"
#include "device_ctx.h"
#include "stream_fills.h"
#include "work_epoch.h"

void rz__dev_forget_ctx(void *ctx) {
    rz__dev_streams_forget_ctx(ctx);
    rz__check_kernel_forget(ctx);
    rz__changed_forget(ctx);
    rz__fill_forget_ctx(ctx);
    rz__work_forget_ctx(ctx);
}
