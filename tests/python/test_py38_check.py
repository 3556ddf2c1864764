"""tests/check_py38.py (ctest python38_compat) finds what Python 3.8 cannot run, and nothing else."""
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import check_py38  # noqa: E402

NEWER = [
    ("name = text.removeprefix('redzone: ')\n", ".removeprefix(): 3.9"),
    ("name = text.removesuffix('.py')\n", ".removesuffix(): 3.9"),
    ("import functools\n@functools.cache\ndef f():\n    pass\n", "functools.cache: 3.9"),
    ("from functools import cache\n", "from functools import cache: 3.9"),
    ("import math\nx = math.lcm(2, 3)\n", "math.lcm: 3.9"),
    ("import zoneinfo\n", "import zoneinfo: 3.9"),
    ("def f(x: list[int]):\n    pass\n", "list[...] (a generic built-in, evaluated at run time): 3.9"),
    ("Rows = dict[str, int]\n", "dict[...] (a generic built-in, evaluated at run time): 3.9"),
    ("def f(x: int | None):\n    pass\n", "X | Y as a type (evaluated at run time): 3.10"),
    ("ok = isinstance(x, int | str)\n", "X | Y as a type (evaluated at run time): 3.10"),
    ("merged = {'a': 1} | other\n", "dict | dict (dict union): 3.9"),
    ("env |= dict(A='1')\n", "dict |= dict (dict union): 3.9"),
    ("match x:\n    case 1:\n        pass\n", "not Python 3.8 syntax: Pattern matching"),
    ("with (open('a') as f, open('b') as g):\n    pass\n", "not Python 3.8 syntax: Parenthesized context managers"),
    ("@buttons[0].clicked.connect\ndef f():\n    pass\n", "a decorator that is not a dotted name"),
    ("pairs = list(zip(a, b, strict=True))\n", "zip(..., strict=...): 3.10"),
    ("n = x.bit_count()\n", ".bit_count(): 3.10 (int)"),
]

FINE = [
    "from __future__ import annotations\ndef f(x: list[int] | None) -> dict[str, int]:\n    pass\n",
    "flags = os.O_RDONLY | os.O_CLOEXEC\n",
    "if (n := len(a)) > 2:\n    pass\n",
    "def f(a, /, b):\n    print(f'{a=}')\n",
    "@functools.lru_cache(maxsize=None)\ndef f():\n    pass\n",
    "import shlex\ntext = shlex.join(argv)\n",
    "x = text[len(prefix):] if text.startswith(prefix) else text\n",
    "from typing import List, Optional\ndef f(x: Optional[List[int]]):\n    pass\n",
]


@pytest.mark.parametrize("src,finding", NEWER)
def test_finds_what_3_8_cannot_run(src, finding):
    found = check_py38.check_source(src)
    assert found, f"nothing found in {src!r}"
    assert any(text.startswith(finding) for _, text in found), found


@pytest.mark.parametrize("src", FINE)
def test_leaves_what_3_8_runs(src):
    assert check_py38.check_source(src) == []


def test_the_command_fails_on_a_file_that_uses_removeprefix(tmp_path):
    good = tmp_path / "good.py"
    good.write_text("def f(t):\n    return t[3:] if t.startswith('rz:') else t\n")
    bad = tmp_path / "bad.py"
    bad.write_text("def f(t):\n    return t.removeprefix('rz:')\n")
    script = os.path.join(os.path.dirname(__file__), "..", "check_py38.py")
    ok = subprocess.run([sys.executable, script, str(good)], stdout=subprocess.PIPE, universal_newlines=True)
    assert ok.returncode == 0, ok.stdout
    r = subprocess.run([sys.executable, script, str(tmp_path)], stdout=subprocess.PIPE, universal_newlines=True)
    assert r.returncode == 1
    assert f"{bad}:2: .removeprefix(): 3.9 (str/bytes)" in r.stdout.splitlines()
    assert r.stdout.splitlines()[-1] == "check_py38: 2 files, 1 construct(s) newer than Python 3.8"
