/*
 * An operation of a stream (struct op, emu_engine.h): made by the entry points that submit work, recorded by
 * capture, queued and run by the stream engine (emu_stream.c), and freed with what it owns.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "emu_engine.h"

struct op *emu_op_new(struct CUctx_st *ctx, enum op_kind kind)
{
    /* room for a dependency on every stream of the context; sized again under ctx->mu in emu_submit */
    pthread_mutex_lock(&ctx->mu);
    size_t n = ctx->nstreams + 1;
    pthread_mutex_unlock(&ctx->mu);
    struct op *op = calloc(1, sizeof *op + n * sizeof(struct dep));
    if (op) {
        op->kind = kind;
        op->ndeps = n; /* capacity until emu_submit */
    }
    return op;
}

void emu_free_op(struct op *op)
{
    for (size_t i = 0; op->items && i < op->nitems; i++)
        free(op->items[i].snapshot);
    free(op->items);
    free(op->kparams);
    free(op);
}
