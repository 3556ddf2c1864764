/*
 * Interposition of the entry points that change which context is current on a thread (libredzone.so only;
 * hooks.h lists them for hooks.c's lookups): cuCtxSetCurrent, push and pop, and every creation (which pushes
 * the new context), under their current names and the older ABIs drivers still export. Each is the driver's
 * call with the program's arguments and the driver's answer; afterwards the device seam forgets this thread's
 * current context (device_ctx.c), so a new allocation's zone is named by the context it was made in without a
 * driver call per allocation (issue 29 item 2: the lazy install no longer asks the driver per zone). A call
 * that fails is forgotten too: the driver may have changed the stack before failing, and asking once more
 * costs one call.
 */
#include "common.h"
#include "device_ctx.h"
#include "driver.h"
#include "hooks.h"

/* After the driver's answer: a signal handler's allocation between the call and this is the only one that
 * can still see the old context (the same thread: no other can). */
#define CHANGED(call)                                                                                        \
    rzcu_result r_ = (call);                                                                                 \
    rz__dev_ctx_changed_here();                                                                              \
    return r_

rzcu_result cuCtxSetCurrent(rzcu_context ctx) {
    rzcu_fn_cuCtxSetCurrent *real = REAL(cuCtxSetCurrent);
    if (real == NULL)
        return rz__hook_missing();
    CHANGED(real(ctx));
}

rzcu_result cuCtxPushCurrent_v2(rzcu_context ctx) {
    rzcu_fn_cuCtxPushCurrent_v2 *real = REAL(cuCtxPushCurrent_v2);
    if (real == NULL)
        return rz__hook_missing();
    CHANGED(real(ctx));
}

rzcu_result cuCtxPushCurrent(rzcu_context ctx) {
    rzcu_fn_cuCtxPushCurrent_v2 *real = REAL(cuCtxPushCurrent);
    if (real == NULL)
        return rz__hook_missing();
    CHANGED(real(ctx));
}

rzcu_result cuCtxPopCurrent_v2(rzcu_context *pctx) {
    rzcu_fn_cuCtxPopCurrent_v2 *real = REAL(cuCtxPopCurrent_v2);
    if (real == NULL)
        return rz__hook_missing();
    CHANGED(real(pctx));
}

rzcu_result cuCtxPopCurrent(rzcu_context *pctx) {
    rzcu_fn_cuCtxPopCurrent_v2 *real = REAL(cuCtxPopCurrent);
    if (real == NULL)
        return rz__hook_missing();
    CHANGED(real(pctx));
}

rzcu_result cuCtxCreate_v4(rzcu_context *pctx, struct CUctxCreateParams_st *params, unsigned int flags,
                           rzcu_device dev) {
    rzcu_fn_cuCtxCreate_v4 *real = REAL(cuCtxCreate_v4);
    if (real == NULL)
        return rz__hook_missing();
    CHANGED(real(pctx, params, flags, dev));
}

rzcu_result cuCtxCreate_v3(rzcu_context *pctx, void *params, int nparams, unsigned int flags, rzcu_device dev) {
    rzcu_fn_cuCtxCreate_v3 *real = REAL(cuCtxCreate_v3);
    if (real == NULL)
        return rz__hook_missing();
    CHANGED(real(pctx, params, nparams, flags, dev));
}

rzcu_result cuCtxCreate_v2(rzcu_context *pctx, unsigned int flags, rzcu_device dev) {
    rzcu_fn_cuCtxCreate_v2 *real = REAL(cuCtxCreate_v2);
    if (real == NULL)
        return rz__hook_missing();
    CHANGED(real(pctx, flags, dev));
}

rzcu_result cuCtxCreate(rzcu_context *pctx, unsigned int flags, rzcu_device dev) {
    rzcu_fn_cuCtxCreate_v2 *real = REAL(cuCtxCreate);
    if (real == NULL)
        return rz__hook_missing();
    CHANGED(real(pctx, flags, dev));
}
