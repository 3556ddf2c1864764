/*
 * The __redzone_refused hook seen from outside the library, as a debugger sees it: this program defines the
 * hook itself (exported), so with libredzone.so preloaded the library's call to its hook, made through the
 * dynamic symbol a debugger's breakpoint is set on, lands here. Each call prints its record, and the
 * violations the library had counted by then (rz_stats_get, found with dlsym: the program does not link
 * libredzone). Without the library nothing calls it: the driver refuses the same copies by itself.
 *   rzhook    a read 8 bytes past the end of a 100-byte buffer (cuMemcpyDtoH), a memset starting 10 bytes past
 *             its end (cuMemsetD8), a device-to-device copy leaving both buffers (cuMemcpyDtoD), one that fits,
 *             a free of a pointer 16 bytes before the buffer's start (in its front band under
 *             METRALE_REDZONE_FRONT; no allocation's start either way)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_emu.h"
#include "redzone.h"

#define PROG "rzhook"
#include "prog.h"

static rzcu_deviceptr g_bufs[2];
static int g_calls;

__attribute__((visibility("default"))) void __redzone_refused(const rz_refusal_t *refusal) {
    const rz_refusal_t *r = refusal;
    int (*stats_get)(rz_stats_t *) = (int (*)(rz_stats_t *))dlsym(RTLD_DEFAULT, "rz_stats_get");
    rz_stats_t st = {0};
    if (stats_get == NULL || stats_get(&st) != 0)
        st.violations = UINT64_MAX;
    int buf = r->ptr == g_bufs[0] ? 0 : r->ptr == g_bufs[1] ? 1 : -1;
    printf("rzhook: hook %d: index=%llu buf=%d user_bytes=%llu addr=ptr%+lld bytes=%llu [%lld..=%lld] how=%u "
           "result=%d entry=%.*s violations=%llu\n",
           ++g_calls, (unsigned long long)r->index, buf, (unsigned long long)r->user_bytes,
           (long long)(r->addr - r->ptr), (unsigned long long)r->bytes, (long long)r->first, (long long)r->last,
           (unsigned)r->how, (int)r->result, (int)sizeof r->entry, r->entry, (unsigned long long)st.violations);
}

#define SHOW(call) printf("rzhook: %s = %u\n", #call, (unsigned)(call))

int main(void) {
    setup();
    unsigned char host[300];
    CHECK(cuMemAlloc_v2(&g_bufs[0], 256));
    CHECK(cuMemAlloc_v2(&g_bufs[1], 100));
    rzcu_deviceptr a = g_bufs[0], b = g_bufs[1];
    SHOW(cuMemcpyDtoH_v2(host, b, 108));
    SHOW(cuMemsetD8_v2(b + 110, 0, 4));
    SHOW(cuMemcpyDtoD_v2(b, a, 300));
    SHOW(cuMemcpyDtoD_v2(b, a, 100));
    SHOW(cuMemFree_v2(b - 16));
    CHECK(cuMemFree_v2(b));
    CHECK(cuMemFree_v2(a));
    printf("rzhook: %d hook calls\n", g_calls);
    return 0;
}
