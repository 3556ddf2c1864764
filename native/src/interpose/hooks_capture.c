/*
 * Stream capture, interposed only to be seen: every form of cuStreamBeginCapture and cuStreamEndCapture
 * goes to the driver untouched, and capture.c learns which captures are in progress, so the library asks
 * the driver whether a stream is capturing only while one is (capture.c says why that is enough).
 */
#include "hooks_capture.h"
#include "capture.h"
#include "device_ctx.h"
#include "hooks.h"

void rz__hooks_capture_arm(void) { rz__capture_all_reported(); }

/* Recorded before the driver begins it, so no launch in between takes the stream for one not capturing. */
#define BEGIN(per_thread, call)                                                                              \
    do {                                                                                                     \
        if (real == NULL)                                                                                    \
            return rz__hook_missing();                                                                       \
        rzcu_stream s_ = rz__stream_of(s, per_thread);                                                       \
        int added_ = rz__capture_beginning(s_);                                                              \
        rzcu_result r_ = call;                                                                               \
        if (r_ != RZCUDA_SUCCESS)                                                                            \
            rz__capture_not_begun(s_, added_);                                                               \
        return r_;                                                                                           \
    } while (0)

rzcu_result cuStreamBeginCapture(rzcu_stream s) {
    rzcu_fn_cuStreamBeginCapture *real = REAL(cuStreamBeginCapture);
    BEGIN(0, real(s));
}

rzcu_result cuStreamBeginCapture_ptsz(rzcu_stream s) {
    rzcu_fn_cuStreamBeginCapture *real = REAL(cuStreamBeginCapture_ptsz);
    BEGIN(1, real(s));
}

rzcu_result cuStreamBeginCapture_v2(rzcu_stream s, rzcu_capture_mode mode) {
    rzcu_fn_cuStreamBeginCapture_v2 *real = REAL(cuStreamBeginCapture_v2);
    BEGIN(0, real(s, mode));
}

rzcu_result cuStreamBeginCapture_v2_ptsz(rzcu_stream s, rzcu_capture_mode mode) {
    rzcu_fn_cuStreamBeginCapture_v2 *real = REAL(cuStreamBeginCapture_v2_ptsz);
    BEGIN(1, real(s, mode));
}

rzcu_result cuStreamBeginCaptureToGraph(rzcu_stream s, struct CUgraph_st *graph, struct CUgraphNode_st *const *deps,
                                        const struct CUgraphEdgeData_st *edge_data, size_t ndeps,
                                        rzcu_capture_mode mode) {
    rzcu_fn_cuStreamBeginCaptureToGraph *real = REAL(cuStreamBeginCaptureToGraph);
    BEGIN(0, real(s, graph, deps, edge_data, ndeps, mode));
}

rzcu_result cuStreamBeginCaptureToGraph_ptsz(rzcu_stream s, struct CUgraph_st *graph,
                                             struct CUgraphNode_st *const *deps,
                                             const struct CUgraphEdgeData_st *edge_data, size_t ndeps,
                                             rzcu_capture_mode mode) {
    rzcu_fn_cuStreamBeginCaptureToGraph *real = REAL(cuStreamBeginCaptureToGraph_ptsz);
    BEGIN(1, real(s, graph, deps, edge_data, ndeps, mode));
}

static rzcu_result end(rzcu_fn_cuStreamEndCapture *real, rzcu_stream s, int per_thread, struct CUgraph_st **graph) {
    if (real == NULL)
        return rz__hook_missing();
    rzcu_result r = real(s, graph);
    rz__capture_ended(rz__stream_of(s, per_thread));
    return r;
}

rzcu_result cuStreamEndCapture(rzcu_stream s, struct CUgraph_st **graph) {
    return end(REAL(cuStreamEndCapture), s, 0, graph);
}

rzcu_result cuStreamEndCapture_ptsz(rzcu_stream s, struct CUgraph_st **graph) {
    return end(REAL(cuStreamEndCapture_ptsz), s, 1, graph);
}
