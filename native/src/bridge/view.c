/*
 * libredzone-view.so: the library's decoding and formatting, for a debugger. The gdb plugin loads it with
 * ctypes and hands it raw bytes read from the program (the state block, registry nodes, violation records),
 * so the lines gdb shows are byte-identical to the library's own. Built from format.c and this file only:
 * no state, no constructors, no interposed symbols, nothing that touches a driver.
 */
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "elf_symbols.h"
#include "format.h"
#include "state.h"

#define VIEW RZ_EXPORT

/* The view's interface (ctypes is its only caller). */
VIEW size_t rzv_offset(const char *field);
VIEW size_t rzv_size(const char *what);
VIEW int rzv_check_state(const void *bytes);
VIEW int rzv_check_agent(const void *bytes);
VIEW size_t rzv_counters(const void *state_bytes, int json, char *out, size_t cap);
VIEW size_t rzv_zone_header(char *out, size_t cap);
VIEW int rzv_zone_fields(const void *node_bytes, uint64_t *index, uint32_t *next, int *violated, int *watched);
VIEW size_t rzv_zone_row(const void *node_bytes, int json, char *out, size_t cap);
VIEW size_t rzv_violation(const void *bytes, char *out, size_t cap);
VIEW size_t rzv_refusal(const void *bytes, char *out, size_t cap);
typedef const void *(*rzv_chunk_fn)(uint32_t chunk);
VIEW int rzv_list(const void *state_bytes, rzv_chunk_fn chunk, uint64_t from, uint64_t to, uint64_t limit,
                  int violated_only, int json, char *out, size_t cap, uint64_t *shown, uint64_t *total,
                  size_t *used, uint32_t *ids, size_t ids_cap);
/* One band a debugger's memory scan reads (rzv_bands). */
typedef struct rzv_band {
    uint64_t addr;
    uint64_t bytes;
    uint64_t index;
    uint32_t id1; /* node id + 1 */
    uint8_t front;
    uint8_t expected;
    uint8_t flags;
    uint8_t reserved;
} rzv_band_t;
VIEW int rzv_bands(const void *state_bytes, rzv_chunk_fn chunk, rzv_band_t *out, size_t cap, size_t *n,
                   uint64_t *checked, uint64_t *pending);
VIEW int rzv_judge(const void *node_bytes, const uint8_t *band, uint64_t bytes, int front, void *record, char *line,
                   size_t cap);
VIEW size_t rzv_launch_candidates(const void *launches_bytes, uint64_t since, uint64_t index, char *out, size_t cap);
VIEW int rzv_check_launches(const void *bytes);
VIEW int rzv_window_byte(const void *state_bytes, uint64_t index);
VIEW size_t rzv_frame(int k, uint64_t addr, const char *path, uint64_t base, const char *name, int *ours, char *out,
                      size_t cap);
/* The `copy past the end of alloc#N` line from a refusal record (__redzone_refused's argument). */
VIEW size_t rzv_refusal(const void *bytes, char *out, size_t cap) {
    rz_refusal_t r;
    memcpy(&r, bytes, sizeof r);
    return rz__format_refusal(&r, rz__cu_result_name(r.result), out, cap);
}

VIEW size_t rzv_scan_summary(uint64_t checked, uint64_t violated, char *out, size_t cap);
VIEW const char *rzv_status_name(int status);

