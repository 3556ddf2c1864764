"""The memory method: scan, poison and unpoison served by the debugger itself, through memory reads and
writes, resuming nothing (cuda-gdb cannot resume one thread alone; core files cannot resume at all). No
gdb import: target.py hands it the program's memory (host reads and writes, and a bandio.BandIO for
bands) and pytest can drive it with fakes.

It judges bands with the library's own judge and formatter (view.py: libredzone-view.so) and leaves the
library's state as the library's own scan or poison would: the zones' violated marks and expected bytes,
the counters (scans, violations, page resets), the last scan's records, and the kernel-launch ring's
report window. Differences, by design: zones still waiting for their band (lazy install) are counted as
checked, as the library's scan counts them, but left for the library to install (nothing can have
written them: a band is installed before any device work that follows its allocation); stream-ordered
free checks the library deferred are judged by its next own scan.

It refuses when a thread is in the middle of changing the registry (lock held or the change counter odd):
what it read could be torn, and a write could be lost under the holder's."""

import operator
from bisect import bisect_right
from itertools import islice, repeat

from . import bandio, nvtx, quarantine, view

EBUSY_TEXT = ("RZ_EBUSY: a thread is in the middle of changing the zone registry (it holds the registry "
              "lock); step or continue that thread past redzone, then try again")


class Busy(Exception):
    pass


class Failed(Exception):
    pass


