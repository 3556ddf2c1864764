/*
 * A graph's nodes and memory: the graph handle table, the recorded operations of a graph, and graph
 * allocations (one per allocation node, shared by the allocation and free nodes that name it in graphs and
 * executables, released when the last such node goes). What the nodes mean: emu_capture.c and emu_graph.c.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "emu_graph.h"

#define MAX_GRAPHS ((size_t)1 << 16)

static struct emu_table graphs = EMU_TABLE_INIT("graph", struct CUgraph_st, MAX_GRAPHS);
static pthread_mutex_t gmem_mu = PTHREAD_MUTEX_INITIALIZER;
static struct emu_gmem *gmems; /* every graph allocation, under gmem_mu */
static atomic_ullong next_gmem_id = 1;

bool emu_graph_handles_init(void) { return emu_table_init(&graphs); }

struct CUgraph_st *emu_graph_handle_new(void) { return emu_table_new(&graphs); }

struct CUgraph_st *emu_graph_from_handle(struct CUgraph_st *h)
{
    struct CUgraph_st *g = emu_table_slot(&graphs, h);
    return g && atomic_load(&g->magic) == GRAPH_MAGIC ? g : NULL;
}

void emu_gmem_ref(struct emu_gmem *m)
{
    pthread_mutex_lock(&gmem_mu);
    m->refs++;
    pthread_mutex_unlock(&gmem_mu);
}

void emu_gmem_unref(struct emu_gmem *m)
{
    pthread_mutex_lock(&gmem_mu);
    bool last = --m->refs == 0;
    if (last)
        for (struct emu_gmem **l = &gmems; *l; l = &(*l)->next)
            if (*l == m) {
                *l = m->next;
                break;
            }
    pthread_mutex_unlock(&gmem_mu);
    if (last) {
        emu_mem_graph_release(m->p, m->id);
        free(m);
    }
}

struct emu_gmem *emu_gmem_by_id(uint64_t id)
{
    pthread_mutex_lock(&gmem_mu);
    struct emu_gmem *m = gmems;
    while (m && m->id != id)
        m = m->next;
    if (m)
        m->refs++;
    pthread_mutex_unlock(&gmem_mu);
    return m;
}

void emu_graph_clear(struct emu_graph *g)
{
    for (size_t i = 0; i < g->n; i++) {
        if (emu_is_memory_node(g->ops[i]))
            emu_gmem_unref(g->ops[i]->user_data);
        emu_free_op(g->ops[i]);
    }
    free(g->ops);
    *g = (struct emu_graph){0};
}

rzcu_result emu_gmem_alloc(struct CUctx_st *ctx, int device, size_t bytesize, struct emu_gmem **out)
{
    struct emu_gmem *m = calloc(1, sizeof *m);
    if (!m)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    m->id = atomic_fetch_add(&next_gmem_id, 1);
    rzcu_result r = emu_mem_graph_alloc(ctx, device, bytesize, m->id, &m->p);
    if (r != RZCUDA_SUCCESS) {
        free(m);
        return r;
    }
    pthread_mutex_lock(&gmem_mu);
    m->next = gmems;
    gmems = m;
    pthread_mutex_unlock(&gmem_mu);
    m->refs = 1;
    *out = m;
    return RZCUDA_SUCCESS;
}

bool emu_graph_count_exec(const struct emu_graph *g, int delta)
{
    pthread_mutex_lock(&gmem_mu);
    bool ok = true;
    for (size_t i = 0; i < g->n && ok; i++)
        if (g->ops[i]->kind == OP_GALLOC && delta > 0)
            ok = ((struct emu_gmem *)g->ops[i]->user_data)->execs == 0;
    for (size_t i = 0; i < g->n && ok; i++)
        if (g->ops[i]->kind == OP_GALLOC)
            ((struct emu_gmem *)g->ops[i]->user_data)->execs += delta;
    pthread_mutex_unlock(&gmem_mu);
    return ok;
}
