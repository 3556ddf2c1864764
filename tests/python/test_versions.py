"""What a debugger's banner says (redzone_gdb/versions.py): the plugin's `redzone status` line, the launcher's
and tests/gpu/run's, for cuda-gdb 11.x, 12.x/13.x and gdb."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "gdb"))
from redzone_gdb import versions  # noqa: E402

CUDA_GDB_11 = """NVIDIA (R) CUDA Debugger
11.8 release
Portions Copyright (C) 2007-2022 NVIDIA Corporation
GNU gdb (GDB) 10.2
Copyright (C) 2021 Free Software Foundation, Inc.
"""
CUDA_GDB_12 = """NVIDIA (R) cuda-gdb 12.8
Portions Copyright (C) 2007-2024 NVIDIA Corporation
Based on GNU gdb 13.2
Copyright (C) 2023 Free Software Foundation, Inc.
"""
CUDA_GDB_13_WRAPPER = """exec: /usr/local/cuda-13.0/bin/cuda-gdb-minimal --version
NVIDIA (R) cuda-gdb 13.0
Portions Copyright (C) 2007-2025 NVIDIA Corporation
Based on GNU gdb 14.2
"""
GDB = """GNU gdb (Debian 13.1-3) 13.1
Copyright (C) 2023 Free Software Foundation, Inc.
"""


def test_cuda_gdb_11_banner():
    assert versions.is_cuda_gdb(CUDA_GDB_11)
    assert versions.describe(CUDA_GDB_11) == "cuda-gdb 11.8 (GDB 10.2)"
    assert versions.describe(CUDA_GDB_11, "10.2") == "cuda-gdb 11.8 (GDB 10.2)"


def test_cuda_gdb_12_and_13_banners_have_no_release_line():
    assert versions.is_cuda_gdb(CUDA_GDB_12)
    assert versions.describe(CUDA_GDB_12) == "cuda-gdb 12.8 (GDB 13.2)"
    assert versions.is_cuda_gdb(CUDA_GDB_13_WRAPPER)
    assert versions.cuda_gdb_release(CUDA_GDB_13_WRAPPER) == "13.0"
    assert versions.describe(CUDA_GDB_13_WRAPPER, "14.2") == "cuda-gdb 13.0 (GDB 14.2)"


def test_gdb_banner_is_not_cuda_gdb():
    assert not versions.is_cuda_gdb(GDB)
    assert versions.cuda_gdb_release(GDB) is None
    assert versions.describe(GDB) == "gdb 13.1"
    assert versions.describe(GDB, "13.1") == "gdb 13.1"
    assert versions.describe("") == "gdb ?"


def _debugger_with_banner(monkeypatch, banner, version):
    """redzone_gdb.debugger imported against a stand-in gdb module whose `show version` prints banner."""
    import importlib
    import types
    fake = types.ModuleType("gdb")
    fake.VERSION = version
    fake.error = RuntimeError
    fake.execute = lambda cmd, to_string=False: banner if cmd == "show version" else ""
    monkeypatch.setitem(sys.modules, "gdb", fake)
    monkeypatch.delitem(sys.modules, "redzone_gdb.debugger", raising=False)
    mod = importlib.import_module("redzone_gdb.debugger")
    monkeypatch.delitem(sys.modules, "redzone_gdb.debugger")
    return mod


def test_the_plugin_knows_cuda_gdb_13_by_its_banner(monkeypatch):
    # Taken for gdb, cuda-gdb 13 would be asked to resume one thread alone (the agent), which it never can.
    d = _debugger_with_banner(monkeypatch, CUDA_GDB_13_WRAPPER[CUDA_GDB_13_WRAPPER.index("NVIDIA"):], "14.2")
    assert d.name() == "cuda-gdb"
    assert d.describe() == "cuda-gdb 13.0 (GDB 14.2)"
    assert not d.can_lock_scheduler()


def test_the_plugin_still_knows_cuda_gdb_11_and_gdb(monkeypatch):
    d = _debugger_with_banner(monkeypatch, CUDA_GDB_11, "10.2")
    assert (d.name(), d.describe()) == ("cuda-gdb", "cuda-gdb 11.8 (GDB 10.2)")
    d = _debugger_with_banner(monkeypatch, GDB, "13.1")
    assert (d.name(), d.describe(), d.can_lock_scheduler()) == ("gdb", "gdb 13.1", True)


def test_the_launcher_names_cuda_gdb_13(monkeypatch):
    # `redzone gdb: starting PATH, VERSION: why`: VERSION from `--version` (redzone_cli/gdb_launcher.py).
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "native", "tools"))
    from redzone_cli import gdb_launcher, paths
    # The launcher reads the banner with this same parser (versions.py, found beside the plugin it loads).
    monkeypatch.setattr(paths, "GDB_PLUGIN", os.path.join(os.path.dirname(__file__), "..", "..", "gdb", "redzone.py"))
    banners = {"13": CUDA_GDB_13_WRAPPER, "11": CUDA_GDB_11, "gdb": GDB}
    monkeypatch.setattr(gdb_launcher.subprocess, "run",
                        lambda argv, **kw: type("R", (), {"stdout": banners[argv[0]], "stderr": ""})())
    assert gdb_launcher.version("13") == "cuda-gdb 13.0 (GDB 14.2)"
    assert gdb_launcher.version("11") == "cuda-gdb 11.8 (GDB 10.2)"
    assert gdb_launcher.version("gdb") == "gdb 13.1"
