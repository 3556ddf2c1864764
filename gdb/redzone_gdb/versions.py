"""What a debugger says of itself (`show version`, `--version`), read without gdb: pure text, so the plugin,
tests/gpu/run and the tests share it.

The banners (first lines):
- cuda-gdb up to 11.8:     "NVIDIA (R) CUDA Debugger" / "11.8 release" / ... / "GNU gdb (GDB) 10.2"
- cuda-gdb 12.x and 13.x:  "NVIDIA (R) cuda-gdb 12.8" / "Portions Copyright ..." / "Based on GNU gdb 13.2"
  (no "release" line; the 12.5+ `cuda-gdb` wrapper may print "exec: .../cuda-gdb-minimal ..." first)
- gdb:                      "GNU gdb (Debian 13.1-3) 13.1"
"""
import re

_CUDA_OLD = re.compile(r"^\s*NVIDIA \(R\) CUDA Debugger\s*$", re.M)
_CUDA_OLD_RELEASE = re.compile(r"^\s*(\d+\.\d+(?:\.\d+)?) release\s*$", re.M)
_CUDA_NEW = re.compile(r"^\s*NVIDIA \(R\) cuda-gdb (\d+\.\d+(?:\.\d+)?)\b", re.M)
_GNU = re.compile(r"^\s*(?:Based on )?GNU gdb (?:\([^)]*\) )?(\d+\.\d+(?:\.\d+)?)", re.M)


def is_cuda_gdb(text):
    """True when the banner is cuda-gdb's (any release)."""
    return bool(_CUDA_OLD.search(text) or _CUDA_NEW.search(text))


def cuda_gdb_release(text):
    """'12.8' / '11.8' from a cuda-gdb banner; None for anything else."""
    m = _CUDA_NEW.search(text)
    if m:
        return m.group(1)
    if _CUDA_OLD.search(text):
        m = _CUDA_OLD_RELEASE.search(text)
        return m.group(1) if m else "?"
    return None


def gnu_version(text):
    """The GDB version the banner names ('13.2'), or None."""
    m = _GNU.search(text)
    return m.group(1) if m else None


def describe(text, gdb_version=None):
    """One line: 'cuda-gdb 12.8 (GDB 13.2)', 'cuda-gdb 11.8 (GDB 10.2)', 'gdb 13.1'. gdb_version (gdb.VERSION)
    wins over the banner's GDB version where given."""
    gnu = gdb_version or gnu_version(text) or "?"
    release = cuda_gdb_release(text)
    if release:
        return f"cuda-gdb {release} (GDB {gnu})"
    return f"gdb {gnu}"
