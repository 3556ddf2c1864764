/*
 * Fork: one pthread_atfork registration for the whole library (made at the first rz__fork_register, so as
 * lazily as the first module that needs it), and the handlers of every module run from it in pthread_atfork's
 * order: prepare in reverse registration order, parent and child in registration order. Relative to the
 * program's own handlers, the library's now run together, where its first registration was.
 *
 * No lock is held across the fork: a handler is written into its slot before the count that publishes it,
 * and a fork runs the handlers counted when it prepared (a registration racing the fork is in the child, or
 * not, whole). The writers' lock is re-made in the child (another thread may have held it).
 */
#include <stdlib.h>
#include <unistd.h>

#include "fork.h"

#define RZ_FORK_MAX 16

static struct {
    void (*prepare)(void), (*parent)(void), (*child)(void);
} g_handlers[RZ_FORK_MAX];
static _Atomic size_t g_count;
static size_t g_forking; /* the count the prepare handlers ran for: the parent and child run as many */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void prepare(void) {
    g_forking = atomic_load_explicit(&g_count, memory_order_acquire);
    for (size_t i = g_forking; i-- > 0;)
        if (g_handlers[i].prepare)
            g_handlers[i].prepare();
}

static void parent(void) {
    for (size_t i = 0; i < g_forking; i++)
        if (g_handlers[i].parent)
            g_handlers[i].parent();
}

static void child(void) {
    pthread_mutex_init(&g_lock, NULL);
    for (size_t i = 0; i < g_forking; i++)
        if (g_handlers[i].child)
            g_handlers[i].child();
}

static void arm(void) { pthread_atfork(prepare, parent, child); }

void rz__fork_register(void (*prepare_fn)(void), void (*parent_fn)(void), void (*child_fn)(void)) {
    pthread_once(&g_once, arm);
    pthread_mutex_lock(&g_lock);
    size_t n = atomic_load_explicit(&g_count, memory_order_relaxed);
    if (RZ_UNLIKELY(n >= RZ_FORK_MAX)) { /* a module too many: the library's own bug, not the program's */
        static const char msg[] = "redzone: internal error: more fork handlers than RZ_FORK_MAX\n";
        (void)!write(2, msg, sizeof msg - 1);
        abort();
    }
    g_handlers[n].prepare = prepare_fn;
    g_handlers[n].parent = parent_fn;
    g_handlers[n].child = child_fn;
    atomic_store_explicit(&g_count, n + 1, memory_order_release);
    pthread_mutex_unlock(&g_lock);
}
