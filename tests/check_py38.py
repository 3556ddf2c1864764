#!/usr/bin/env python3
"""ctest python38_compat: the Python that runs inside a debugger (gdb/), the launcher and tests/gpu/run
must run on Python 3.8, the oldest Python the cuda-gdb 12.x builds serve (cuda-gdb-python3.8-tui).

Debian 12 has no python3.8 to run them under, so this reads them: the syntax through the parser's 3.8
grammar (`ast.parse(..., feature_version=(3, 8))`: `match`, parenthesised with-items, `except*`), and for
what that grammar accepts but 3.8 cannot run, the constructs below (each names the version that brought it).

    check_py38.py FILE|DIR ...      exit 1 and one line per finding when anything newer than 3.8 is used
"""
import ast
import os
import sys

# module attributes (module, name) -> the version that added them
MODULE_ATTRS = {
    ("functools", "cache"): "3.9", ("math", "lcm"): "3.9", ("math", "nextafter"): "3.9", ("math", "ulp"): "3.9",
    ("ast", "unparse"): "3.9", ("os", "waitstatus_to_exitcode"): "3.9", ("os", "pidfd_open"): "3.9",
    ("random", "randbytes"): "3.9", ("sys", "platlibdir"): "3.9", ("asyncio", "to_thread"): "3.9",
    ("types", "GenericAlias"): "3.9", ("typing", "Annotated"): "3.9", ("itertools", "pairwise"): "3.10",
    ("typing", "TypeAlias"): "3.10", ("typing", "ParamSpec"): "3.10", ("typing", "TypeGuard"): "3.10",
    ("contextlib", "aclosing"): "3.10", ("contextlib", "chdir"): "3.11", ("typing", "Self"): "3.11",
    ("typing", "assert_never"): "3.11", ("dataclasses", "KW_ONLY"): "3.10", ("os", "process_cpu_count"): "3.13",
    ("itertools", "batched"): "3.12", ("typing", "override"): "3.12", ("shlex", "join"): None,
}
# methods of built-in types, called on anything
METHODS = {"removeprefix": "3.9 (str/bytes)", "removesuffix": "3.9 (str/bytes)", "bit_count": "3.10 (int)"}
MODULES = {"zoneinfo": "3.9", "graphlib": "3.9", "tomllib": "3.11"}
# keyword arguments (callable's last name, keyword) -> version
KEYWORDS = {("zip", "strict"): "3.10", ("dataclass", "slots"): "3.10", ("dataclass", "kw_only"): "3.10",
            ("run", "process_group"): "3.11", ("Popen", "process_group"): "3.11", ("Popen", "pipesize"): "3.10",
            ("run", "pipesize"): "3.10"}
GENERIC_BUILTINS = {"list", "dict", "tuple", "set", "frozenset", "type"}


def _dotted(node):
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _is_dict(node):
    return isinstance(node, (ast.Dict, ast.DictComp)) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict")


class Finder(ast.NodeVisitor):
    def __init__(self, future_annotations):
        self.found = []  # (line, text)
        self.future = future_annotations
        self.in_annotation = 0

    def add(self, node, text):
        self.found.append((getattr(node, "lineno", 0), text))

    # annotations are not evaluated under `from __future__ import annotations`
    def _annotation(self, node):
        if node is None:
            return
        if self.future:
            return
        self.in_annotation += 1
        self.visit(node)
        self.in_annotation -= 1

    def visit_arg(self, node):
        self._annotation(node.annotation)

    def visit_FunctionDef(self, node):
        for d in node.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            if not _dotted(target):
                self.add(d, "a decorator that is not a dotted name (optionally called): 3.9 (PEP 614)")
        self._annotation(node.returns)
        for d in node.decorator_list:
            self.visit(d)
        self.visit(node.args)
        for s in node.body:
            self.visit(s)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        for d in node.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            if not _dotted(target):
                self.add(d, "a decorator that is not a dotted name (optionally called): 3.9 (PEP 614)")
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self._annotation(node.annotation)
        if node.value is not None:
            self.visit(node.value)
        self.visit(node.target)

    def visit_Subscript(self, node):
        if isinstance(node.value, ast.Name) and node.value.id in GENERIC_BUILTINS:
            self.add(node, f"{node.value.id}[...] (a generic built-in, evaluated at run time): 3.9")
        self.generic_visit(node)

    def visit_BinOp(self, node):
        if isinstance(node.op, ast.BitOr):
            if _is_dict(node.left) or _is_dict(node.right):
                self.add(node, "dict | dict (dict union): 3.9")
            elif self.in_annotation or any(isinstance(x, ast.Constant) and x.value is None
                                           for x in (node.left, node.right)):
                self.add(node, "X | Y as a type (evaluated at run time): 3.10")
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        if isinstance(node.op, ast.BitOr) and _is_dict(node.value):
            self.add(node, "dict |= dict (dict union): 3.9")
        self.generic_visit(node)

    def visit_Attribute(self, node):
        if node.attr in METHODS:
            self.add(node, f".{node.attr}(): {METHODS[node.attr]}")
        if isinstance(node.value, ast.Name):
            v = MODULE_ATTRS.get((node.value.id, node.attr))
            if v:
                self.add(node, f"{node.value.id}.{node.attr}: {v}")
        self.generic_visit(node)

    def visit_Import(self, node):
        for a in node.names:
            top = a.name.split(".")[0]
            if top in MODULES:
                self.add(node, f"import {a.name}: {MODULES[top]}")

    def visit_ImportFrom(self, node):
        mod = (node.module or "").split(".")[0]
        if mod in MODULES:
            self.add(node, f"from {node.module} import: {MODULES[mod]}")
        for a in node.names:
            v = MODULE_ATTRS.get((node.module, a.name))
            if v:
                self.add(node, f"from {node.module} import {a.name}: {v}")

    def visit_Call(self, node):
        f = node.func
        last = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        for k in node.keywords:
            v = KEYWORDS.get((last, k.arg))
            if v:
                self.add(node, f"{last}(..., {k.arg}=...): {v}")
        if last == "isinstance" and len(node.args) == 2 and isinstance(node.args[1], ast.BinOp):
            self.in_annotation += 1
            self.visit(node.args[1])
            self.in_annotation -= 1
            for a in [f, node.args[0], *node.keywords]:
                self.visit(a)
            return
        self.generic_visit(node)


def check_source(src, name="<source>"):
    """[(line, finding)] for one file's text."""
    try:
        tree = ast.parse(src, name, feature_version=(3, 8))
    except SyntaxError as e:
        return [(e.lineno or 0, f"not Python 3.8 syntax: {e.msg}")]
    future = any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and
                 any(a.name == "annotations" for a in n.names) for n in tree.body)
    finder = Finder(future)
    finder.visit(tree)
    return sorted(finder.found)


def python_files(paths):
    for p in paths:
        if os.path.isdir(p):
            for d, dirs, files in os.walk(p):
                dirs[:] = sorted(x for x in dirs if x != "__pycache__")
                for f in sorted(files):
                    if f.endswith((".py", ".py.in")):
                        yield os.path.join(d, f)
        else:
            yield p


def main(argv):
    bad, n = 0, 0
    for path in python_files(argv[1:]):
        n += 1
        with open(path, encoding="utf-8") as f:
            for line, text in check_source(f.read(), path):
                print(f"{path}:{line}: {text}")
                bad += 1
    if n == 0:
        print("check_py38: no files given")
        return 1
    print(f"check_py38: {n} files, {bad} construct(s) newer than Python 3.8")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
