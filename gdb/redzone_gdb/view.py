"""The library's decoding and formatting, loaded with ctypes from libredzone-view.so, so gdb shows the
same bytes the library logs. No gdb import: tested with pytest on bytes."""
import ctypes
import os
import struct
import sys

from . import paths

_lib = None


def lib():
    global _lib
    if _lib is None:
        path = os.environ.get("REDZONE_VIEW_LIB") or paths.VIEW_LIB
        if not os.path.exists(path):
            raise OSError(f"the redzone view library {path} is missing")
        l = ctypes.CDLL(path)
        l.rzv_offset.restype = ctypes.c_size_t
        l.rzv_offset.argtypes = [ctypes.c_char_p]
        l.rzv_size.restype = ctypes.c_size_t
        l.rzv_size.argtypes = [ctypes.c_char_p]
        l.rzv_check_state.argtypes = [ctypes.c_char_p]
        l.rzv_check_agent.argtypes = [ctypes.c_char_p]
        for f in (l.rzv_counters, l.rzv_zone_row):
            f.restype = ctypes.c_size_t
            f.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        l.rzv_list.restype = ctypes.c_int
        l.rzv_list.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                               ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                               ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                               ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p, ctypes.c_size_t]
        l.rzv_zone_header.restype = ctypes.c_size_t
        l.rzv_zone_header.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        l.rzv_zone_fields.restype = ctypes.c_int
        l.rzv_zone_fields.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64),
                                      ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_int),
                                      ctypes.POINTER(ctypes.c_int)]
        for f in (l.rzv_violation, l.rzv_refusal):
            f.restype = ctypes.c_size_t
            f.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        l.rzv_scan_summary.restype = ctypes.c_size_t
        l.rzv_scan_summary.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t]
        l.rzv_status_name.restype = ctypes.c_char_p
        l.rzv_status_name.argtypes = [ctypes.c_int]
        l.rzv_bands.restype = ctypes.c_int
        l.rzv_bands.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_uint64),
                                ctypes.POINTER(ctypes.c_uint64)]
        l.rzv_judge.restype = ctypes.c_int
        l.rzv_judge.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p,
                                ctypes.c_char_p, ctypes.c_size_t]
        l.rzv_launch_candidates.restype = ctypes.c_size_t
        l.rzv_launch_candidates.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_char_p,
                                            ctypes.c_size_t]
        l.rzv_check_launches.argtypes = [ctypes.c_char_p]
        l.rzv_frame.restype = ctypes.c_size_t
        l.rzv_frame.argtypes = [ctypes.c_int, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_char_p,
                                ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_size_t]
        l.rzv_window_byte.restype = ctypes.c_int
        l.rzv_window_byte.argtypes = [ctypes.c_char_p, ctypes.c_uint64]
        _lib = l
    return _lib


def offset(field):
    off = lib().rzv_offset(field.encode())
    if off == ctypes.c_size_t(-1).value:
        raise KeyError(field)
    return off


def size(what):
    return lib().rzv_size(what.encode())


def _text(fn, *args, cap=1 << 16):
    buf = ctypes.create_string_buffer(cap)
    n = fn(*args, buf, cap)
    return buf.raw[:n].decode()


def check_state(state_bytes):
    return lib().rzv_check_state(state_bytes)


def check_agent(agent_bytes):
    return lib().rzv_check_agent(agent_bytes)


def counters(state_bytes, json=False):
    return _text(lib().rzv_counters, state_bytes, 1 if json else 0)


def zone_header():
    return _text(lib().rzv_zone_header)


def zone_fields(node_bytes):
    """(state, index, next node id + 1, violated, watched)"""
    index, nxt, violated, watched = ctypes.c_uint64(), ctypes.c_uint32(), ctypes.c_int(), ctypes.c_int()
    st = lib().rzv_zone_fields(node_bytes, ctypes.byref(index), ctypes.byref(nxt), ctypes.byref(violated),
                               ctypes.byref(watched))
    return st, index.value, nxt.value, bool(violated.value), bool(watched.value)


