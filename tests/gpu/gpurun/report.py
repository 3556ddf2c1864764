"""gpu-results.md: written after every step, so a run cut short still leaves its report."""
import datetime
import os


def excerpt(text, lines=40):
    ls = text.rstrip("\n").splitlines()
    if len(ls) > lines:
        ls = [f"[... {len(ls) - lines} lines before; the whole output is in the log]"] + ls[-lines:]
    return "\n".join(l.replace("```", "'''") for l in ls)


def write_report(run):
    counts = summary_counts(run)
    path = os.path.join(run.out, "gpu-results.md")
    with open(path, "w") as f:
        w = lambda t="": f.write(t + "\n")  # noqa: E731
        w("# GPU run results")
        w()
        w("Written by `tests/gpu/run` (docs/gpu.md says how to read it)" +
          (", on the emulated device: a rehearsal, not GPU results." if run.emulated else "."))
        w()
        w("| | |")
        w("|---|---|")
        for k, v in run.versions:
            w(f"| {k} | {v.replace('|', '/')} |")
        w(f"| total time | {(datetime.datetime.now(datetime.timezone.utc) - run.started).total_seconds():.0f} s |")
        w()
        w(f"**gpu run: {counts}**")
        w()
        w("| step | result | seconds | scan method | reason / notes |")
        w("|---|---|---|---|---|")
        for name, status, secs, reason, s in run.results:
            method = (s.method or "") if s else ""
            w(f"| {name} | {status} | {secs:.1f} | {method} | {reason.replace('|', '/')} |")
        for title, rows in run.tables.items():
            w()
            w(f"## {title}")
            w()
            for r in rows:
                w(r)
        w()
        w("## Every step, with the commands that produced it")
        for name, status, secs, reason, s in run.results:
            w()
            w(f"### {name}: {status}")
            w()
            if reason:
                w(f"{reason}")
                w()
            if s is None:
                continue
            for ok, what in s.checks:
                w(f"- [{'x' if ok else ' '}] {what}")
            for n in s.notes:
                w(f"- note: {n}")
            for c in s.cmds:
                w()
                late = ", timed out" if c.timed_out else ""
                w(f"```text\n$ {c.shell_text()}\n# exit {c.rc}, {c.seconds:.2f} s{late}")
                w(excerpt(c.out))
                w("```")
            w()
            w(f"Log: `logs/{name}.txt`")
    return path


def summary_counts(run):
    n = sum(1 for r in run.results if r[1] == "PASS")
    m = sum(1 for r in run.results if r[1] == "SKIP")
    k = sum(1 for r in run.results if r[1] == "FAIL")
    return f"{n} steps passed, {m} skipped, {k} failed"

