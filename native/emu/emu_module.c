/*
 * Emulated modules and kernels (see cuda_emu.h): a module is a handle in a context; a function is the host
 * implementation `cuda_emu_kernel_<name>` found with dlsym(RTLD_DEFAULT), with its parameter size table
 * `cuda_emu_kernel_<name>_params`. A launch resolves its function (or a library's kernel) with
 * emu_function_resolve, in emu_library.c.
 *
 * Handle errors follow each entry point's documented result codes: cuModuleUnload, cuModuleGetFunction and
 * cuFuncGetName list CUDA_ERROR_INVALID_VALUE (not INVALID_HANDLE) for a bad argument, launches list
 * CUDA_ERROR_INVALID_HANDLE.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "emu_internal.h"

#define MODULE_MAGIC 0x4d4f4455u
#define FUNC_MAGIC 0x46554e43u
#define MAX_MODULES ((size_t)1 << 16)
#define MAX_FUNCTIONS ((size_t)1 << 20)
#define MAX_PARAMS 4096 /* a parameter table without its 0 within this many entries is malformed */

struct CUmod_st {
    _Atomic uint32_t magic; /* MODULE_MAGIC while loaded */
    struct CUctx_st *ctx;
    unsigned gen;
    pthread_mutex_t mu;
    struct CUfunc_st **funcs; /* functions handed out, so a name maps to one handle */
    size_t nfuncs, cap;
};

struct CUfunc_st {
    _Atomic uint32_t magic; /* FUNC_MAGIC */
    struct CUmod_st *mod;
    char *name;
    cuda_emu_kernel_fn *fn;
    const size_t *sizes;
    size_t nparams;
};

static struct emu_table modules = EMU_TABLE_INIT("module", struct CUmod_st, MAX_MODULES);
static struct emu_table functions = EMU_TABLE_INIT("function", struct CUfunc_st, MAX_FUNCTIONS);

bool emu_modules_init(void) { return emu_table_init(&modules) && emu_table_init(&functions); }

/* A loaded module whose context is still alive in the activation it was loaded in. */
static struct CUmod_st *module_from_handle(rzcu_module h)
{
    struct CUmod_st *m = emu_table_slot(&modules, h);
    if (!m || atomic_load(&m->magic) != MODULE_MAGIC || !emu_context_live(m->ctx, m->gen))
        return NULL;
    return m;
}

static struct CUfunc_st *function_from_handle(rzcu_function h)
{
    struct CUfunc_st *f = emu_table_slot(&functions, h);
    if (!f || atomic_load(&f->magic) != FUNC_MAGIC || !module_from_handle(f->mod))
        return NULL;
    return f;
}

rzcu_result emu_module_function_resolve(rzcu_function h, struct emu_kernel *out)
{
    struct CUfunc_st *f = function_from_handle(h);
    if (!f)
        return RZCUDA_ERROR_INVALID_HANDLE;
    *out = (struct emu_kernel){f->fn, f->sizes, f->nparams, f->mod->ctx};
    return RZCUDA_SUCCESS;
}

rzcu_result emu_module_new(struct CUctx_st *c, rzcu_module *pmod)
{
    struct CUmod_st *m = emu_table_new(&modules);
    if (!m)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    m->ctx = c;
    m->gen = emu_context_gen(c);
    pthread_mutex_init(&m->mu, NULL);
    atomic_store(&m->magic, MODULE_MAGIC);
    *pmod = m;
    return RZCUDA_SUCCESS;
}

rzcu_result emu_module_unload(rzcu_module hmod)
{
    struct CUmod_st *m = module_from_handle(hmod);
    if (!m)
        return RZCUDA_ERROR_INVALID_VALUE;
    uint32_t expected = MODULE_MAGIC;
    if (!atomic_compare_exchange_strong(&m->magic, &expected, 0))
        return RZCUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->nfuncs; i++)
        atomic_store(&m->funcs[i]->magic, 0); /* the name stays allocated: a stale handle never reads it */
    pthread_mutex_unlock(&m->mu);
    return RZCUDA_SUCCESS;
}

