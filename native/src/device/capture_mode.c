/*
 * The capture mode around the library's own driver calls (part of the device seam): relaxed sections for its
 * allocation-family calls, and quiet sections for its queries and synchronisations, so no capture of the
 * program's is refused or invalidated because of redzone's work.
 */
#include "common.h"
#include "capture_mode.h"
#include "capture.h"
#include "driver.h"

/*
 * The library's own potentially unsafe calls (allocating, freeing, page-locking or unlocking memory: the
 * family cuThreadExchangeStreamCaptureMode's documentation names) run with the calling thread's capture mode
 * relaxed. In the default global mode the driver refuses them while this thread has a capture of its own, or
 * any other thread one begun in the global mode, and invalidates that capture: the program's graph would be
 * lost only because redzone set up a buffer. They are not stream work, nothing of theirs belongs in a graph,
 * and what they make is the library's, so the relaxed mode (which the driver allows any thread) is right for
 * them. Two cheap driver calls around rare setup calls only (a buffer made or grown), never per launch; never
 * around the program's own calls, which get the driver's answer.
 */
#define MODE_UNCHANGED 0xffffffffu

rzcu_capture_mode rz__dev_relaxed_begin(void) {
    rzcu_capture_mode mode = RZCU_STREAM_CAPTURE_MODE_RELAXED;
    if (rz__drv.cuThreadExchangeStreamCaptureMode == NULL ||
        rz__drv.cuThreadExchangeStreamCaptureMode(&mode) != RZCUDA_SUCCESS)
        return MODE_UNCHANGED; /* an old driver: the call is made in the program's mode */
    return mode;
}

void rz__dev_relaxed_end(rzcu_capture_mode saved) {
    if (saved != MODE_UNCHANGED)
        rz__drv.cuThreadExchangeStreamCaptureMode(&saved); /* the program's mode back */
}

/*
 * The library's queries and synchronisations (band_io.c's band reads and writes on its own stream, the fill
 * events, the sync scans' stream queries, pointer attributes) are potentially unsafe calls too: a real driver
 * refuses another thread's cuEventQuery during a global capture and invalidates it. They are frequent (a
 * scan, a launch check), so they exchange nothing while no capture is in progress: each section is counted
 * and a capture waits for those in flight (capture.c). While one is, the mode is relaxed, which makes them legal:
 * none of them touches a capturing stream (the library's stream is its own; a program's stream is asked only
 * once cuStreamIsCapturing says it is not capturing) or an event recorded into a capture.
 */
#define QUIET_COUNTED 0xfffffffeu

rzcu_capture_mode rz__dev_quiet_begin(void) {
    if (rz__capture_quiet_enter())
        return QUIET_COUNTED;
    return rz__dev_relaxed_begin();
}

void rz__dev_quiet_end(rzcu_capture_mode saved) {
    if (saved != QUIET_COUNTED)
        rz__dev_relaxed_end(saved);
    rz__capture_quiet_leave();
}