/* Layout facts, so the plugin never hard-codes an offset. */
VIEW size_t rzv_offset(const char *field) {
#define F(name, type, member)                                                                                \
    if (strcmp(field, name) == 0)                                                                            \
        return offsetof(type, member);
    F("state.magic", rz_state_t, magic)
    F("state.version", rz_state_t, version)
    F("state.size", rz_state_t, size)
    F("state.seq", rz_state_t, seq)
    F("state.next_index", rz_state_t, next_index)
    F("state.pad_bytes", rz_state_t, pad_bytes)
    F("state.min_idx", rz_state_t, min_idx)
    F("state.trace_idx", rz_state_t, trace_idx)
    F("state.fill", rz_state_t, fill)
    F("state.options_loaded", rz_state_t, options_loaded)
    F("state.poison_active", rz_state_t, poison_active)
    F("state.driver_loaded", rz_state_t, driver_loaded)
    F("state.log_fd", rz_state_t, log_fd)
    F("state.poison_lo", rz_state_t, poison_lo)
    F("state.poison_hi", rz_state_t, poison_hi)
    F("state.counters", rz_state_t, counters)
    F("state.chunks", rz_state_t, chunks)
    F("state.head", rz_state_t, head)
    F("state.zone_count", rz_state_t, zone_count)
    F("state.last_scan_checked", rz_state_t, last_scan_checked)
    F("state.last_scan_violated", rz_state_t, last_scan_violated)
    F("state.last_violation_count", rz_state_t, last_violation_count)
    F("state.last_violations", rz_state_t, last_violations)
    F("state.stack_depth", rz_state_t, stack_depth)
    F("state.depot_shift", rz_state_t, depot_shift)
    F("state.stack_ids", rz_state_t, stack_ids)
    F("state.depot_chunks", rz_state_t, depot_chunks)
    F("state.guard_live", rz_state_t, guard_live)
    F("state.guard_bytes", rz_state_t, guard_bytes)
    F("state.guard_cap", rz_state_t, guard_cap)
    F("state.lock", rz_state_t, lock)
    F("launches.seq", rz_launches_t, seq)
    F("launches.scan_start", rz_launches_t, scan_start)
    F("launches.report_since", rz_launches_t, report_since)
    F("agent.magic", rz_agent_t, magic)
    F("agent.request", rz_agent_t, request)
    F("agent.answered", rz_agent_t, answered)
    F("agent.op", rz_agent_t, op)
    F("agent.serving", rz_agent_t, serving)
    F("agent.arg0", rz_agent_t, arg0)
    F("agent.arg1", rz_agent_t, arg1)
    F("agent.result", rz_agent_t, result)
    F("agent.tid", rz_agent_t, tid)
    F("agent.alive", rz_agent_t, alive)
    F("agent.out_truncated", rz_agent_t, out_truncated)
    F("agent.out_len", rz_agent_t, out_len)
    F("agent.abandoned", rz_agent_t, abandoned)
    F("agent.out", rz_agent_t, out)
    F("node.next", rz_zone_node_t, next)
    F("node.expected", rz_zone_node_t, expected)
    F("node.flags", rz_zone_node_t, flags)
    F("node.index", rz_zone_node_t, index)
    F("refusal.how", rz_refusal_t, how)
#undef F
    return (size_t)-1;
}

VIEW size_t rzv_size(const char *what) {
    if (strcmp(what, "state") == 0)
        return sizeof(rz_state_t);
    if (strcmp(what, "agent.header") == 0)
        return offsetof(rz_agent_t, out);
    if (strcmp(what, "node") == 0)
        return sizeof(rz_zone_node_t);
    if (strcmp(what, "chunk") == 0)
        return sizeof(rz_zone_node_t) * RZ_CHUNK_NODES;
    if (strcmp(what, "chunk_shift") == 0)
        return RZ_CHUNK_SHIFT;
    if (strcmp(what, "max_chunks") == 0)
        return RZ_MAX_CHUNKS;
    if (strcmp(what, "depot_chunks") == 0)
        return RZ_DEPOT_CHUNKS;
    if (strcmp(what, "violation") == 0)
        return sizeof(rz_violation_t);
    if (strcmp(what, "refusal") == 0)
        return sizeof(rz_refusal_t);
    if (strcmp(what, "counters") == 0)
        return RZ_NCOUNTERS;
    if (strcmp(what, "launches") == 0)
        return sizeof(rz_launches_t);
    if (strcmp(what, "band") == 0)
        return sizeof(rzv_band_t);
    if (strcmp(what, "flag.violated") == 0)
        return RZ_ZONE_VIOLATED;
    if (strcmp(what, "flag.pending") == 0)
        return RZ_ZONE_PENDING;
    return 0;
}

/* 0: a state block this view understands; -1 bad magic, -2 other version, -3 other size. */
VIEW int rzv_check_state(const void *bytes) {
    rz_state_t head;
    memcpy(&head, bytes, offsetof(rz_state_t, seq));
    if (head.magic != RZ_STATE_MAGIC)
        return -1;
    if (head.version != RZ_STATE_VERSION)
        return -2;
    if (head.size != sizeof(rz_state_t))
        return -3;
    return 0;
}

VIEW int rzv_check_agent(const void *bytes) {
    rz_agent_t head;
    memcpy(&head, bytes, offsetof(rz_agent_t, request));
    if (head.magic != RZ_AGENT_MAGIC)
        return -1;
    if (head.version != RZ_AGENT_VERSION)
        return -2;
    return head.size == sizeof(rz_agent_t) ? 0 : -3;
}

