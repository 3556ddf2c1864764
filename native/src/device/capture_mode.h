/*
 * The capture mode around the library's own driver calls (capture_mode.c).
 */
#ifndef REDZONE_CAPTURE_MODE_H
#define REDZONE_CAPTURE_MODE_H

#include "common.h"

/* Around the library's own allocation-family calls (cuMemAlloc, cuMemFree, cuMemHostRegister, ...): the
 * calling thread's capture mode relaxed, so no capture of the program's is refused or invalidated because of
 * them; end gives the program's mode back. Never around the program's own calls. */
rzcu_capture_mode rz__dev_relaxed_begin(void);

void rz__dev_relaxed_end(rzcu_capture_mode saved);

/* Around the library's own queries and synchronisations (its stream, its events, a program's stream it only
 * asks about, pointer attributes): potentially unsafe calls too, which a real driver refuses from a thread in
 * the global mode while another thread has a global capture (and from the capturing thread) and that capture
 * is lost. A section is counted, and a capture begun through the interposed entry points waits for the
 * sections in flight (capture.c): while no capture is in progress nothing is exchanged and none meets one;
 * while one is, the mode is relaxed as above. Nests. */
rzcu_capture_mode rz__dev_quiet_begin(void);

void rz__dev_quiet_end(rzcu_capture_mode saved);

#endif /* REDZONE_CAPTURE_MODE_H */