rzcu_result emu_kernel_lookup(const char *name, cuda_emu_kernel_fn **fn_out, const size_t **sizes_out, size_t *n_out)
{
    size_t len = strlen(name);
    char *sym = malloc(sizeof CUDA_EMU_KERNEL_PREFIX + len + sizeof CUDA_EMU_KERNEL_PARAMS_SUFFIX);
    if (!sym)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    sprintf(sym, "%s%s", CUDA_EMU_KERNEL_PREFIX, name);
    void *fn = *name ? dlsym(RTLD_DEFAULT, sym) : NULL;
    strcat(sym, CUDA_EMU_KERNEL_PARAMS_SUFFIX);
    const size_t *sizes = fn ? dlsym(RTLD_DEFAULT, sym) : NULL;
    free(sym);
    if (!fn && *name && emu_twin_lookup(name, fn_out, sizes_out, n_out))
        return RZCUDA_SUCCESS; /* a kernel of the library's own module (emu_twins.c) */
    if (!fn)
        return RZCUDA_ERROR_NOT_FOUND;
    size_t n = 0;
    if (sizes) {
        while (n < MAX_PARAMS && sizes[n])
            n++;
        if (n == MAX_PARAMS) {
            fprintf(stderr, "cuda-emu: warning: %s%s%s has no terminating 0; kernel not loaded\n",
                    CUDA_EMU_KERNEL_PREFIX, name, CUDA_EMU_KERNEL_PARAMS_SUFFIX);
            return RZCUDA_ERROR_NOT_FOUND;
        }
    }
    *fn_out = (cuda_emu_kernel_fn *)(uintptr_t)fn;
    *sizes_out = sizes;
    *n_out = n;
    return RZCUDA_SUCCESS;
}

/* The image is not interpreted: any non-NULL pointer loads (an empty module whose kernels are the program's). */
EMU_API rzcu_result cuModuleLoadData(rzcu_module *pmod, const void *image)
{
    ENTER_CTX(cuModuleLoadData, c);
    if (!pmod || !image)
        return RZCUDA_ERROR_INVALID_VALUE;
    return emu_module_new(c, pmod);
}

/* Its functions become invalid handles. Kernels already queued still run (their code is the program's). */
EMU_API rzcu_result cuModuleUnload(rzcu_module hmod)
{
    ENTER_CTX(cuModuleUnload, c);
    return emu_module_unload(hmod);
}

EMU_API rzcu_result cuModuleGetFunction(rzcu_function *pf, rzcu_module hmod, const char *name)
{
    ENTER_CTX(cuModuleGetFunction, c);
    if (!pf || !name)
        return RZCUDA_ERROR_INVALID_VALUE;
    return emu_module_get_function(pf, hmod, name);
}

rzcu_result emu_module_get_function(rzcu_function *pf, rzcu_module hmod, const char *name)
{
    struct CUmod_st *m = module_from_handle(hmod);
    if (!m)
        return RZCUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->nfuncs; i++)
        if (strcmp(m->funcs[i]->name, name) == 0) {
            *pf = m->funcs[i];
            pthread_mutex_unlock(&m->mu);
            return RZCUDA_SUCCESS;
        }
    pthread_mutex_unlock(&m->mu);

    cuda_emu_kernel_fn *fn;
    const size_t *sizes;
    size_t n;
    CHECK(emu_kernel_lookup(name, &fn, &sizes, &n));

    pthread_mutex_lock(&m->mu);
    rzcu_result r = RZCUDA_ERROR_OUT_OF_MEMORY;
    struct CUfunc_st *f = NULL;
    for (size_t i = 0; i < m->nfuncs && !f; i++) /* another thread may have added it meanwhile */
        if (strcmp(m->funcs[i]->name, name) == 0)
            f = m->funcs[i];
    if (!f && m->nfuncs == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 8;
        struct CUfunc_st **v = realloc(m->funcs, cap * sizeof *v);
        if (v) {
            m->funcs = v;
            m->cap = cap;
        }
    }
    char *copy = f || m->nfuncs == m->cap ? NULL : strdup(name);
    if (!f && copy && (f = emu_table_new(&functions)) != NULL) {
        f->mod = m;
        f->name = copy;
        f->fn = fn;
        f->sizes = sizes;
        f->nparams = n;
        atomic_store(&f->magic, atomic_load(&m->magic) == MODULE_MAGIC ? FUNC_MAGIC : 0);
        m->funcs[m->nfuncs++] = f;
        copy = NULL;
    }
    free(copy);
    if (f && atomic_load(&f->magic) == FUNC_MAGIC) {
        *pf = f;
        r = RZCUDA_SUCCESS;
    } else if (f) {
        r = RZCUDA_ERROR_INVALID_VALUE; /* unloaded meanwhile */
    }
    pthread_mutex_unlock(&m->mu);
    return r;
}

/* The name given to cuModuleGetFunction; valid while the function handle is. */
EMU_API rzcu_result cuFuncGetName(const char **name, rzcu_function hfunc)
{
    ENTER(cuFuncGetName);
    if (!name || !hfunc)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUfunc_st *f = function_from_handle(hfunc);
    if (!f)
        return RZCUDA_ERROR_INVALID_VALUE;
    *name = f->name;
    return RZCUDA_SUCCESS;
}
