/*
 * A program shaped like PyTorch's caching allocator or an RMM pool resource (issue 32 item 4), on the
 * emulated driver, knowing nothing of redzone: one large cuMemAlloc, described to tools with the NVTX memory
 * API (the toolkit's header-only nvtx3: a tool receives the calls when NVTX_INJECTION64_PATH names it), and
 * tensors sub-allocated from it at 1024-byte steps, each registered and named as a region.
 *   rznvtx overrun     a kernel writes 8 bytes past the end of tensor "weights" (1000 bytes, 24 bytes of
 *                      slack before the next tensor); tensor "grads" is unregistered, then a stale kernel
 *                      writes 16 bytes into it; "activations" is used within bounds; then everything is
 *                      unregistered, the heap too, and the pool freed
 *   rznvtx clean       the same without the two bad writes
 *   rznvtx reuse       "grads" unregistered, a stale kernel writes 16 bytes into it, then the pool hands the
 *                      same bytes out again: "grads2" (2000 bytes) registered over it, filled by a kernel and
 *                      read back; then a stale write into the new tensor's bytes at the same place is the
 *                      program's own (no report)
 *   rznvtx poolfree    "grads" unregistered, the stale write, then the pool's allocation freed without
 *                      unregistering the heap or the other regions (a pool torn down at exit)
 * Prints what it read back from the tensors, which must be the same with and without redzone.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include "cuda_emu.h"

#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        rzcu_result rc_ = (call);                                                                            \
        if (rc_ != 0) {                                                                                      \
            fprintf(stderr, "rznvtx:%d: %s failed: %u\n", __LINE__, #call, rc_);                             \
            exit(100);                                                                                       \
        }                                                                                                    \
    } while (0)

CUDA_EMU_KERNEL(fill, sizeof(rzcu_deviceptr), sizeof(unsigned long long), sizeof(unsigned long long),
                sizeof(unsigned int)) {
    unsigned char *buf = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    unsigned long long from = CUDA_EMU_PARAM(unsigned long long, 1), to = CUDA_EMU_PARAM(unsigned long long, 2);
    for (unsigned long long i = from; i < to; i++)
        buf[i] = (unsigned char)CUDA_EMU_PARAM(unsigned int, 3);
}

static rzcu_function g_fill;

static void fill(rzcu_deviceptr buf, unsigned long long from, unsigned long long to, unsigned value) {
    void *params[] = {&buf, &from, &to, &value};
    CHECK(cuLaunchKernel(g_fill, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
}

#define POOL_BYTES ((size_t)1 << 20)
#define STEP 1024

/* Where tests/gdb/case_nvtx.py stops: the regions registered, one unregistered, the bad writes done. */
__attribute__((noinline, used)) void stop_here(int where);
void stop_here(int where) { __asm__ volatile("" : : "r"(where) : "memory"); }

static nvtxDomainHandle_t g_domain;
static nvtxMemHeapHandle_t g_heap;

static void region(rzcu_deviceptr p, size_t bytes, const char *name) {
    nvtxMemVirtualRangeDesc_t range = {bytes, (const void *)(uintptr_t)p};
    nvtxMemRegionHandle_t handle = NULL;
    nvtxMemRegionsRegisterBatch_t batch = {NVTX_EXT_COMPATID_MEM, sizeof batch, NVTX_MEM_TYPE_VIRTUAL_ADDRESS,
                                           g_heap, 1, sizeof range, &range, &handle};
    nvtxMemRegionsRegister(g_domain, &batch);
    if (name) {
        nvtxMemRegionNameDesc_t desc;
        memset(&desc, 0, sizeof desc);
        desc.regionRefType = NVTX_MEM_REGION_REF_TYPE_POINTER;
        desc.nameType = NVTX_MESSAGE_TYPE_ASCII;
        desc.region.pointer = (const void *)(uintptr_t)p;
        desc.name.ascii = name;
        nvtxMemRegionsNameBatch_t names = {NVTX_EXT_COMPATID_MEM, sizeof names, 0, 1, sizeof desc, &desc, 0};
        nvtxMemRegionsName(g_domain, &names);
    }
}

