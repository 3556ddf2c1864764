/*
 * This thread's state: the one thread-local record (thread_state.h).
 */
#include "thread_state.h"

RZ_TLS rz_thread_state_t rz__thread;