def zone_row(node_bytes, json=False):
    return _text(lib().rzv_zone_row, node_bytes, 1 if json else 0)


CHUNK_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint32)


def _chunk_callback(read_chunk):
    """(C callback, the buffers it hands out): chunk c's bytes from read_chunk(c) (None: unreadable), each
    kept alive in the returned dict for as long as the caller holds it."""
    kept = {}

    def chunk(c):
        if c not in kept:
            data = read_chunk(c)
            if data is None:
                return None
            kept[c] = ctypes.create_string_buffer(data, len(data))
        return ctypes.addressof(kept[c])

    return CHUNK_FN(chunk), kept


class ListError(Exception):
    """The zone list could not be walked: torn (changed while read) or a chunk unreadable."""


def zone_list(state_bytes, read_chunk, lo=None, hi=None, limit=0, violated=False, json=False, ids=False):
    """`redzone list` rows in one C call: (rows text, shown, total[, node ids + 1 of the shown rows]).
    read_chunk(c) -> bytes or None."""
    l = lib()
    cb, _kept = _chunk_callback(read_chunk)
    cap = (min(limit, u64(state_bytes, offset("state.zone_count"))) if limit else
           u64(state_bytes, offset("state.zone_count"))) * (200 if json else 100) + 4096
    nids = (min(limit, u64(state_bytes, offset("state.zone_count"))) if limit else
            u64(state_bytes, offset("state.zone_count"))) if ids else 0
    id_buf = (ctypes.c_uint32 * max(nids, 1))()
    while True:
        out = ctypes.create_string_buffer(cap)
        shown, total, used = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_size_t()
        rc = l.rzv_list(state_bytes, cb, 0 if lo is None else lo, (1 << 64) - 1 if hi is None else hi, limit,
                        1 if violated else 0, 1 if json else 0, out, cap, ctypes.byref(shown), ctypes.byref(total),
                        ctypes.byref(used), ctypes.addressof(id_buf) if ids else None, nids)
        if rc == -3:
            cap *= 2
            continue
        if rc == -1:
            raise ListError("the zone list is longer than its count (the registry changed while read)")
        if rc == -2:
            raise ListError("the registry points outside its chunks (memory is corrupt)")
        text = out.raw[:used.value].decode()
        if ids:
            return text, shown.value, total.value, list(id_buf[:min(shown.value, nids)])
        return text, shown.value, total.value


def violation(record_bytes):
    return _text(lib().rzv_violation, record_bytes)


def refusal(record_bytes):
    """The `copy past the end of alloc#N` line of a refusal record (__redzone_refused's argument)."""
    return _text(lib().rzv_refusal, record_bytes)


def status_name(status):
    return lib().rzv_status_name(status).decode()


def u64(data, off):
    return int.from_bytes(data[off:off + 8], "little")


def u32(data, off):
    return int.from_bytes(data[off:off + 4], "little")


def i64(data, off):
    return int.from_bytes(data[off:off + 8], "little", signed=True)


LAST_VIOLATIONS = 16


class _Band(ctypes.Structure):
    _fields_ = [("addr", ctypes.c_uint64), ("bytes", ctypes.c_uint64), ("index", ctypes.c_uint64),
                ("id1", ctypes.c_uint32), ("front", ctypes.c_uint8), ("expected", ctypes.c_uint8),
                ("flags", ctypes.c_uint8), ("reserved", ctypes.c_uint8)]


