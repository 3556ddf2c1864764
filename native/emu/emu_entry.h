/*
 * The prologue of every exported entry point of the emulated driver, written once: ENTER (or ENTER_NOINIT for
 * the few calls that need no cuInit, ENTER_CTX for those that need a current context) calls emu_enter
 * (emu_entry.c) with the entry point's id and return address, which counts the call, applies the
 * configuration's injected faults and the sticky error, and notes the call for the device trace.
 */
#ifndef REDZONE_EMU_ENTRY_H
#define REDZONE_EMU_ENTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "cu.h"

/* Every exported symbol of the library: the declarations in cuda_emu.h get default visibility. */
#pragma GCC visibility push(default)
#include "cuda_emu.h"
#pragma GCC visibility pop

/* ---- entry point ids ---- */
enum emu_ep {
#define EMU_EP_ID(name, ret, params) EP_##name,
#define EMU_EP_VARIANT_ID(variant, base) EP_##variant,
    RZCU_ENTRY_POINTS(EMU_EP_ID) RZCU_PER_THREAD_VARIANTS(EMU_EP_VARIANT_ID)
        CUDA_EMU_EXTRA_ENTRY_POINTS(EMU_EP_ID)
#undef EMU_EP_ID
#undef EMU_EP_VARIANT_ID
            EP_COUNT
};

extern const char *const emu_ep_names[EP_COUNT];
int emu_ep_by_name(const char *name); /* -1 when unknown */

/* Host waits (emu_waits.c): emu_enter notes each entry point call; emu_host_wait counts the calling entry
 * point call as one that waits for device work (once per call, by its contract). */
void emu_waits_enter(int ep);
void emu_host_wait(void);
void emu_waits_reset(void);
void emu_set_kernel_ns(unsigned long long ns);
/* In the stream's worker, after a kernel ran: its duration (CUDA_EMU_KERNEL_NS). */
void emu_kernel_duration(void);
#include <stdio.h>
void emu_waits_print(FILE *f);

/* ---- configuration, counting, fault injection (emu_entry.c) ---- */
struct emu_config {
    int ndevices;
    size_t mem_bytes;
    bool kernel_hold; /* CUDA_EMU_KERNEL_HOLD=1: kernels start only when a thread waits for device work */
    bool sticky_faults; /* CUDA_EMU_STICKY_FAULTS=1: a kernel fault is the sticky ILLEGAL_ADDRESS, not a signal */
};
extern struct emu_config emu_cfg;

/* Called first by every exported entry point with its return address: reads the configuration once, counts
 * the call, raises an injected signal, and returns the injected error for this call (CUDA_SUCCESS when
 * none; CUDA_ERROR_DEINITIALIZED for every call once the driver has shut down). */
rzcu_result emu_enter(enum emu_ep ep, void *caller);
/*
 * The process's sticky error (emu_entry.c): after a kernel fault (CUDA_EMU_STICKY_FAULTS) or an injected error
 * that cuda.h documents as leaving "the process in an inconsistent state" (emu_error_is_sticky), every later
 * call of every entry point, in every context and thread, returns it (emu_enter), except the few that do no
 * CUDA work (docs/emulated-driver.md); nothing clears it. The first error stays.
 */
rzcu_result emu_sticky_error(void); /* CUDA_SUCCESS until then */
void emu_set_sticky_error(rzcu_result r);
/* cuInit succeeded: with CUDA_EMU_SHUTDOWN_AT_EXIT=1, register the shutdown at exit (once). */
void emu_note_init(void);

bool emu_initialized(void);
void emu_set_initialized(void);

struct CUctx_st;
/* The current context: CUDA_ERROR_INVALID_CONTEXT without one, CONTEXT_IS_DESTROYED when it was destroyed
 * (emu_context.c). */
rzcu_result emu_current_ctx(struct CUctx_st **out);

/* ---- prologues of the exported entry points ---- */
#define ENTER_NOINIT(name)                                                                                   \
    do {                                                                                                     \
        rzcu_result enter_r_ = emu_enter(EP_##name, __builtin_return_address(0));                            \
        if (enter_r_ != RZCUDA_SUCCESS)                                                                      \
            return enter_r_;                                                                                 \
    } while (0)

#define ENTER(name)                                                                                          \
    do {                                                                                                     \
        ENTER_NOINIT(name);                                                                                  \
        if (!emu_initialized())                                                                              \
            return RZCUDA_ERROR_NOT_INITIALIZED;                                                             \
    } while (0)

/* ENTER, then the current context in c (declared here), or the current context's error returned. */
#define ENTER_CTX(name, c)                                                                                   \
    ENTER(name);                                                                                             \
    struct CUctx_st *c;                                                                                      \
    CHECK(emu_current_ctx(&c))

#define CHECK(expr)                                                                                          \
    do {                                                                                                     \
        rzcu_result check_r_ = (expr);                                                                       \
        if (check_r_ != RZCUDA_SUCCESS)                                                                      \
            return check_r_;                                                                                 \
    } while (0)

#define EMU_API __attribute__((visibility("default")))

#endif /* REDZONE_EMU_ENTRY_H */
