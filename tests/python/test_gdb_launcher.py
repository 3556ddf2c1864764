"""`redzone gdb`'s choice of debugger (native/tools/redzone_cli/gdb_launcher.py) on fake debugger layouts:
the CUDA toolkit's cuda-gdb 12.5+ wrapper with its cuda-gdb-python3.X-tui builds and cuda-gdb-minimal, a
cuda-gdb that is one program (11.x, Debian's 12.4), a debugger without Python; and the version line from
the banners (Debian 13's nvidia-cuda-gdb 12.4 captured from the real binary)."""
import os
import sys
import types

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "native", "tools"))
from redzone_cli import gdb_launcher, paths  # noqa: E402
from redzone_cli.options import Failure, UsageError  # noqa: E402

paths.GDB_PLUGIN = os.path.join(ROOT, "gdb", "redzone.py")

# `cuda-gdb --version` of Debian 13's non-free nvidia-cuda-gdb 12.4.127~12.4.1-2 (built without Python).
DEBIAN13_CUDA_GDB_12_4 = """NVIDIA (R) cuda-gdb 12.4
Portions Copyright (C) 2007-2023 NVIDIA Corporation
Based on GNU gdb 13.1
Copyright (C) 2023 Free Software Foundation, Inc.
License GPLv3+: GNU GPL version 3 or later <http://gnu.org/licenses/gpl.html>
This is free software: you are free to change and redistribute it.
There is NO WARRANTY, to the extent permitted by law.
"""


def fake(folder, name, text="#!/bin/sh\necho fake\n"):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)
    return path


@pytest.fixture
def toolkit(tmp_path):
    """bin/ as the 12.5+ toolkit lays it out, and an empty library folder."""
    bin_dir, lib_dir = tmp_path / "cuda" / "bin", tmp_path / "lib"
    bin_dir.mkdir(parents=True)
    lib_dir.mkdir()
    wrapper = fake(str(bin_dir), "cuda-gdb")
    fake(str(bin_dir), "cuda-gdb-minimal")
    for v in ("3.8", "3.10", "3.12", "3.9"):
        fake(str(bin_dir), f"cuda-gdb-python{v}-tui")
    return types.SimpleNamespace(bin=str(bin_dir), lib=str(lib_dir), wrapper=wrapper)


def test_the_newest_python_build_whose_libpython_is_installed(toolkit):
    open(os.path.join(toolkit.lib, "libpython3.10.so.1.0"), "w").close()
    open(os.path.join(toolkit.lib, "libpython3.9.so.1.0"), "w").close()
    path, note = gdb_launcher.resolve_cuda_gdb(toolkit.wrapper, dirs=[toolkit.lib])
    assert path == os.path.join(toolkit.bin, "cuda-gdb-python3.10-tui")
    assert "the build for Python 3.10 (libpython3.10 is installed)" in note and "cuda-gdb-minimal" in note


def test_versions_are_ordered_as_numbers(toolkit):
    assert [v for v, _ in gdb_launcher.python_builds(toolkit.wrapper)] == ["3.12", "3.10", "3.9", "3.8"]


def test_no_libpython_one_sentence_and_exit_127(toolkit):
    with pytest.raises(Failure) as e:
        gdb_launcher.resolve_cuda_gdb(toolkit.wrapper, dirs=[toolkit.lib])
    text = str(e.value)
    assert e.value.code == 127 and "\n" not in text
    assert "none of their libraries (libpython3.12, libpython3.10, libpython3.9, libpython3.8) is installed" in text
    assert "cuda-gdb-minimal, which has no Python" in text
    assert "apt-get install libpython3.12" in text and "redzone gdb --gdb gdb" in text