VIEW size_t rzv_counters(const void *state_bytes, int json, char *out, size_t cap) {
    uint64_t c[RZ_NCOUNTERS];
    memcpy(c, (const char *)state_bytes + offsetof(rz_state_t, counters), sizeof c);
    return json ? rz__format_counters_json(c, out, cap) : rz__format_counters(c, out, cap);
}

VIEW size_t rzv_zone_header(char *out, size_t cap) { return rz__format_zone_header(out, cap); }

/* Decode one node: returns its state (0 unused), and the fields list and poison filters need. */
VIEW int rzv_zone_fields(const void *node_bytes, uint64_t *index, uint32_t *next, int *violated, int *watched) {
    rz_zone_node_t z;
    memcpy(&z, node_bytes, sizeof z);
    *index = z.index;
    *next = z.next;
    *violated = (z.flags & RZ_ZONE_VIOLATED) != 0;
    *watched = rz__zone_watched(&z);
    return z.state;
}

VIEW size_t rzv_zone_row(const void *node_bytes, int json, char *out, size_t cap) {
    rz_zone_node_t z;
    memcpy(&z, node_bytes, sizeof z);
    return json ? rz__format_zone_json(&z, out, cap) : rz__format_zone_row(&z, out, cap);
}

/* A walk over the zone list of a state snapshot, in index order, reading node chunks through the caller's
 * callback (one chunk kept at a time). */
typedef struct walk {
    const rz_state_t *st;
    rzv_chunk_fn chunk;
    const uint8_t *cached;
    uint32_t cached_chunk;
    uint32_t next; /* node id + 1 of the next zone, 0 at the end */
    uint64_t seen;
} walk_t;

static void walk_start(walk_t *w, const rz_state_t *st, rzv_chunk_fn chunk, uint32_t first) {
    *w = (walk_t){.st = st, .chunk = chunk, .cached_chunk = UINT32_MAX, .next = first};
}

/* The next zone into *z and its node id + 1 into *id1: 1, 0 at the end, -1 torn (longer than its count),
 * -2 a chunk unreadable. */
static int walk_next(walk_t *w, rz_zone_node_t *z, uint32_t *id1) {
    if (!w->next)
        return 0;
    if (++w->seen > w->st->zone_count + 1)
        return -1;
    uint32_t id = w->next - 1, c = id >> RZ_CHUNK_SHIFT;
    if (c != w->cached_chunk) {
        w->cached = c < RZ_MAX_CHUNKS ? w->chunk(c) : NULL;
        w->cached_chunk = c;
    }
    if (w->cached == NULL)
        return -2;
    memcpy(z, w->cached + (size_t)(id & (RZ_CHUNK_NODES - 1)) * sizeof *z, sizeof *z);
    *id1 = w->next;
    w->next = z->next;
    return 1;
}

static int read_node(rzv_chunk_fn chunk, uint32_t id1, rz_zone_node_t *out) {
    uint32_t id = id1 - 1, c = id >> RZ_CHUNK_SHIFT;
    const uint8_t *bytes = c < RZ_MAX_CHUNKS ? chunk(c) : NULL;
    if (bytes == NULL)
        return -2;
    memcpy(out, bytes + (size_t)(id & (RZ_CHUNK_NODES - 1)) * sizeof *out, sizeof *out);
    return 0;
}

/* The node id + 1 of the first zone with index >= from, found walking back from the tail while that is
 * shorter than walking forward from the head (measured by indices: creation indices grow along the list).
 * 0 in *start when no zone qualifies. Returns 0, -1 torn, -2 a chunk unreadable. */
static int seek_back(const rz_state_t *st, rzv_chunk_fn chunk, uint64_t from, uint32_t *start) {
    rz_zone_node_t head, tail;
    if (read_node(chunk, st->head, &head) != 0 || read_node(chunk, st->tail, &tail) != 0)
        return -2;
    if (from <= head.index || from - head.index <= (tail.index >= from ? tail.index - from : 0)) {
        *start = st->head; /* nearer the head */
        return 0;
    }
    uint32_t id1 = st->tail, first = 0;
    uint64_t steps = 0;
    rz_zone_node_t z = tail;
    while (id1 && z.index >= from) {
        first = id1;
        if (++steps > st->zone_count + 1)
            return -1;
        id1 = z.prev;
        if (id1 && read_node(chunk, id1, &z) != 0)
            return -2;
    }
    *start = first;
    return 0;
}

