/*
 * Memory pools of the emulated driver (emu_pool.c): the default pool of each device, pools made by
 * cuMemPoolCreate, and pools imported from another pool's shareable handle. What emu_alloc.c asks of them
 * when it allocates from a pool and frees pool memory.
 */
#ifndef REDZONE_EMU_POOL_H
#define REDZONE_EMU_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "cu.h"

/*
 * Before a stream-ordered allocation of bytes: pool is the pool asked for (NULL: the current pool of
 * stream_device, for cuMemAllocAsync). CUDA_ERROR_INVALID_VALUE for a handle that is no pool, a destroyed
 * pool or an imported one; CUDA_ERROR_OUT_OF_MEMORY when the pool's maxSize would be exceeded. On success
 * *device is the device whose memory it is and *out the pool (to pass to emu_pool_note_alloc).
 */
rzcu_result emu_pool_begin_alloc(rzcu_mem_pool pool, int stream_device, size_t bytes, int *device,
                                 rzcu_mem_pool *out);
/* The allocation at p of bytes was made from pool (counted as its used and reserved memory). */
void emu_pool_note_alloc(rzcu_mem_pool pool, rzcu_deviceptr p, size_t bytes);
/* p is being freed (cuMemFree or cuMemFreeAsync, its base checked): its pool's used memory goes down, the
 * memory stays reserved until a synchronisation above the release threshold or cuMemPoolTrimTo. */
void emu_pool_note_free(rzcu_deviceptr p);
/* p has imports outstanding (cuMemPoolImportPointer): this free is one importer's, which consumes it and
 * leaves the allocation alone (true); false when none. */
bool emu_pool_free_import(rzcu_deviceptr p);
/* Called at each stream, event or context synchronisation: pools above their release threshold release. */
void emu_pool_at_sync(void);

#endif /* REDZONE_EMU_POOL_H */
