/*
 * The exported state block `__redzone_state`: one symbol from which a debugger reads options, counters,
 * the zone registry and the last scan's violations straight out of memory (live process or core file),
 * without running code in the program. Its layout is part of the interface with the gdb plugin, pinned
 * here; any change bumps RZ_STATE_VERSION.
 */
#include "common.h"
#include "state.h"
#include "options.h"

RZ_EXPORT rz_state_t __redzone_state = {
    .magic = RZ_STATE_MAGIC,
    .version = RZ_STATE_VERSION,
    .size = sizeof(rz_state_t),
    .trace_idx = RZ_INDEX_NONE,
    .fill = RZ_FILL_DEFAULT,
    .log_fd = 2,
    .chunk_shift = RZ_CHUNK_SHIFT,
    .node_size = sizeof(rz_zone_node_t),
    .off_ptr = offsetof(rz_zone_node_t, ptr),
    .off_user_bytes = offsetof(rz_zone_node_t, user_bytes),
    .off_index = offsetof(rz_zone_node_t, index),
    .off_ctx = offsetof(rz_zone_node_t, ctx),
    .off_pad_bytes = offsetof(rz_zone_node_t, pad_bytes),
    .off_next = offsetof(rz_zone_node_t, next),
    .off_expected = offsetof(rz_zone_node_t, expected),
    .off_state = offsetof(rz_zone_node_t, state),
    .off_flags = offsetof(rz_zone_node_t, flags),
    .depot_shift = RZ_DEPOT_SHIFT,
};
extern rz_state_t rz__state __attribute__((alias("__redzone_state"), visibility("hidden")));


#define PIN(type, field, off) _Static_assert(offsetof(type, field) == (off), #type "." #field " moved")
PIN(rz_state_t, magic, 0);
PIN(rz_state_t, version, 8);
PIN(rz_state_t, size, 12);
PIN(rz_state_t, seq, 16);
PIN(rz_state_t, next_index, 24);
PIN(rz_state_t, pad_bytes, 32);
PIN(rz_state_t, min_idx, 40);
PIN(rz_state_t, trace_idx, 48);
PIN(rz_state_t, fill, 56);
PIN(rz_state_t, options_loaded, 57);
PIN(rz_state_t, poison_active, 58);
PIN(rz_state_t, driver_loaded, 59);
PIN(rz_state_t, log_fd, 60);
PIN(rz_state_t, poison_lo, 64);
PIN(rz_state_t, poison_hi, 72);
PIN(rz_state_t, counters, 80);
PIN(rz_state_t, chunks, 80 + 8 * RZ_NCOUNTERS);
PIN(rz_state_t, chunk_shift, 80 + 8 * RZ_NCOUNTERS + 8 * RZ_MAX_CHUNKS);
_Static_assert(offsetof(rz_state_t, lock) == offsetof(rz_state_t, last_violation_count) + 4, "lock word");
_Static_assert(offsetof(rz_state_t, depot_shift) == offsetof(rz_state_t, stack_depth) + 4, "stack block");
_Static_assert(offsetof(rz_state_t, stack_ids) == offsetof(rz_state_t, stack_depth) + 8, "stack block");
_Static_assert(offsetof(rz_state_t, depot_chunks) == offsetof(rz_state_t, stack_ids) + 8 * RZ_MAX_CHUNKS,
               "stack block");
_Static_assert(offsetof(rz_state_t, guard_live) == offsetof(rz_state_t, depot_chunks) + 8 * RZ_DEPOT_CHUNKS,
               "guard block follows the stacks");
_Static_assert(RZ_NCOUNTERS == 17, "counter list changed: bump RZ_STATE_VERSION and the gdb plugin");
PIN(rz_zone_node_t, ptr, 0);
PIN(rz_zone_node_t, user_bytes, 8);
PIN(rz_zone_node_t, index, 16);
PIN(rz_zone_node_t, ctx, 24);
PIN(rz_zone_node_t, pad_bytes, 32);
PIN(rz_zone_node_t, next, 36);
PIN(rz_zone_node_t, prev, 40);
PIN(rz_zone_node_t, hnext, 44);
PIN(rz_zone_node_t, expected, 48);
PIN(rz_zone_node_t, state, 49);
PIN(rz_zone_node_t, flags, 50);
PIN(rz_zone_node_t, front_units, 52);
_Static_assert(sizeof(rz_zone_node_t) == 56, "zone node size");
PIN(rz_violation_t, index, 0);
PIN(rz_violation_t, ptr, 8);
PIN(rz_violation_t, user_bytes, 16);
PIN(rz_violation_t, pad_bytes, 24);
PIN(rz_violation_t, first, 32);
PIN(rz_violation_t, last, 40);
PIN(rz_violation_t, changed, 48);
PIN(rz_violation_t, first_bad, 56);
PIN(rz_violation_t, expected, 57);
PIN(rz_violation_t, front, 58);
PIN(rz_violation_t, after_free, 59);
PIN(rz_qentry_t, base, 0); /* gdb/redzone_gdb/quarantine.py reads these */
PIN(rz_qentry_t, launch_seq, 48);
PIN(rz_qentry_t, alloc_stack, 56);
PIN(rz_qentry_t, fill, 64);
PIN(rz_qentry_t, byte, 66);
PIN(rz_qentry_t, flags, 67);
PIN(rz_quarantine_t, ring, 24);
PIN(rz_quarantine_t, count, 48);
PIN(rz_quarantine_t, bound, 72);
PIN(rz_quarantine_t, entry_size, 80);
PIN(rz_quarantine_t, byte, 84);
_Static_assert(sizeof(rz_quarantine_t) == 88, "the quarantine header's size");
_Static_assert(sizeof(rz_violation_t) == 64, "violation record size");
PIN(rz_refusal_t, index, 0);
PIN(rz_refusal_t, ptr, 8);
PIN(rz_refusal_t, user_bytes, 16);
PIN(rz_refusal_t, addr, 24);
PIN(rz_refusal_t, bytes, 32);
PIN(rz_refusal_t, first, 40);
PIN(rz_refusal_t, last, 48);
PIN(rz_refusal_t, result, 56);
PIN(rz_refusal_t, how, 60);
PIN(rz_refusal_t, entry, 64);
_Static_assert(sizeof(rz_refusal_t) == 112, "refusal record size");
PIN(rz_launches_t, magic, 0);
PIN(rz_launches_t, seq, 16);
PIN(rz_launches_t, scan_start, 24);
PIN(rz_launches_t, report_since, 32);
PIN(rz_launches_t, ring, 40);
_Static_assert(sizeof(struct rz_launch) == 72, "launch record size");
PIN(rz_agent_t, magic, 0);
PIN(rz_agent_t, version, 8);
PIN(rz_agent_t, size, 12);
PIN(rz_agent_t, request, 16);
PIN(rz_agent_t, answered, 20);
PIN(rz_agent_t, op, 24);
PIN(rz_agent_t, serving, 28);
PIN(rz_agent_t, arg0, 32);
PIN(rz_agent_t, arg1, 40);
PIN(rz_agent_t, result, 48);
PIN(rz_agent_t, tid, 56);
PIN(rz_agent_t, alive, 64);
PIN(rz_agent_t, out_truncated, 68);
PIN(rz_agent_t, out_len, 72);
PIN(rz_agent_t, abandoned, 76);
PIN(rz_agent_t, out, 80);