class MemoryMethod:
    def __init__(self, host_read, host_write, bands, state_addr, launches_addr=None, stack_lines=None,
                 read_only=False, nvtx_addr=None, quarantine_addr=None):
        self.host_read = host_read      # (addr, n) -> bytes (raises on failure)
        self.host_write = host_write    # (addr, data) -> None (raises on failure)
        self.io = bands                 # bandio.BandIO
        self.state_addr = state_addr
        self.launches_addr = launches_addr
        self.stack_lines = stack_lines  # (state bytes, node id + 1, index) -> [lines] (allocation stack)
        self.read_only = read_only      # a core file: judge and report, write nothing
        self.nvtx_addr = nvtx_addr      # __redzone_nvtx, when the library has it (NVTX regions)
        self.quarantine_addr = quarantine_addr  # __redzone_quarantine: held freed blocks (issue 32)

    # ---- state access ----------------------------------------------------------------------------------
    def _state(self):
        data = self.host_read(self.state_addr, view.size("state"))
        if view.check_state(data) != 0:
            raise Failed("the state block is not one this plugin understands")
        if view.u32(data, view.offset("state.lock")) != 0 or view.u64(data, view.offset("state.seq")) % 2:
            raise Busy(EBUSY_TEXT)
        return data

    def _put(self, field, value, size=8):
        if not self.read_only:
            self.host_write(self.state_addr + view.offset(field), value.to_bytes(size, "little"))

    def _bump(self, state, counter, delta):
        if delta and not self.read_only:
            off = view.offset("state.counters") + 8 * counter_index(state, counter)
            old = view.u64(state, off)
            self.host_write(self.state_addr + off, (old + delta).to_bytes(8, "little"))

    def _node_write(self, chunk_ptrs, id1, field, value):
        i = id1 - 1
        shift = view.size("chunk_shift")
        addr = chunk_ptrs[i >> shift] + (i & ((1 << shift) - 1)) * view.size("node") + view.offset(field)
        self.host_write(addr, bytes([value]))

    def _registry(self, state):
        shift_chunks = view.offset("state.chunks")
        ptrs = [view.u64(state, shift_chunks + 8 * c) for c in range(view.size("max_chunks"))]
        cache = {}

        def read_chunk(c):
            if c >= len(ptrs) or not ptrs[c]:
                return None
            if c not in cache:
                cache[c] = self.host_read(ptrs[c], view.size("chunk"))
            return cache[c]

        def node(id1):
            i = id1 - 1
            shift = view.size("chunk_shift")
            off = (i & ((1 << shift) - 1)) * view.size("node")
            return read_chunk(i >> shift)[off:off + view.size("node")]

        return ptrs, read_chunk, node

    def _bands(self, state):
        """(chunk pointers, node reader, the bands to judge, zones checked) of a state snapshot."""
        ptrs, read_chunk, node = self._registry(state)
        try:
            bands, checked, _pending = view.bands(state, read_chunk)
        except view.ListError as e:
            raise Failed(str(e)) from None
        return ptrs, node, bands, checked

    # ---- scan --------------------------------------------------------------------------------------------
    def scan(self):
        """(result, text): the library's report lines and summary; result as rz_scan's."""
        state = self._state()
        ptrs, read_chunk, node = self._registry(state)
        try:
            cols, checked, _pending = view.band_columns(state, read_chunk)
        except view.ListError as e:
            raise Failed(str(e)) from None
        launches = None
        if self.launches_addr:
            launches = self.host_read(self.launches_addr, view.size("launches"))
            if view.check_launches(launches) != 0:
                launches = None
        since = view.u64(launches, view.offset("launches.scan_start")) if launches else 0

        lines, records, refill = [], [], []
        violated_zones, unread_zones, violations = set(), set(), 0
        violated_bands = []
        for b, data in self._changed_bands(cols):
            addr, n, index, id1, front, expected, flags = b
            if data is None:
                if not front:
                    unread_zones.add(id1)
                continue
            verdict = view.judge(node(id1), data, front)
            if verdict is None:
                continue
            record, line = verdict
            lines.append(line)
            if self.stack_lines:
                lines += self.stack_lines(state, id1, index)
            if launches:
                cand = view.launch_candidates(launches, since, index)
                if cand:
                    lines.append(cand)
            violations += 1
            if len(records) < view.LAST_VIOLATIONS:
                records.append(record)
            violated_zones.add(id1)
            violated_bands.append((id1, flags))
            refill.append((addr, bytes([expected]) * n))
        if self.nvtx_addr:  # pool sub-allocations through NVTX (nvtx.py): judged and re-filled as the library does
            nvtx_lines, nvtx_refill = nvtx.check(self.host_read, self.io.read, self.nvtx_addr)
            lines += nvtx_lines
            violations += len(nvtx_lines)
        violations += self._quarantine(lines, records)
        if unread_zones:
            lines.append(f"redzone: warning: scan: reading {len(unread_zones)} bands failed (the debugger "
                         "could not read that memory)")
        checked -= min(len(unread_zones), checked)

        result = len(violated_zones)
        if not self.read_only:
            for addr, data in nvtx_refill if self.nvtx_addr else []:
                if not self.io.write(addr, data):
                    lines.append(f"redzone: warning: scan: re-filling the NVTX region bytes at {addr:#x} failed")
            for addr, data in refill:
                if not self.io.write(addr, data):
                    lines.append(f"redzone: warning: scan: re-filling the band at {addr:#x} failed")
                    result = view.STATUS["RZ_EDRIVER"]
                else:
                    self._bump(state, "page_reset_calls", 1)
                    state = self._state_after_counter(state, "page_reset_calls", 1)
                    self._bump(state, "page_reset_bytes", len(data))
                    state = self._state_after_counter(state, "page_reset_bytes", len(data))
            flag_v = view.size("flag.violated")
            marked = {}  # zones whose violated mark changes: id1 -> new flags
            id1s, flag_col = cols[3], cols[6]
            for i in _positions(flag_col, flag_v):  # marked violated before (few): no pass over every band
                if id1s[i] not in violated_zones:
                    marked[id1s[i]] = flag_col[i] & ~flag_v & 0xFF
            for id1, flags in violated_bands:
                if not flags & flag_v:
                    marked[id1] = flags | flag_v
            for id1, flags in marked.items():
                self._node_write(ptrs, id1, "node.flags", flags)
            base = view.offset("state.last_violations")
            rec_size = view.size("violation")
            for k, rec in enumerate(records):
                self.host_write(self.state_addr + base + k * rec_size, rec)
            self._put("state.last_violation_count", len(records), 4)
            self._put("state.last_scan_checked", checked)
            self._put("state.last_scan_violated", len(violated_zones))
            self._bump(state, "violations", violations)
            state = self._state_after_counter(state, "violations", violations)
            self._bump(state, "scans", 1)
            if launches:
                seq = view.u64(launches, view.offset("launches.seq"))
                self.host_write(self.launches_addr + view.offset("launches.report_since"),
                                since.to_bytes(8, "little"))
                self.host_write(self.launches_addr + view.offset("launches.scan_start"), seq.to_bytes(8, "little"))
        if unread_zones and result >= 0:
            result = view.STATUS["RZ_EDRIVER"]
        if result >= 0:
            lines.append(view.scan_summary(checked, len(violated_zones)))
        else:
            lines.append(f"redzone scan: failed ({view.status_message(result)}) after {checked} zones checked, "
                         f"{len(violated_zones)} violated")
        return result, "".join(l + "\n" for l in lines)

    def _changed_bands(self, cols):
        """The bands of a scan that are not clean, as ((addr, bytes, index, id1, front, expected, flags), data
        or None where unreadable), in the judging order. Linear in the bands, one comparison at C speed each
        (bytes.startswith at the band's place in the span read), no object per clean band; bands are read in
        spans as bandio.BandIO.read_bands reads them."""
        addr, nb, index, id1, front, expected, flags = cols
        n = len(addr)
        if n == 0:
            return []
        ends = list(map(operator.add, addr, nb))
        read, gap_max, span_max = self.io.read, bandio.GAP_MAX, bandio.SPAN_MAX
        # The registry's order is usually the addresses' order, the bands apart: then the spans are found with
        # bisect over the ends and a search of the gaps, at C speed; else one pass in address order.
        ordered = all(map(operator.le, addr, islice(addr, 1, None))) and \
            all(map(operator.le, ends, islice(ends, 1, None)))
        if ordered:
            order = range(n)
            gaps = bytes(map(operator.gt, islice(addr, 1, None), map(operator.add, ends, repeat(gap_max))))
        else:
            order = sorted(range(n), key=addr.__getitem__)
        uniform = len(set(nb)) == 1 and len(set(expected)) == 1
        want_one = bytes([expected[0]]) * nb[0]
        wants = {}
        changed = []  # positions in the judging order
        k = 0
        while k < n:
            if ordered:
                start = addr[k]
                j = max(bisect_right(ends, start + span_max, k + 1), k + 1)
                g = gaps.find(1, k, j - 1)  # a gap before band g + 1
                j = g + 1 if g >= 0 else j
                end = ends[j - 1]
            else:
                first = order[k]
                start, end = addr[first], ends[first]
                j = k + 1
                while j < n:
                    i = order[j]
                    if addr[i] > end + gap_max or ends[i] - start > span_max:
                        break
                    if ends[i] > end:
                        end = ends[i]
                    j += 1
            span = read(start, end - start) if end > start else b""
            group = order[k:j]
            if span is None:
                for i in group:  # one by one: only the unreadable ones fail
                    data = read(addr[i], nb[i]) if j - k > 1 else None
                    if data is None or data != bytes([expected[i]]) * nb[i]:
                        changed.append((i, data))
            elif uniform:
                sw = span.startswith
                changed += [(i, span[addr[i] - start:ends[i] - start]) for i in group
                            if not sw(want_one, addr[i] - start)]
            else:
                sw = span.startswith
                for i in group:
                    key = (nb[i], expected[i])
                    want = wants.get(key)
                    if want is None:
                        want = wants[key] = bytes([expected[i]]) * nb[i]
                    if not sw(want, addr[i] - start):
                        changed.append((i, span[addr[i] - start:ends[i] - start]))
            k = j
        changed.sort(key=lambda c: c[0])
        return [((addr[i], nb[i], index[i], id1[i], front[i], expected[i], flags[i]), data) for i, data in changed]

    def _quarantine(self, lines, records):
        """Judge the held freed blocks whose fill the library saw done, as its scan does (a changed byte is
        written after free; re-filled unless read-only); returns the reports made."""
        held = quarantine.read(self.host_read, self.quarantine_addr)
        made = 0
        found = None  # the NVTX regions, read once a held region needs its name
        for e in held[1] if held else []:
            if e["flags"] & quarantine.FILLING:
                continue
            data = self.io.read(e["base"], e["bytes"])
            what = None
            if data is not None and e["flags"] & quarantine.REGION:
                if found is None:
                    found = nvtx.regions(self.host_read, self.nvtx_addr) if self.nvtx_addr else []
                what = nvtx.describe_held(found, e["ptr"], e["user_bytes"])
            verdict = quarantine.judge(e, data, what) if data is not None else None
            if verdict is None:
                continue
            record, line = verdict
            lines.append(line)
            made += 1
            if len(records) < view.LAST_VIOLATIONS:
                records.append(record)
            if not self.read_only:
                self.io.write(e["base"], bytes([e["byte"]]) * e["bytes"])
        # `filling` blocks are left for the library's next scan (`redzone list` shows them as such): a line
        # here at every scan would say it at every stop under autoscan.
        return made

    def _state_after_counter(self, state, counter, delta):
        """The state bytes with one counter advanced (so the next bump adds to the new value)."""
        off = view.offset("state.counters") + 8 * counter_index(state, counter)
        value = (view.u64(state, off) + delta).to_bytes(8, "little")
        return state[:off] + value + state[off + 8:]

    # ---- poison ------------------------------------------------------------------------------------------
    def poison(self, lo, hi):
        """Set the window [lo, hi) and re-fill every band whose byte changes. (result, text)."""
        return self._window(1, lo, hi)

    def unpoison(self):
        return self._window(0, None, None)

    def _window(self, active, lo, hi):
        if self.read_only:
            raise Failed("this is a core file: poison and unpoison need a running program")
        state = self._state()
        if active:
            self._put("state.poison_lo", lo)
            self._put("state.poison_hi", hi)
        self._put("state.poison_active", active, 1)
        state = self._state()
        ptrs, _node, bands, _checked = self._bands(state)
        failed = 0
        resets = reset_bytes = 0
        done = {}
        for addr, n, index, id1, front, expected, flags in bands:
            want = view.window_byte(state, index)
            if want == expected or done.get(id1) is False:
                continue
            if self.io.write(addr, bytes([want]) * n):
                resets += 1
                reset_bytes += n
                if id1 not in done:
                    done[id1] = True
                    self._node_write(ptrs, id1, "node.expected", want)
            else:
                failed += 1
                done[id1] = False
        self._bump(state, "page_reset_calls", resets)
        state = self._state_after_counter(state, "page_reset_calls", resets)
        self._bump(state, "page_reset_bytes", reset_bytes)
        if failed:
            what = "poison" if active else "unpoison"
            return view.STATUS["RZ_EDRIVER"], (f"redzone: warning: {what}: filling {failed} bands failed (the "
                                               "debugger could not write that memory)\n")
        return 0, ""


def _positions(col, bit):
    """Positions in the bytes col whose value has bit set, found at C speed (a translation, then find)."""
    marks = col.translate(bytes(1 if v & bit else 0 for v in range(256)))
    out, at = [], marks.find(1)
    while at >= 0:
        out.append(at)
        at = marks.find(1, at + 1)
    return out


def counter_index(state, name):
    names = [line.split(": ")[0] for line in view.counters(state).splitlines()]
    return names.index(name)
