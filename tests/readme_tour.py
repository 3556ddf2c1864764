#!/usr/bin/env python3
"""The README tour (and docs/bisect.md's example) run exactly as written, on the emulated device: every
fenced block that starts with `$ COMMAND` is run from build/examples with build/bin first on PATH, in a
pseudo-terminal (so the program's stdout and the library's stderr interleave as a user sees them), with
`--emulated-device` added after `redzone run` / `redzone bisect` (and taken out of the output again, where
bisect's reproduce line repeats it); its output must be the lines shown.
Addresses (0x + 6 or more hex digits) and offsets (`main+0x85`) match any; a line `...` matches any lines.

  readme_tour.py BUILD_DIR FILE.md...     exit 0: every block matched; 1: a block differed (shown)
Each command's exit status must be the one EXIT_STATUS gives it (docs/running.md and docs/bisect.md, "Exit
status"); a command missing there fails, naming itself.
Blocks for `redzone gdb` are not run here (tests/gdb covers the plugin); each one is listed.
With README.md among the files, the counts the docs give of the tests are checked too (docs/gdb.md's bad
inputs against tests/gdb/case_bad_input.py)."""
import os
import pty
import re
import subprocess
import sys

# The status each shown command must exit with, and why (no --error-exitcode in the tour: the program's own).
EXIT_STATUS = {
    "redzone run -- ./kernel_overrun": 0,  # the program's own (returns 0); violations alone change nothing
    "redzone run --scan launch,free,exit,fatal -- ./stream_overrun": 0,  # the program's own
    "METRALE_REDZONE_STACKS=1 redzone run -- ./copy_overrun": 0,  # the program's own: it reports the refusal, returns 0
    "redzone bisect -- ./read_overrun": 0,  # docs/bisect.md: 0, culprits named and confirmed
    "redzone bisect --emulated-device -- ./read_overrun": 0,
}

ADDRESS = re.compile(r"0x[0-9a-f]{6,}|(?<=\+)0x[0-9a-f]+")  # addresses, and offsets in functions


def blocks(text):
    """(line number, command, expected lines) for each ``` block whose first line is `$ command`."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            start = i
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            body = lines[i + 1:j]
            if body and body[0].startswith("$ "):
                yield start + 1, body[0][2:], body[1:]
            i = j + 1
        else:
            i += 1


def run_in_pty(command, cwd, env):
    master, slave = pty.openpty()
    p = subprocess.Popen(["sh", "-c", command], cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=slave,
                         stderr=slave, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    status = p.wait()
    return b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n").rstrip("\n").split("\n"), status


def matches(expected, actual):
    """Line by line; `...` matches any number of lines; addresses match any address."""
    if not expected:
        return not actual
    head = expected[0].strip()
    if head == "...":
        return any(matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    if not actual:
        return False
    return ADDRESS.sub("0x?", expected[0]) == ADDRESS.sub("0x?", actual[0]) and matches(expected[1:], actual[1:])


def bad_inputs(case):
    """The bad inputs tests/gdb/case_bad_input.py tries: its CASES rows and its other expect_error calls."""
    with open(case) as f:
        text = f.read()
    rows = re.findall(r"^\s+\((?:f?[\"'])", text, re.M)
    calls = re.findall(r"expect_error\(f?[\"']", text)
    return len(rows) + len(calls)


def numbers_in_docs(readme):
    """Counts the docs state about the tests, against the tests (issue 31, item 11): docs/gdb.md's number of
    bad inputs. Returns the lines that differ."""
    source = os.path.dirname(os.path.abspath(readme))
    gdb_md = os.path.join(source, "docs", "gdb.md")
    case = os.path.join(source, "tests", "gdb", "case_bad_input.py")
    with open(gdb_md) as f:
        said = re.findall(r"(\d+) bad inputs", f.read())
    tried = bad_inputs(case)
    return [f"docs/gdb.md says {n} bad inputs; tests/gdb/case_bad_input.py tries {tried}"
            for n in said if int(n) != tried]


def main():
    build, files = os.path.abspath(sys.argv[1]), sys.argv[2:]
    wrong = [x for path in files if os.path.basename(path) == "README.md" for x in numbers_in_docs(path)]
    for line in wrong:
        print(f"readme_tour: DOCS WRONG: {line}")
    env = dict(os.environ, PATH=os.path.join(build, "bin") + os.pathsep + os.environ.get("PATH", ""))
    for var in list(env):
        if var.startswith("METRALE_REDZONE"):
            del env[var]
    failed = ran = 0
    for path in files:
        with open(path) as f:
            text = f.read()
        for line, command, expected in blocks(text):
            where = f"{os.path.basename(path)}:{line}"
            if command.startswith("redzone gdb"):
                print(f"{where}: not run here (gdb session; tests/gdb covers it): $ {command}")
                continue
            cmd = re.sub(r"\bredzone (run|bisect)\b(?! --emulated-device)", r"redzone \1 --emulated-device",
                         command, count=1)
            actual, status = run_in_pty(cmd, os.path.join(build, "examples"), env)
            if cmd != command:  # the flag this test added shows in bisect's reproduce line: as on a GPU, without
                actual = [x.replace(" --emulated-device", "") for x in actual]
            ran += 1
            want = EXIT_STATUS.get(command)
            if want is None:
                failed += 1
                print(f"{where}: NO EXPECTED EXIT STATUS for $ {command} (it exited {status}): add it to "
                      "EXIT_STATUS in tests/readme_tour.py")
            elif status != want:
                failed += 1
                print(f"{where}: EXIT STATUS {status}, not {want}: $ {cmd}\n" + "\n".join(actual))
            elif matches(expected, actual):
                print(f"{where}: as shown, exit status {status}: $ {command}")
            else:
                failed += 1
                print(f"{where}: DIFFERS: $ {cmd}\n--- shown\n" + "\n".join(expected) + "\n--- got\n"
                      + "\n".join(actual) + "\n---")
    print(f"readme_tour: {ran} commands run, {failed} differ")
    return 1 if failed or wrong or not ran else 0


if __name__ == "__main__":
    sys.exit(main())
