/* Helpers shared by the test_emu_*.c files (emu_test_util.h). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "emu_test_util.h"

rzcu_context primary_current(void)
{
    OK(cuInit(0));
    rzcu_context ctx = NULL;
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    return ctx;
}

size_t free_bytes(void)
{
    size_t f = 0, t = 0;
    OK(cuMemGetInfo_v2(&f, &t));
    return f;
}

void gate_wait_fn(void *arg)
{
    struct gate *g = arg;
    pthread_mutex_lock(&g->mu);
    g->entered = 1;
    pthread_cond_broadcast(&g->cond);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

void gate_open(struct gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->mu);
}

void gate_await_entered(struct gate *g)
{
    pthread_mutex_lock(&g->mu);
    while (!g->entered)
        pthread_cond_wait(&g->cond, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

void set_flag_fn(void *arg) { __atomic_store_n((int *)arg, 1, __ATOMIC_SEQ_CST); }
int get_flag(int *f) { return __atomic_load_n(f, __ATOMIC_SEQ_CST); }

rzcu_memcpy_attributes attr_order(unsigned order)
{
    rzcu_memcpy_attributes a;
    memset(&a, 0, sizeof a);
    a.srcAccessOrder = order;
    return a;
}

/* Threads of this process whose name starts with the worker prefix. */
int count_worker_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[300], comm[32] = {0};
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* the thread exited meanwhile */
        if (fgets(comm, sizeof comm, f) && strncmp(comm, WORKER_PREFIX, strlen(WORKER_PREFIX)) == 0)
            n++;
        fclose(f);
    }
    closedir(d);
    return n;
}

rzcu_function get_kernel(const char *name)
{
    rzcu_module m;
    OK(cuModuleLoadData(&m, "// PTX is not interpreted by the emulator\n"));
    rzcu_function f = NULL;
    OK(cuModuleGetFunction(&f, m, name));
    cr_assert_not_null(f);
    return f;
}
