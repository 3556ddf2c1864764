"""One band reader/writer that hides where band bytes come from. No gdb import: the debugger seam hands it
its memory paths (read(addr, n) -> bytes or None, write(addr, data) -> bool), in the order to try them, and
pytest drives it with fakes.

The first path is always plain memory: on the emulated device bands are host memory, and a cuda-gdb
@global read of host memory silently returns zeros (measured without a GPU), so an answer from a later path
is only asked for when an earlier one failed. Each read and write remembers the path that served it
(`used`), so `redzone status` and the tests can say which one ran.

Adjacent bands are read in spans (one debugger call for many bands; reading the program's bytes between
them is harmless), so a memory scan of 100k zones costs a few hundred calls, not 100k."""

SPAN_MAX = 1 << 20   # bytes one read may cover
GAP_MAX = 64 << 10   # bytes of the program's own memory a span may read between two bands


class BandIO:
    def __init__(self, paths):
        self.paths = paths  # [(name, read, write)]
        self.used = {}      # path name -> how many reads and writes it served

    def _note(self, name):
        self.used[name] = self.used.get(name, 0) + 1

    def read(self, addr, n):
        for name, read, _ in self.paths:
            data = read(addr, n)
            if data is not None and len(data) == n:
                self._note(name)
                return data
        return None

    def write(self, addr, data):
        for name, _, write in self.paths:
            if write(addr, data):
                self._note(name)
                return True
        return False

    def read_bands(self, bands):
        """bands: [(addr, bytes, ...)]. Returns a list of bytes (None where unreadable), in the same order."""
        n = len(bands)
        addrs = [b[0] for b in bands]
        ends = [b[0] + b[1] for b in bands]
        order = sorted(range(n), key=addrs.__getitem__)
        out = [None] * n
        k = 0
        while k < n:
            first = order[k]
            start, end = addrs[first], ends[first]
            j = k + 1
            while j < n:
                i = order[j]
                if addrs[i] > end + GAP_MAX or ends[i] - start > SPAN_MAX:
                    break
                if ends[i] > end:
                    end = ends[i]
                j += 1
            span = self.read(start, end - start) if end > start else b""
            if span is not None:
                for i in order[k:j]:
                    out[i] = span[addrs[i] - start:ends[i] - start]
            elif j - k > 1:
                for i in order[k:j]:  # one by one: only the unreadable ones fail
                    out[i] = self.read(addrs[i], ends[i] - addrs[i])
            k = j
        return out


def cuda_module_paths(cuda):
    """The path through cuda-gdb's own Python module (`gdb.cuda`, cuda-gdb 12.x and later), where it has
    read_global_memory: [("cuda", read, write)] to try after plain memory and before @global casts, which
    build and parse one expression per band; [] where the module or the function is absent (cuda-gdb 11.x,
    gdb). A call that fails or answers with the wrong length counts as unreadable (the next path is tried)."""
    reader = getattr(cuda, "read_global_memory", None) if cuda is not None else None
    if not callable(reader):
        return []
    writer = getattr(cuda, "write_global_memory", None)

    def read(addr, n):
        try:
            data = reader(addr, n)
            data = bytes(data) if not isinstance(data, (list, tuple)) else bytes(int(b) & 0xFF for b in data)
        except Exception:  # noqa: BLE001 -- any failure of the debugger's reader: try the next path
            return None
        return data if len(data) == n else None

    def write(addr, data):
        if not callable(writer):
            return False
        try:
            writer(addr, bytes(data))
            return True
        except Exception:  # noqa: BLE001
            return False

    return [("cuda", read, write)]