/*
 * `redzone list` in one call: walk the zone list of a state snapshot in index order, keep the zones with
 * index in [from, to] (and violated ones only, if asked), format up to `limit` of them (0: all) as rows
 * ('\n'-terminated) or JSON objects (", "-separated) into out. chunk(c) returns node chunk c's bytes (read
 * on demand by the caller, kept alive until this returns) or NULL. *total counts every matching zone (the
 * walk stops at the limit when no filter is set: then *total is the registry's count). Returns 0, -1 when
 * the list is longer than its count (changed while read), -2 when a chunk could not be read, -3 when out is
 * too small (call again with more room). ids (optional, ids_cap entries): each shown zone's node id + 1, for
 * reading its allocation stack.
 */
VIEW int rzv_list(const void *state_bytes, rzv_chunk_fn chunk, uint64_t from, uint64_t to, uint64_t limit,
                  int violated_only, int json, char *out, size_t cap, uint64_t *shown, uint64_t *total,
                  size_t *used, uint32_t *ids, size_t ids_cap) {
    rz_state_t st;
    memcpy(&st, state_bytes, sizeof st);
    int filtered = violated_only || from != 0 || to != UINT64_MAX;
    uint64_t n_shown = 0, n_total = 0;
    size_t pos = 0;
    uint32_t start = st.head;
    if (from != 0 && st.tail) {
        /* --from near the end: walk back from the tail to the first zone at or after `from` (the list is in
         * index order), instead of forward from the head past every zone before it. */
        int r = seek_back(&st, chunk, from, &start);
        if (r != 0)
            return r;
    }
    walk_t w;
    walk_start(&w, &st, chunk, start);
    rz_zone_node_t z;
    uint32_t this_id1;
    int r;
    while ((r = walk_next(&w, &z, &this_id1)) == 1) {
        if (z.index > to)
            break; /* index order */
        if (z.index < from || (violated_only && !(z.flags & RZ_ZONE_VIOLATED)))
            continue;
        n_total++;
        if (limit && n_shown >= limit) {
            if (!filtered)
                break;
            continue;
        }
        char row[512];
        size_t len = json ? rz__format_zone_json(&z, row, sizeof row) : rz__format_zone_row(&z, row, sizeof row);
        const char *sep = json ? (n_shown ? ", " : "") : "";
        size_t need = strlen(sep) + len + (json ? 0 : 1);
        if (pos + need >= cap)
            return -3;
        memcpy(out + pos, sep, strlen(sep));
        pos += strlen(sep);
        memcpy(out + pos, row, len);
        pos += len;
        if (!json)
            out[pos++] = '\n';
        if (ids && n_shown < ids_cap)
            ids[n_shown] = this_id1;
        n_shown++;
    }
    if (r < 0)
        return r;
    out[pos] = '\0';
    *shown = n_shown;
    *total = filtered ? n_total : st.zone_count;
    *used = pos;
    return 0;
}

VIEW size_t rzv_violation(const void *bytes, char *out, size_t cap) {
    rz_violation_t v;
    memcpy(&v, bytes, sizeof v);
    return rz__format_violation(&v, out, cap);
}

VIEW size_t rzv_scan_summary(uint64_t checked, uint64_t violated, char *out, size_t cap) {
    return rz__format_scan_summary(checked, violated, out, cap);
}

VIEW const char *rzv_status_name(int status) {
    switch (status) {
#define RZV_NAME(name, value, msg)                                                                           \
    case value:                                                                                              \
        return #name ": " msg;
        RZ_STATUS_MAP(RZV_NAME)
#undef RZV_NAME
    default:
        return "unknown status";
    }
}

VIEW int rzv_check_launches(const void *bytes) {
    rz_launches_t head;
    memcpy(&head, bytes, offsetof(rz_launches_t, seq));
    if (head.magic != RZ_LAUNCHES_MAGIC)
        return -1;
    if (head.version != RZ_LAUNCHES_VERSION)
        return -2;
    return head.size == sizeof(rz_launches_t) ? 0 : -3;
}

