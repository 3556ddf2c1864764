/*
 * The driver's sticky error (sticky.c).
 */
#ifndef REDZONE_STICKY_H
#define REDZONE_STICKY_H

#include "common.h"

/* r is one of cu.h's RZCU_STICKY_RESULTS: after it every CUDA call in the process fails (cuda.h). */
int rz__cu_sticky(rzcu_result r);

/* Note a result of the library's own driver call (a sticky one is kept, the first); returns r. */
rzcu_result rz__sticky_note(rzcu_result r);

/* The sticky error noted, or CUDA_SUCCESS: then the library does no more device work of its own. */
rzcu_result rz__sticky(void);


#endif /* REDZONE_STICKY_H */
