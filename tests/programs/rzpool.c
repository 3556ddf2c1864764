/*
 * A program shaped like RMM's cuda_async_memory_resource (issue 32 item 5), on the emulated driver, knowing
 * nothing of redzone: a memory pool created with a release threshold, buffers allocated from it in stream
 * order, a kernel that writes past one buffer's end, stream-ordered frees, a synchronisation, a trim, the
 * pool destroyed. Run with and without libredzone.so preloaded (tests/CMakeLists.txt, pool_* entries); it
 * prints what the driver said of the pool, which must be the same either way.
 *   rzpool rmm          the above
 *   rzpool stale        a buffer from a pool of its own freed in stream order, the stream synchronised, then a
 *                       kernel still holding the pointer writes bytes [16, 32) of it; the pool's used memory,
 *                       a trim to 0 and its reserved memory printed, the pool destroyed
 *   rzpool export       a pool with a POSIX file descriptor handle type, exported and imported within the
 *                       process, a pointer exported and imported, freed by the importer then the exporter
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_emu.h"

#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        rzcu_result rc_ = (call);                                                                            \
        if (rc_ != 0) {                                                                                      \
            fprintf(stderr, "rzpool:%d: %s failed: %u\n", __LINE__, #call, rc_);                             \
            exit(100);                                                                                       \
        }                                                                                                    \
    } while (0)

/* fill(buf, from, to, value): buf[from..to) = value (one thread does it all: the emulator runs it once). */
CUDA_EMU_KERNEL(fill, sizeof(rzcu_deviceptr), sizeof(unsigned long long), sizeof(unsigned long long),
                sizeof(unsigned int)) {
    unsigned char *buf = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    unsigned long long from = CUDA_EMU_PARAM(unsigned long long, 1), to = CUDA_EMU_PARAM(unsigned long long, 2);
    for (unsigned long long i = from; i < to; i++)
        buf[i] = (unsigned char)CUDA_EMU_PARAM(unsigned int, 3);
}

static rzcu_function fill_kernel(void) {
    rzcu_module mod;
    rzcu_function f;
    CHECK(cuModuleLoadData(&mod, "emulated module"));
    CHECK(cuModuleGetFunction(&f, mod, "fill"));
    return f;
}

static void fill(rzcu_function f, rzcu_stream s, rzcu_deviceptr buf, unsigned long long from, unsigned long long to,
                 unsigned value) {
    void *params[] = {&buf, &from, &to, &value};
    CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
}

static rzcu_mem_pool make_pool(unsigned handle_types) {
    cuda_emu_mem_pool_props_t props;
    memset(&props, 0, sizeof props);
    props.allocType = RZCU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = handle_types;
    props.location.type = RZCU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    rzcu_mem_pool pool;
    CHECK(cuMemPoolCreate(&pool, &props));
    return pool;
}

static unsigned long long attr(rzcu_mem_pool pool, int which) {
    uint64_t v = 0;
    CHECK(cuMemPoolGetAttribute(pool, which, &v));
    return (unsigned long long)v;
}

static int rmm(void) {
    rzcu_function f = fill_kernel();
    rzcu_mem_pool pool = make_pool(0);
    uint64_t threshold = UINT64_MAX; /* RMM: keep everything until trimmed */
    CHECK(cuMemPoolSetAttribute(pool, CUDA_EMU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    rzcu_stream s;
    CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr a, b;
    CHECK(cuMemAllocFromPoolAsync(&a, 1000, pool, s));
    CHECK(cuMemAllocFromPoolAsync(&b, 500, pool, s));
    fill(f, s, a, 0, 1008, 0xab); /* 8 bytes past the end of a */
    fill(f, s, b, 0, 500, 0xcd);
    unsigned char host[500];
    CHECK(cuMemcpyDtoHAsync_v2(host, b, sizeof host, s));
    CHECK(cuStreamSynchronize(s));
    printf("rzpool: b[0]=0x%02x b[499]=0x%02x\n", host[0], host[499]);
    CHECK(cuMemFreeAsync(a, s));
    CHECK(cuMemFreeAsync(b, s));
    CHECK(cuStreamSynchronize(s));
    printf("rzpool: after the frees used=%llu, reserved>0: %d\n", attr(pool, CUDA_EMU_MEMPOOL_ATTR_USED_MEM_CURRENT),
           attr(pool, CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) > 0);
    CHECK(cuMemPoolTrimTo(pool, 0));
    printf("rzpool: after the trim reserved=%llu\n", attr(pool, CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT));
    CHECK(cuMemPoolDestroy(pool));
    CHECK(cuStreamDestroy_v2(s));
    return 0;
}

static int stale(void) {
    rzcu_function f = fill_kernel();
    rzcu_mem_pool pool = make_pool(0);
    rzcu_stream s;
    CHECK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr a;
    CHECK(cuMemAllocFromPoolAsync(&a, 1000, pool, s));
    fill(f, s, a, 0, 1000, 0x11);
    CHECK(cuMemFreeAsync(a, s));
    CHECK(cuStreamSynchronize(s));
    fill(f, s, a, 16, 32, 0x2a); /* the stale write */
    CHECK(cuStreamSynchronize(s));
    printf("rzpool: after the free used=%llu\n", attr(pool, CUDA_EMU_MEMPOOL_ATTR_USED_MEM_CURRENT));
    CHECK(cuMemPoolTrimTo(pool, 0));
    printf("rzpool: after the trim reserved=%llu\n", attr(pool, CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT));
    CHECK(cuMemPoolDestroy(pool));
    CHECK(cuStreamDestroy_v2(s));
    printf("rzpool: done\n");
    return 0;
}

static int export_import(void) {
    rzcu_mem_pool pool = make_pool(RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), imported;
    int fd;
    CHECK(cuMemPoolExportToShareableHandle(&fd, pool, RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CHECK(cuMemPoolImportFromShareableHandle(&imported, (void *)(intptr_t)fd, RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                             0));
    rzcu_deviceptr a, in;
    CHECK(cuMemAllocFromPoolAsync(&a, 4000, pool, NULL));
    CHECK(cuMemsetD8_v2(a, 0x5a, 4000));
    cuda_emu_mem_pool_ptr_export_data_t data;
    CHECK(cuMemPoolExportPointer(&data, a));
    CHECK(cuMemPoolImportPointer(&in, imported, &data));
    unsigned char c = 0;
    CHECK(cuMemcpyDtoH_v2(&c, in + 3999, 1));
    printf("rzpool: imported the same pointer: %d, last byte 0x%02x\n", in == a, c);
    CHECK(cuMemFree_v2(in)); /* the importer frees first */
    CHECK(cuMemFreeAsync(a, NULL));
    CHECK(cuCtxSynchronize());
    printf("rzpool: used=%llu\n", attr(pool, CUDA_EMU_MEMPOOL_ATTR_USED_MEM_CURRENT));
    CHECK(cuMemPoolDestroy(imported));
    CHECK(cuMemPoolDestroy(pool));
    close(fd);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: rzpool rmm|stale|export\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    CHECK(cuInit(0));
    rzcu_context ctx;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK(cuCtxSetCurrent(ctx));
    if (!strcmp(argv[1], "rmm"))
        return rmm();
    if (!strcmp(argv[1], "stale"))
        return stale();
    if (!strcmp(argv[1], "export"))
        return export_import();
    fprintf(stderr, "rzpool: unknown mode %s\n", argv[1]);
    return 2;
}