def test_a_symlinked_wrapper_finds_the_builds_beside_its_target(toolkit, tmp_path):
    usr_bin = tmp_path / "usr-bin"
    usr_bin.mkdir()
    link = usr_bin / "cuda-gdb"
    link.symlink_to(toolkit.wrapper)
    open(os.path.join(toolkit.lib, "libpython3.8.so.1.0"), "w").close()
    path, _ = gdb_launcher.resolve_cuda_gdb(str(link), dirs=[toolkit.lib])
    assert path == os.path.join(toolkit.bin, "cuda-gdb-python3.8-tui")


def test_a_cuda_gdb_that_is_one_program_is_started_itself(tmp_path):
    one = fake(str(tmp_path), "cuda-gdb")
    assert gdb_launcher.resolve_cuda_gdb(one, dirs=[]) == (one, "")


def test_default_choice_on_path_says_which_build(toolkit, monkeypatch):
    open(os.path.join(toolkit.lib, "libpython3.12.so.1.0"), "w").close()
    monkeypatch.setenv("PATH", toolkit.bin)
    monkeypatch.setattr(gdb_launcher, "_library_dirs", lambda: [toolkit.lib])
    path, why = gdb_launcher.choose(None)
    assert path.endswith("cuda-gdb-python3.12-tui")
    assert why.startswith("cuda-gdb is found first") and "the build for Python 3.12" in why


def test_gdb_given_as_the_wrapper_is_resolved_too(toolkit, monkeypatch):
    open(os.path.join(toolkit.lib, "libpython3.9.so.1.0"), "w").close()
    monkeypatch.setattr(gdb_launcher, "_library_dirs", lambda: [toolkit.lib])
    path, why = gdb_launcher.choose(toolkit.wrapper)
    assert path.endswith("cuda-gdb-python3.9-tui") and why.startswith("--gdb")


def test_a_debugger_without_python_is_refused(tmp_path, monkeypatch):
    nopy = fake(str(tmp_path), "cuda-gdb", "#!/bin/sh\n[ \"$1\" = --version ] && { printf '%s' \"$BANNER\"; exit 0; }\n"
                "echo 'Python scripting is not supported in this copy of GDB.'\n")
    prog = fake(str(tmp_path), "prog", "\x7fELF")
    monkeypatch.setenv("BANNER", DEBIAN13_CUDA_GDB_12_4)
    args = types.SimpleNamespace(gdb=nopy, emulated_device=True)
    with pytest.raises(Failure) as e:
        gdb_launcher.cmd_gdb(args, [prog])
    text = str(e.value)
    assert e.value.code == 127 and "\n" not in text
    assert f"{nopy} (cuda-gdb 12.4 (GDB 13.1)) has no Python" in text and "cannot load in it" in text


def test_version_lines():
    assert gdb_launcher.version("x", DEBIAN13_CUDA_GDB_12_4) == "cuda-gdb 12.4 (GDB 13.1)"
    assert gdb_launcher.version("x", "NVIDIA (R) cuda-gdb 13.1\nBased on GNU gdb 16.3\n") == "cuda-gdb 13.1 (GDB 16.3)"
    assert gdb_launcher.version("x", "NVIDIA (R) cuda-gdb 12.9\nBased on GNU gdb 14.2\n") == "cuda-gdb 12.9 (GDB 14.2)"
    assert gdb_launcher.version("x", "NVIDIA (R) CUDA Debugger\n11.8 release\nGNU gdb (GDB) 10.2\n") == \
        "cuda-gdb 11.8 (GDB 10.2)"
    assert gdb_launcher.version("x", "GNU gdb (Debian 16.3-1) 16.3\n") == "gdb 16.3"
    assert gdb_launcher.version("x", "") == "version unknown"


def test_debugger_options_and_program():
    assert gdb_launcher.split_words(["-batch", "-ex", "run", "--", "./p", "a"]) == (["-batch", "-ex", "run"],
                                                                                     ["./p", "a"])
    assert gdb_launcher.split_words(["./p", "--", "-x"]) == ([], ["./p", "--", "-x"])
    with pytest.raises(UsageError):
        gdb_launcher.split_words(["-batch", "./p"])