/*
 * A debugger's scan without the agent (cuda-gdb cannot resume one thread): the bands to read, in the order
 * the library's scan judges them (index order; a zone's back band, then its front band). Zones whose band
 * is not installed yet (pending, lazy install) count as checked, as in the library's scan, which installs
 * them first, but there is nothing of theirs to read. Returns 0, -1 torn, -2 a chunk unreadable, -3 out
 * too small (*n: entries needed).
 */
VIEW int rzv_bands(const void *state_bytes, rzv_chunk_fn chunk, rzv_band_t *out, size_t cap, size_t *n,
                   uint64_t *checked, uint64_t *pending) {
    rz_state_t st;
    memcpy(&st, state_bytes, sizeof st);
    size_t k = 0;
    *checked = *pending = 0;
    walk_t w;
    walk_start(&w, &st, chunk, st.head);
    rz_zone_node_t z;
    uint32_t this_id1;
    int r;
    while ((r = walk_next(&w, &z, &this_id1)) == 1) {
        /* Graph memory, and a stream-ordered band fill not yet seen done (the debugger cannot ask its event):
         * not read, not counted, as the library's scan skips them. */
        if (!rz__zone_watched(&z) || (z.flags & (RZ_ZONE_GRAPH | RZ_ZONE_FILLING)))
            continue;
        (*checked)++;
        if (z.flags & RZ_ZONE_PENDING) {
            (*pending)++;
            continue;
        }
        rzv_band_t b = {.addr = z.ptr + z.user_bytes, .bytes = z.pad_bytes, .index = z.index, .id1 = this_id1,
                        .expected = z.expected, .flags = z.flags};
        if (k < cap)
            out[k] = b;
        k++;
        if (z.front_units) {
            b.addr = z.ptr - rz__zone_front(&z);
            b.bytes = rz__zone_front(&z);
            b.front = 1;
            if (k < cap)
                out[k] = b;
            k++;
        }
    }
    if (r < 0)
        return r;
    *n = k;
    return k > cap ? -3 : 0;
}

/* The library's judge on one band read by the debugger: 1 (record and line filled) when violated, else 0. */
VIEW int rzv_judge(const void *node_bytes, const uint8_t *band, uint64_t bytes, int front, void *record, char *line,
                   size_t cap) {
    rz_zone_node_t z;
    memcpy(&z, node_bytes, sizeof z);
    rz_violation_t v;
    if (!rz__band_violation(&z, band, bytes, front, &v))
        return 0;
    memcpy(record, &v, sizeof v);
    rz__format_violation(&v, line, cap);
    return 1;
}

VIEW size_t rzv_launch_candidates(const void *launches_bytes, uint64_t since, uint64_t index, char *out, size_t cap) {
    return rz__format_launch_candidates((const rz_launches_t *)launches_bytes, since, index, out, cap);
}

VIEW int rzv_window_byte(const void *state_bytes, uint64_t index) {
    rz_state_t st;
    memcpy(&st, state_bytes, offsetof(rz_state_t, counters));
    return rz__window_byte(st.poison_active, st.poison_lo, st.poison_hi, st.fill, index);
}

/*
 * One allocation-stack frame as the library prints it (symbolize.c), for a debugger that judges bands itself:
 * the function from the ELF file `path` (mapped here; `base`: where the program loaded it), printed with the
 * library's object name `name`. *ours: the frame is in redzone's own allocation path (the library skips such
 * leading frames).
 */
VIEW size_t rzv_frame(int k, uint64_t addr, const char *path, uint64_t base, const char *name, int *ours, char *out,
                      size_t cap) {
    const char *func = NULL;
    char func_buf[160];
    uint64_t off = 0;
    int fd = path && path[0] ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0) {
        void *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (img != MAP_FAILED) {
            const Elf64_Ehdr *eh = img;
            uint64_t rel = (size_t)st.st_size >= sizeof *eh && eh->e_type == ET_DYN ? addr - base : addr;
            const char *found = rz__elf_lookup(img, (size_t)st.st_size, rel - 1, &off);
            if (found) {
                snprintf(func_buf, sizeof func_buf, "%s", found);
                func = func_buf;
                off += 1;
            }
            munmap(img, (size_t)st.st_size);
        }
    }
    if (fd >= 0)
        close(fd);
    *ours = rz__frame_is_ours(func ? func : "", name && strstr(name, "libredzone") != NULL);
    return rz__format_frame(k, addr, func, off, name ? name : "?", out, cap);
}
