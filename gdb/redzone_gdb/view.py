"""The library's decoding and formatting, loaded with ctypes from libredzone-view.so, so gdb shows the
same bytes the library logs. No gdb import: tested with pytest on bytes."""
import ctypes
import os

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
        l.rzv_zone_header.restype = ctypes.c_size_t
        l.rzv_zone_header.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        l.rzv_zone_fields.restype = ctypes.c_int
        l.rzv_zone_fields.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64),
                                      ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_int),
                                      ctypes.POINTER(ctypes.c_int)]
        l.rzv_violation.restype = ctypes.c_size_t
        l.rzv_violation.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        l.rzv_scan_summary.restype = ctypes.c_size_t
        l.rzv_scan_summary.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t]
        l.rzv_status_name.restype = ctypes.c_char_p
        l.rzv_status_name.argtypes = [ctypes.c_int]
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


def violation(record_bytes):
    return _text(lib().rzv_violation, record_bytes)


def status_name(status):
    return lib().rzv_status_name(status).decode()


def u64(data, off):
    return int.from_bytes(data[off:off + 8], "little")


def u32(data, off):
    return int.from_bytes(data[off:off + 4], "little")


def i64(data, off):
    return int.from_bytes(data[off:off + 8], "little", signed=True)