static void unregister(rzcu_deviceptr p) {
    nvtxMemRegionRef_t ref;
    ref.pointer = (const void *)(uintptr_t)p;
    nvtxMemRegionsUnregisterBatch_t batch = {NVTX_EXT_COMPATID_MEM, sizeof batch, NVTX_MEM_REGION_REF_TYPE_POINTER,
                                             1, sizeof ref, &ref};
    nvtxMemRegionsUnregister(g_domain, &batch);
}

int main(int argc, char **argv) {
    if (argc != 2 || (strcmp(argv[1], "overrun") && strcmp(argv[1], "clean") && strcmp(argv[1], "reuse") &&
                      strcmp(argv[1], "poolfree"))) {
        fprintf(stderr, "usage: rznvtx overrun|clean|reuse|poolfree\n");
        return 2;
    }
    int bad = !strcmp(argv[1], "overrun"), reuse = !strcmp(argv[1], "reuse"), poolfree = !strcmp(argv[1], "poolfree");
    setvbuf(stdout, NULL, _IONBF, 0);
    CHECK(cuInit(0));
    rzcu_context ctx;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK(cuCtxSetCurrent(ctx));
    rzcu_module mod;
    CHECK(cuModuleLoadData(&mod, "emulated module"));
    CHECK(cuModuleGetFunction(&g_fill, mod, "fill"));

    rzcu_deviceptr pool;
    CHECK(cuMemAlloc_v2(&pool, POOL_BYTES));
    g_domain = nvtxDomainCreateA("rznvtx pool");
    nvtxMemVirtualRangeDesc_t whole = {POOL_BYTES, (const void *)(uintptr_t)pool};
    nvtxMemHeapDesc_t heap;
    memset(&heap, 0, sizeof heap);
    heap.extCompatID = NVTX_EXT_COMPATID_MEM;
    heap.structSize = sizeof heap;
    heap.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
    heap.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    heap.typeSpecificDescSize = sizeof whole;
    heap.typeSpecificDesc = &whole;
    g_heap = nvtxMemHeapRegister(g_domain, &heap);

    rzcu_deviceptr weights = pool, grads = pool + STEP, act = pool + 3 * STEP, scratch = pool + 4 * STEP;
    region(weights, 1000, "weights");
    region(grads, 2048, "grads");
    region(act, 500, "activations");
    region(scratch, 100, NULL);
    fill(weights, 0, bad ? 1008 : 1000, 0xab);
    fill(grads, 0, 2048, 0x11);
    fill(act, 0, 500, 0x22);
    fill(scratch, 0, 100, 0x33);
    CHECK(cuCtxSynchronize());
    unregister(grads); /* the pool keeps the memory; the tensor is gone */
    if (bad || reuse || poolfree)
        fill(grads, 16, 32, 0xcd); /* a stale kernel still writing the old tensor */
    CHECK(cuCtxSynchronize());
    if (poolfree) {
        CHECK(cuMemFree_v2(pool)); /* the heap and its regions go with it */
        printf("rznvtx: pool freed\n");
        printf("rznvtx: done\n");
        return 0;
    }
    if (reuse) {
        printf("rznvtx: reusing grads\n");
        region(grads, 2000, "grads2"); /* the pool hands the same bytes out again */
        fill(grads, 0, 2000, 0x44);
        CHECK(cuCtxSynchronize());
        unsigned char g[2000];
        CHECK(cuMemcpyDtoH_v2(g, grads, sizeof g));
        printf("rznvtx: grads2 0x%02x..0x%02x 0x%02x\n", g[0], g[1999], g[16]);
        unregister(grads);
        unregister(weights);
        unregister(act);
        unregister(scratch);
        nvtxMemHeapUnregister(g_domain, g_heap);
        CHECK(cuMemFree_v2(pool));
        printf("rznvtx: done\n");
        return 0;
    }
    stop_here(1);
    unsigned char w[1000], a[500];
    CHECK(cuMemcpyDtoH_v2(w, weights, sizeof w));
    CHECK(cuMemcpyDtoH_v2(a, act, sizeof a));
    printf("rznvtx: weights 0x%02x..0x%02x activations 0x%02x..0x%02x\n", w[0], w[999], a[0], a[499]);
    unregister(weights);
    unregister(act);
    unregister(scratch);
    nvtxMemHeapUnregister(g_domain, g_heap);
    CHECK(cuMemFree_v2(pool));
    printf("rznvtx: done\n");
    return 0;
}
