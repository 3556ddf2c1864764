/*
 * Graphs as the emulator keeps them, shared by capture (emu_capture.c, which records them), their nodes and
 * memory (emu_graph_nodes.c) and their executables (emu_graph.c). Internal to the emulator.
 */
#ifndef REDZONE_EMU_GRAPH_H
#define REDZONE_EMU_GRAPH_H

#include "emu_engine.h"

#define GRAPH_MAGIC 0x47525048u

struct emu_graph {
    struct op **ops;
    size_t n, cap;
};

struct CUgraph_st {
    _Atomic uint32_t magic;
    struct emu_graph g;
};

/* One graph allocation, shared by the allocation and free nodes that name it (op->user_data), in graphs and
 * executables: released when the last such node goes. */
struct emu_gmem {
    struct emu_gmem *next;
    rzcu_deviceptr p;
    uint64_t id;
    int refs;  /* nodes naming it; under gmem_mu */
    int execs; /* executables of its allocating graph; under gmem_mu */
};


static inline bool emu_is_memory_node(const struct op *op) { return op->kind == OP_GALLOC || op->kind == OP_GFREE; }

/* ---- graph handles (emu_graph_nodes.c) ---- */
bool emu_graph_handles_init(void);
/* A new slot of the graph table (its handle is valid once its magic is set), NULL when full. */
struct CUgraph_st *emu_graph_handle_new(void);
/* A live graph handle, or NULL. */
struct CUgraph_st *emu_graph_from_handle(struct CUgraph_st *h);
/* Frees the graph's nodes (their references to graph allocations with them). */
void emu_graph_clear(struct emu_graph *g);

/* ---- graph allocations (emu_graph_nodes.c) ---- */
/* A new graph allocation of `device` (id fresh, one reference: the caller's). */
rzcu_result emu_gmem_alloc(struct CUctx_st *ctx, int device, size_t bytesize, struct emu_gmem **out);
void emu_gmem_ref(struct emu_gmem *m);
/* The last reference gone: the allocation goes back to device memory (emu_mem_graph_release). */
void emu_gmem_unref(struct emu_gmem *m);
/* The graph allocation with this id, with a reference taken; NULL when none. */
struct emu_gmem *emu_gmem_by_id(uint64_t id);
/* Count (delta +1) or uncount (-1) an executable of the graph whose nodes are g's, for each allocation it
 * makes; with +1, fails (changing nothing) when one already has an executable. */
bool emu_graph_count_exec(const struct emu_graph *g, int delta);

#endif /* REDZONE_EMU_GRAPH_H */
