/*
 * Emulated libraries and their kernels (CUDA 12's context-independent loading): cuLibraryLoadData,
 * cuLibraryUnload, cuLibraryGetKernel, cuKernelGetFunction, cuKernelGetName. As with modules, the image is
 * never interpreted and a kernel is the program's host function `cuda_emu_kernel_<name>` (emu_module.c).
 *
 * cudart 12 and later launch library kernels by passing the CUkernel where a CUfunction goes, so a launch
 * accepts a kernel handle too and runs it in the stream's context; cuFuncGetName is not documented for such
 * handles, and here refuses them (CUDA_ERROR_INVALID_VALUE), which is the stricter of a real driver's
 * possible answers: callers must ask cuKernelGetName.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "emu_internal.h"

#define LIBRARY_MAGIC 0x4c494252u
#define KERNEL_MAGIC 0x4b45524eu
#define MAX_LIBRARIES ((size_t)1 << 16)
#define MAX_KERNELS ((size_t)1 << 20)

struct lib_module { /* the module a library has in one context activation (cuKernelGetFunction) */
    struct CUctx_st *ctx;
    unsigned gen;
    rzcu_module mod;
};

struct CUlib_st {
    _Atomic uint32_t magic; /* LIBRARY_MAGIC while loaded */
    pthread_mutex_t mu;
    struct CUkern_st **kernels; /* handed out, so a name maps to one handle */
    size_t nkernels, cap;
    struct lib_module *mods;
    size_t nmods, mods_cap;
};

struct CUkern_st {
    _Atomic uint32_t magic; /* KERNEL_MAGIC while its library is loaded */
    struct CUlib_st *lib;
    char *name;
    cuda_emu_kernel_fn *fn;
    const size_t *sizes;
    size_t nparams;
};

static struct emu_table libraries = EMU_TABLE_INIT("library", struct CUlib_st, MAX_LIBRARIES);
static struct emu_table kernels = EMU_TABLE_INIT("kernel", struct CUkern_st, MAX_KERNELS);

bool emu_libraries_init(void) { return emu_table_init(&libraries) && emu_table_init(&kernels); }

static struct CUlib_st *library_from_handle(rzcu_library h)
{
    struct CUlib_st *l = emu_table_slot(&libraries, h);
    return l && atomic_load(&l->magic) == LIBRARY_MAGIC ? l : NULL;
}

static struct CUkern_st *kernel_from_handle(rzcu_kernel h)
{
    struct CUkern_st *k = emu_table_slot(&kernels, h);
    return k && atomic_load(&k->magic) == KERNEL_MAGIC ? k : NULL;
}

rzcu_result emu_library_kernel_resolve(rzcu_kernel h, struct emu_kernel *out)
{
    struct CUkern_st *k = kernel_from_handle(h);
    if (!k)
        return RZCUDA_ERROR_INVALID_HANDLE;
    *out = (struct emu_kernel){k->fn, k->sizes, k->nparams, NULL};
    return RZCUDA_SUCCESS;
}

/* No context needed: a library belongs to the process. JIT and library options are accepted and ignored. */
EMU_API rzcu_result cuLibraryLoadData(rzcu_library *library, const void *code, void *jit_options,
                                      void **jit_option_values, unsigned int num_jit_options, void *library_options,
                                      void **library_option_values, unsigned int num_library_options)
{
    ENTER(cuLibraryLoadData);
    if (!library || !code || (num_jit_options && (!jit_options || !jit_option_values)) ||
        (num_library_options && (!library_options || !library_option_values)))
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUlib_st *l = emu_table_new(&libraries);
    if (!l)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_init(&l->mu, NULL);
    atomic_store(&l->magic, LIBRARY_MAGIC);
    *library = l;
    return RZCUDA_SUCCESS;
}