def _band_records(state_bytes, read_chunk):
    """(the band records as bytes, how many, zones checked, of which pending)."""
    l = lib()
    if ctypes.sizeof(_Band) != size("band"):
        raise ListError("the view library's band record has another size than this plugin expects")
    cb, _kept = _chunk_callback(read_chunk)
    cap = u64(state_bytes, offset("state.zone_count")) * 2 + 16
    while True:
        arr = (_Band * cap)()
        n, checked, pending = ctypes.c_size_t(), ctypes.c_uint64(), ctypes.c_uint64()
        rc = l.rzv_bands(state_bytes, cb, ctypes.addressof(arr), cap, ctypes.byref(n), ctypes.byref(checked),
                         ctypes.byref(pending))
        if rc == -3:
            cap = n.value
            continue
        if rc == -1:
            raise ListError("the zone list is longer than its count (the registry changed while read)")
        if rc == -2:
            raise ListError("the registry points outside its chunks (memory is corrupt)")
        raw = ctypes.string_at(ctypes.addressof(arr), n.value * ctypes.sizeof(_Band))
        return raw, n.value, checked.value, pending.value


def bands(state_bytes, read_chunk):
    """The bands a memory scan reads, in the library's judging order: ([(addr, bytes, index, id1, front,
    expected, flags)], zones checked, of which pending). read_chunk(c) -> bytes or None."""
    raw, _n, checked, pending = _band_records(state_bytes, read_chunk)
    out = [t[:7] for t in struct.iter_unpack("<QQQIBBBB", raw)]  # C speed, not a ctypes access a field
    return out, checked, pending


def band_columns(state_bytes, read_chunk):
    """The same bands as columns, made at C speed (no tuple per band): ((addr, bytes, index, id1 lists; front,
    expected, flags as bytes), zones checked, of which pending)."""
    raw, n, checked, pending = _band_records(state_bytes, read_chunk)
    if sys.byteorder != "little":  # the records are little-endian; a cast reads them in the host's order
        rows = [t[:7] for t in struct.iter_unpack("<QQQIBBBB", raw)]
        cols = tuple(list(c) for c in zip(*rows)) if rows else ([], [], [], [], [], [], [])
        return (cols[0], cols[1], cols[2], cols[3], bytes(cols[4]), bytes(cols[5]), bytes(cols[6])), checked, pending
    m = memoryview(raw)
    q, w, b = m.cast("Q"), m.cast("I"), m.cast("B")
    return ((q[0::4].tolist(), q[1::4].tolist(), q[2::4].tolist(), w[6::8].tolist(), bytes(b[28::32]),
             bytes(b[29::32]), bytes(b[30::32])), checked, pending)


def judge(node_bytes, band, front):
    """The library's judge: None when the band is clean, else (violation record bytes, report line)."""
    record = ctypes.create_string_buffer(size("violation"))
    line = ctypes.create_string_buffer(512)
    if not lib().rzv_judge(node_bytes, band, len(band), 1 if front else 0, record, line, 512):
        return None
    return record.raw, line.value.decode()


def launch_candidates(launches_bytes, since, index):
    return _text(lib().rzv_launch_candidates, launches_bytes, since, index)


def check_launches(launches_bytes):
    return lib().rzv_check_launches(launches_bytes)


def window_byte(state_bytes, index):
    return lib().rzv_window_byte(state_bytes, index)


def scan_summary(checked, violated):
    return _text(lib().rzv_scan_summary, checked, violated)


def _status_table():
    table = {}
    for code in range(0, -64, -1):
        text = status_name(code)
        if text == "unknown status":
            continue
        table[text.split(":")[0]] = code
    return table


class _Status(dict):
    def __missing__(self, key):
        table = _status_table()
        self.update(table)
        return table[key]


STATUS = _Status()


def status_message(code):
    """rz_strerror's text for a status."""
    return status_name(code).split(": ", 1)[-1]


def frame(k, addr, path, base, name):
    """(line, ours): allocation-stack frame k as the library prints it, read from the ELF file `path` loaded
    at `base`, named `name`; ours: a frame of redzone's own allocation path."""
    ours = ctypes.c_int()
    buf = ctypes.create_string_buffer(4096)
    n = lib().rzv_frame(k, addr, (path or "").encode(), base, (name or "?").encode(), ctypes.byref(ours), buf, 4096)
    return buf.raw[:n].decode(errors="replace"), bool(ours.value)
