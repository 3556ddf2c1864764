#!/usr/bin/env python3
"""Writes after free, bad frees and leaks (issue 32 items 1-3), as the user's program makes them: programs/rzfree.c
run bare and with libredzone.so preloaded on the emulated driver, under every scan policy where it applies.
Each case asserts what the program gets (the driver's answers, the same bare and under redzone, but where the
quarantine holds memory the driver would have taken back) and what redzone reports, counted: one report per
fault, none where there is none. Exit status 0 when every case passed; each failure is printed."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

POLICIES = ["free", "sync", "launch", "exit", "fatal", "free,exit,fatal", "launch,free,exit", "sync,exit"]
AFTER_FREE = r"REDZONE VIOLATION alloc#0 user_bytes=256 : bytes \[16\.\.=31\] were written after free " \
             r"\(16 of 320 freed bytes changed\), first bad value 0x2a"

failures = []


def run(a, mode, env=None, bare=False, extra=(), band=True):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("METRALE_REDZONE") or k.startswith("CUDA_EMU"):
            del e[k]
    e["LD_LIBRARY_PATH"] = a.emu
    if not bare:
        e["LD_PRELOAD"] = a.lib
        if band:  # else the library's default band
            e["METRALE_REDZONE"] = "64"
    e.update(env or {})
    p = subprocess.run([a.rzfree, mode, *extra], env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def check(name, ok, out):
    if ok:
        print(f"ok   {name}")
    else:
        print(f"FAIL {name}\n---- output ----\n{out}----------------")
        failures.append(name)


def count(pattern, out):
    return len(re.findall(pattern, out))


def stale(a):
    rc, out = run(a, "stale", bare=True)
    check("stale bare: the driver refuses the store into freed memory",
          rc == 0 and "rzfree: stale store: 1" in out and "REDZONE" not in out, out)
    for policy in POLICIES:
        rc, out = run(a, "stale", {"METRALE_REDZONE_SCAN": policy})
        check(f"stale SCAN={policy}: one written-after-free report, naming the launch since the free",
              rc == 0 and count(AFTER_FREE, out) == 1 and "1 kernel launch since the free" in out and
              re.search(r"launch #\d+ fill", out) is not None and "rzfree: done" in out, out)
        rc, out = run(a, "stale_async", {"METRALE_REDZONE_SCAN": policy})
        check(f"stale_async SCAN={policy}: a stream-ordered free, then the stale store: one report",
              rc == 0 and count(AFTER_FREE, out) == 1 and "rzfree: done" in out, out)
    for policy in POLICIES:
        rc, out = run(a, "stale_kernel", {"METRALE_REDZONE_SCAN": policy})
        if "launch" in policy.split(","):
            named = (re.search(r"written by kernel scribble \(launch #2, stream 0x0\): the first launch after the "
                               r"free whose check saw it changed", out) is not None and "since the free" not in out)
            what = "naming the launch that wrote it"
        else:
            named = (re.search(r"3 kernel launches since the free; the newest:\n\s+launch #3 fill\n\s+launch #2 "
                               r"scribble\n\s+launch #1 fill\n", out) is not None and "written by kernel" not in out)
            what = "listing the kernels launched since the free"
        check(f"stale_kernel SCAN={policy}: a kernel writes the freed buffer: one report, {what}",
              rc == 0 and count(AFTER_FREE, out) == 1 and named and "rzfree: stale kernel: 0" in out, out)
    rc, out = run(a, "stale", {"METRALE_REDZONE_SCAN": "none"})
    check("stale SCAN=none: nothing checked, nothing said", rc == 0 and "REDZONE" not in out, out)
    rc, out = run(a, "stale_host", {})
    check("stale_host: a host copy into a held block is reported too", rc == 0 and count(AFTER_FREE, out) == 1, out)
    rc, out = run(a, "stale", {"METRALE_REDZONE_STACKS": "8"})
    check("stale with stacks: the allocation and the free stacks",
          re.search(r"alloc#0 was allocated at:\n\s+#0 .* in alloc", out) is not None and
          re.search(r"alloc#0 was freed at:\n\s+#0 .* in main", out) is not None, out)
    rc, out = run(a, "stale", {"METRALE_REDZONE_QUARANTINE": "0"})
    check("stale QUARANTINE=0: the memory goes back at once, as bare",
          rc == 0 and "rzfree: stale store: 1" in out and "after free" not in out, out)
    rc, out = run(a, "stale", {"METRALE_REDZONE": "0"})
    check("stale without bands: the quarantine still holds the buffer", rc == 0 and
          count(r"REDZONE VIOLATION alloc#0 user_bytes=256 : bytes \[16\.\.=31\] were written after free "
                r"\(16 of 256 freed bytes changed\)", out) == 1, out)
    rc, out = run(a, "stale", {"METRALE_REDZONE_FREE_FILL": "42"})
    check("stale FREE_FILL=42 (the stale byte itself): nothing to see", rc == 0 and "after free" not in out, out)
    rc, out = run(a, "evict", {"METRALE_REDZONE_QUARANTINE": "8K"})
    check("evict: the oldest block is checked as it leaves the quarantine, before the program goes on",
          rc == 0 and count(AFTER_FREE, out) == 1 and out.find("after free") < out.find("rzfree: evicted"), out)
    rc, out = run(a, "ctxend", {})
    check("ctxend: a context that ends has its held blocks checked, then forgotten; the next one works",
          rc == 0 and count(AFTER_FREE, out) == 1 and out.find("after free") < out.find("context ended") and
          "rzfree: done" in out and "failed" not in out, out)


def bad_frees(a):
    _, bare = run(a, "double", bare=True)
    for q in ("64M", "0"):
        for policy in ("free,exit,fatal", "sync", "launch", "none"):
            rc, out = run(a, "double", {"METRALE_REDZONE_QUARANTINE": q, "METRALE_REDZONE_SCAN": policy})
            check(f"double QUARANTINE={q} SCAN={policy}: the driver's answers unchanged, one double-free report",
                  rc == 0 and "rzfree: first free: 0\n" in bare and "rzfree: second free: 1\n" in bare and
                  "rzfree: second free: 1\n" in out and
                  count(r"redzone: bad free of 0x[0-9a-f]+: double free of alloc#0 \(user_bytes=256\), freed already; "
                        r"CUDA_ERROR_INVALID_VALUE returned as without redzone", out) == 1, out)
    _, bare = run(a, "interior", bare=True)
    rc, out = run(a, "interior", {})
    check("interior: the driver's answer unchanged, reported with the offset",
          rc == 0 and "rzfree: interior free: 1\n" in bare and "rzfree: interior free: 1\n" in out and
          "rzfree: real free: 0\n" in out and
          count(r"bad free of 0x[0-9a-f]+: 16 bytes into alloc#0 \(user_bytes=256\), not its start", out) == 1, out)
    for mode, answer in (("ended", 1), ("ended_none", 201)):
        _, bare = run(a, mode, bare=True)
        want = (f"rzfree: free after its context ended: {answer}\n", f"rzfree: inside it: {answer}\n")
        for policy, band in (("free,exit,fatal", True), ("sync", True), ("none", True), ("free,exit,fatal", False)):
            rc, out = run(a, mode, {"METRALE_REDZONE_SCAN": policy, "METRALE_REDZONE_STACKS": "8"}, band=band)
            check(f"{mode} SCAN={policy}{'' if band else ' (default band: lazily installed)'}: the driver's answers unchanged, both frees reported as after the context "
                  "ended, with the allocation, and both stacks",
                  rc == 0 and all(w in bare and w in out for w in want) and
                  count(r"redzone: bad free of 0x[0-9a-f]+: alloc#0 \(user_bytes=256\) after its context ended "
                        rf"\(its memory went with the context\); {'CUDA_ERROR_INVALID_VALUE' if answer == 1 else 'CUDA_ERROR_INVALID_CONTEXT'} "
                        "returned as without redzone", out) == 1 and
                  count(r"redzone: bad free of 0x[0-9a-f]+: 16 bytes into alloc#0 \(user_bytes=256\), after its "
                        r"context ended", out) == 1 and
                  "foreign" not in out and "no allocation redzone knows" not in out and
                  out.count("  this free:") == 2 and out.count("alloc#0 was allocated at:") == 2 and
                  "rzfree: done" in out, out)
    rc, out = run(a, "double", {"METRALE_REDZONE_STACKS": "8"})
    check("double with stacks: this free, the earlier free and the allocation",
          "  this free:" in out and "alloc#0 was freed at:" in out and "alloc#0 was allocated at:" in out, out)


def leaks(a):
    with tempfile.TemporaryDirectory() as d:
        summary = os.path.join(d, "summary")
        rc, out = run(a, "leak", {"METRALE_REDZONE_SUMMARY": summary})
        text = open(summary).read() if os.path.exists(summary) else ""
        check("leak without LEAK_CHECK: nothing reported, nothing counted",
              rc == 0 and "leak" not in out and "violations=0 " in text, out + text)
        os.unlink(summary) if os.path.exists(summary) else None
        rc, out = run(a, "leak", {"METRALE_REDZONE_SUMMARY": summary, "METRALE_REDZONE_LEAK_CHECK": "1",
                                  "METRALE_REDZONE_STACKS": "8"})
        text = open(summary).read() if os.path.exists(summary) else ""
        check("leak with LEAK_CHECK and stacks: two groups, largest first, counted for --error-exitcode",
              rc == 0 and "leak check: 3172 bytes in 4 allocations still live at exit, from 2 allocation stacks" in out
              and re.search(r"leak: 3072 bytes in 3 allocations \(first alloc#0\) allocated at:\n.*in alloc\+.*\n"
                            r".*in leak_here", out) is not None and
              out.find("leak: 3072") < out.find("leak: 100 bytes in 1 allocation (first alloc#3)") and
              "violations=2 " in text, out + text)
        rc, out = run(a, "leak", {"METRALE_REDZONE_LEAK_CHECK": "1", "METRALE_REDZONE_SCAN": "none"})
        check("leak with LEAK_CHECK, no stacks: one group",
              "leak check: 3172 bytes in 4 allocations still live at exit" in out and
              "leak: 3172 bytes in 4 allocations (first alloc#0)" in out, out)


def memory(a):
    rc, bare = run(a, "oom", {"CUDA_EMU_MEM": "64M"}, bare=True)
    rc2, out = run(a, "oom", {"CUDA_EMU_MEM": "64M"})
    check("oom: an allocation that would fail for the held bytes drains the quarantine and succeeds, as bare",
          rc == 0 and rc2 == 0 and "rzfree: second allocation: 0" in bare and "rzfree: second allocation: 0" in out and
          "retrying without a band" not in out, out)
    for kind in ("managed", "pitch", "async", "pool", "vmm"):
        rc, bare = run(a, "oom", {"CUDA_EMU_MEM": "64M"}, bare=True, extra=(kind,))
        rc2, out = run(a, "oom", {"CUDA_EMU_MEM": "64M"}, extra=(kind,))
        check(f"oom {kind}: the entry point runs out only for the held bytes: the quarantine drains, it succeeds",
              rc == 0 and rc2 == 0 and "rzfree: second allocation: 0" in bare and
              "rzfree: second allocation: 0" in out and "retrying without a band" not in out, bare + out)
    rc, out = run(a, "churn", {"CUDA_EMU_MEM": "32M", "METRALE_REDZONE_QUARANTINE": "8M"}, extra=("300",))
    check("churn: 300 MiB freed through an 8 MiB quarantine in 32 MiB of device memory",
          rc == 0 and "rzfree: done" in out and "REDZONE" not in out, out)


def records(a):
    """The new kinds go through the one findings path (output/finding.c, issue 31): each is a record of its kind in
    the report file, and a kind: rule suppresses it (neither reported nor counted)."""
    import json
    with tempfile.TemporaryDirectory() as d:
        for mode, kind, env in (("stale", "write-after-free", {}), ("double", "bad-free", {}),
                                ("interior", "bad-free", {}), ("ended", "bad-free", {}), ("leak", "leak", {"METRALE_REDZONE_LEAK_CHECK": "1"})):
            rep, summary, rules = (os.path.join(d, n) for n in (f"{mode}.jsonl", f"{mode}.sum", f"{mode}.supp"))
            rc, out = run(a, mode, dict(env, METRALE_REDZONE_REPORT=rep))
            recs = [json.loads(l) for l in open(rep).read().splitlines()] if os.path.exists(rep) else []
            found = [r for r in recs if r.get("type") == "finding"]
            check(f"{mode}: its finding is a '{kind}' record in the report file, and the summary counts it",
                  rc == 0 and found and all(r["kind"] == kind for r in found) and
                  recs[-1].get("type") == "summary" and recs[-1]["kinds"].get(kind) == len(found), out + str(recs))
            with open(rules, "w") as f:
                f.write(f"# {mode}\nkind:{kind}\n")
            rc, out = run(a, mode, dict(env, METRALE_REDZONE_SUPPRESSIONS=rules, METRALE_REDZONE_SUMMARY=summary))
            text = open(summary).read() if os.path.exists(summary) else ""
            check(f"{mode}: kind:{kind} suppresses it: no report, not counted, the exit line says so",
                  rc == 0 and "REDZONE VIOLATION" not in out and "bad free of" not in out and
                  "redzone: leak:" not in out and "violations=0 " in text and "suppressed" in out, out + text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rzfree", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--emu", required=True)
    ap.add_argument("only", nargs="*")
    a = ap.parse_args()
    for fn in (stale, bad_frees, leaks, memory, records):
        if not a.only or fn.__name__ in a.only:
            fn(a)
    if failures:
        print(f"{len(failures)} failed: " + "; ".join(failures))
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