/* Its kernels become invalid handles, and so do the functions cuKernelGetFunction made of them. */
EMU_API rzcu_result cuLibraryUnload(rzcu_library library)
{
    ENTER(cuLibraryUnload);
    struct CUlib_st *l = library_from_handle(library);
    uint32_t expected = LIBRARY_MAGIC;
    if (!l || !atomic_compare_exchange_strong(&l->magic, &expected, 0))
        return RZCUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&l->mu);
    for (size_t i = 0; i < l->nkernels; i++)
        atomic_store(&l->kernels[i]->magic, 0); /* the name stays allocated: a stale handle never reads it */
    for (size_t i = 0; i < l->nmods; i++)
        if (emu_context_live(l->mods[i].ctx, l->mods[i].gen))
            emu_module_unload(l->mods[i].mod);
    pthread_mutex_unlock(&l->mu);
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuLibraryGetKernel(rzcu_kernel *pkernel, rzcu_library library, const char *name)
{
    ENTER(cuLibraryGetKernel);
    if (!pkernel || !name)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUlib_st *l = library_from_handle(library);
    if (!l)
        return RZCUDA_ERROR_INVALID_HANDLE;
    cuda_emu_kernel_fn *fn;
    const size_t *sizes;
    size_t n;
    CHECK(emu_kernel_lookup(name, &fn, &sizes, &n));
    rzcu_result r = RZCUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&l->mu);
    struct CUkern_st *k = NULL;
    for (size_t i = 0; i < l->nkernels && !k; i++)
        if (strcmp(l->kernels[i]->name, name) == 0)
            k = l->kernels[i];
    if (!k && l->nkernels == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        struct CUkern_st **v = realloc(l->kernels, cap * sizeof *v);
        if (v) {
            l->kernels = v;
            l->cap = cap;
        }
    }
    char *copy = k || l->nkernels == l->cap ? NULL : strdup(name);
    if (!k && copy && (k = emu_table_new(&kernels)) != NULL) {
        *k = (struct CUkern_st){.lib = l, .name = copy, .fn = fn, .sizes = sizes, .nparams = n};
        atomic_store(&k->magic, atomic_load(&l->magic) == LIBRARY_MAGIC ? KERNEL_MAGIC : 0);
        l->kernels[l->nkernels++] = k;
        copy = NULL;
    }
    free(copy);
    if (k && atomic_load(&k->magic) == KERNEL_MAGIC) {
        *pkernel = k;
        r = RZCUDA_SUCCESS;
    } else if (k) {
        r = RZCUDA_ERROR_INVALID_HANDLE; /* unloaded meanwhile */
    }
    pthread_mutex_unlock(&l->mu);
    return r;
}

/* The kernel as a function of the current context: its library gets one module per context activation. */
EMU_API rzcu_result cuKernelGetFunction(rzcu_function *pfunc, rzcu_kernel kernel)
{
    ENTER_CTX(cuKernelGetFunction, c);
    if (!pfunc)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUkern_st *k = kernel_from_handle(kernel);
    if (!k)
        return RZCUDA_ERROR_INVALID_HANDLE;
    struct CUlib_st *l = k->lib;
    unsigned gen = emu_context_gen(c);
    pthread_mutex_lock(&l->mu);
    rzcu_module mod = NULL;
    for (size_t i = 0; i < l->nmods && !mod; i++)
        if (l->mods[i].ctx == c && l->mods[i].gen == gen)
            mod = l->mods[i].mod;
    rzcu_result r = RZCUDA_SUCCESS;
    if (!mod) {
        if (l->nmods == l->mods_cap) {
            size_t cap = l->mods_cap ? 2 * l->mods_cap : 4;
            struct lib_module *v = realloc(l->mods, cap * sizeof *v);
            if (v) {
                l->mods = v;
                l->mods_cap = cap;
            }
        }
        r = l->nmods < l->mods_cap ? emu_module_new(c, &mod) : RZCUDA_ERROR_OUT_OF_MEMORY;
        if (r == RZCUDA_SUCCESS)
            l->mods[l->nmods++] = (struct lib_module){c, gen, mod};
    }
    pthread_mutex_unlock(&l->mu);
    if (r != RZCUDA_SUCCESS)
        return r;
    return emu_module_get_function(pfunc, mod, k->name);
}

EMU_API rzcu_result cuKernelGetName(const char **name, rzcu_kernel hfunc)
{
    ENTER(cuKernelGetName);
    if (!name || !hfunc)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUkern_st *k = kernel_from_handle(hfunc);
    if (!k)
        return RZCUDA_ERROR_INVALID_VALUE;
    *name = k->name;
    return RZCUDA_SUCCESS;
}

/* A function handle, or a CUkernel cast to CUfunction (as cudart 12 launches library kernels). */
rzcu_result emu_function_resolve(rzcu_function h, struct emu_kernel *out)
{
    if (emu_module_function_resolve(h, out) == RZCUDA_SUCCESS)
        return RZCUDA_SUCCESS;
    return emu_library_kernel_resolve((rzcu_kernel)(void *)h, out);
}
