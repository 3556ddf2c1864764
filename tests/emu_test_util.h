/* Helpers shared by the test_emu_*.c files (tests of the emulated driver, one executable: test_emu). */
#ifndef REDZONE_EMU_TEST_UTIL_H
#define REDZONE_EMU_TEST_UTIL_H

#include <criterion/criterion.h>
#include <pthread.h>

#include "cuda_emu.h"

#define OK(call) cr_assert_eq((call), RZCUDA_SUCCESS, "%s", #call)
#define FAILS(call, err) cr_assert_eq((call), (rzcu_result)(err), "%s", #call)

/* cuInit, then the primary context of device 0 retained and made current. */
rzcu_context primary_current(void);
/* cuMemGetInfo's free bytes. */
size_t free_bytes(void);

/* A gate a host function blocks on until the test opens it. */
struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int open, entered;
};
#define GATE_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0}
void gate_wait_fn(void *arg);
void gate_open(struct gate *g);
void gate_await_entered(struct gate *g);

void set_flag_fn(void *arg);
int get_flag(int *f);

/* Batched-copy attributes with this source access order. */
rzcu_memcpy_attributes attr_order(unsigned order);

#define WORKER_PREFIX "cuda-emu-s"
/* Threads of this process whose name starts with the worker prefix. */
int count_worker_threads(void);

/* A function of a freshly loaded module (its kernel: cuda_emu_kernel_<name> of the test executable). */
rzcu_function get_kernel(const char *name);

#endif /* REDZONE_EMU_TEST_UTIL_H */
