"""Issue 31 items 2-5: the report file (JSON Lines, SARIF), %q{ENV} in file names, suppressions, the print limit
and halting at the first finding, each shown by tests/programs/rzreport.c (a program that knows nothing of
redzone) preloaded with libredzone.so on the emulated driver. The records are checked against the schema that
docs/report-format.md documents (docs/report-format.schema.json) with schema_check.py.
Environment (tests/CMakeLists.txt): RZREPORT, RZ_LIBREDZONE, RZ_EMU_DIR, RZ_SOURCE_DIR."""
import json
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import schema_check  # noqa: E402

PROG = os.environ.get("RZREPORT", "")
LIB = os.environ.get("RZ_LIBREDZONE", "")
EMU = os.environ.get("RZ_EMU_DIR", "")
SRC = os.environ.get("RZ_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))

if not (PROG and LIB and EMU):
    pytest.fail("RZREPORT, RZ_LIBREDZONE and RZ_EMU_DIR must be set (run through ctest -R report_file)",
                pytrace=False)

HALT_STATUS = 86  # RZ_HALT_STATUS, docs/report-format.md


def kinds_in_table():
    """The kind names of native/src/output/finding.h's table."""
    with open(os.path.join(SRC, "native", "src", "output", "finding.h")) as f:
        return re.findall(r'^\s*X\(\w+, "([a-z-]+)"', f.read(), flags=re.M)


def schema():
    with open(os.path.join(SRC, "docs", "report-format.schema.json")) as f:
        return json.load(f)


def run(mode, tmp_path, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("METRALE_REDZONE")}
    e.update({"LD_PRELOAD": LIB, "LD_LIBRARY_PATH": EMU, "METRALE_REDZONE": "64", "METRALE_REDZONE_AGENT": "0"})
    e.update({k: str(v) for k, v in env.items()})
    return subprocess.run([PROG, mode], env=e, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)


def reports(text):
    """The finding reports' first lines in a log."""
    return [l for l in text.splitlines() if l.startswith("REDZONE VIOLATION") or l.startswith("redzone: copy ")]


def jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f.read().splitlines()]


def check_records(records):
    s, kinds = schema(), kinds_in_table()
    for r in records:
        assert schema_check.check(r, s) == [], r
        if r["type"] == "finding":
            assert r["kind"] in kinds
        else:
            assert sorted(r["kinds"]) == sorted(kinds)


# ---- item 2: the report file --------------------------------------------------------------------------------
def test_jsonl_one_record_per_finding_and_a_summary(tmp_path):
    out = tmp_path / "r.jsonl"
    p = run("faults", tmp_path, METRALE_REDZONE_REPORT=out, METRALE_REDZONE_STACKS=8)
    assert p.returncode == 0, p.stderr
    recs = jsonl(out)
    check_records(recs)
    assert [r["type"] for r in recs] == ["finding"] * 3 + ["summary"]
    copy, a, b, summary = recs
    assert copy["kind"] == "copy-refused" and copy["entry"] == "cuMemcpyHtoD" and copy["bytes"] == 8
    assert (copy["alloc"], copy["user_bytes"], copy["first"], copy["last"]) == (0, 100, 0, 3)
    assert [f["function"] for f in copy["call_stack"]][:2] == ["faults", "main"]
    assert (a["kind"], a["alloc"], a["user_bytes"], a["pad"], a["first"], a["last"], a["changed"],
            a["first_bad"]) == ("overrun", 0, 100, 64, 0, 3, 4, 0xAB)
    assert (b["alloc"], b["user_bytes"], b["last"], b["changed"], b["first_bad"]) == (1, 200, 1, 2, 0xCD)
    assert "write_past" in a["kernels"] and "scribble" in b["kernels"]
    assert [f["function"] for f in a["alloc_stack"]][:2] == ["make_buffer", "faults"]
    assert a["message"] in p.stderr and b["message"] in p.stderr
    assert [r["seq"] for r in recs[:3]] == [1, 2, 3] and len({r["pid"] for r in recs}) == 1
    assert (summary["findings"], summary["suppressed"], summary["halted"]) == (3, 0, False)
    assert summary["kinds"]["overrun"] == 2 and summary["kinds"]["copy-refused"] == 1


def test_jsonl_names_the_launch_that_wrote(tmp_path):
    out = tmp_path / "r.jsonl"
    p = run("faults", tmp_path, METRALE_REDZONE_REPORT=out, METRALE_REDZONE_SCAN="launch,free,exit")
    assert p.returncode == 0, p.stderr
    recs = [r for r in jsonl(out) if r["type"] == "finding" and r["kind"] == "overrun"]
    check_records(recs)
    assert [r["launch"]["kernel"] for r in recs] == ["write_past", "scribble"]
    assert all(r["kernels"] == [] and r["launch"]["launch"] > 0 for r in recs)


def sarif_ok(doc, results):
    assert doc["version"] == "2.1.0"
    run_ = doc["runs"][0]
    rules = [r["id"] for r in run_["tool"]["driver"]["rules"]]
    assert rules == kinds_in_table()
    assert len(run_["results"]) == results
    for r in run_["results"]:
        assert r["ruleId"] in rules and rules[r["ruleIndex"]] == r["ruleId"] and r["level"] == "error"
        assert r["message"]["text"]
        for loc in r["locations"]:
            assert "absoluteAddress" in loc["physicalLocation"]["address"]
        assert schema_check.check(dict(r["properties"], type="finding"), schema()) == []
    return run_


def test_sarif_is_one_document_with_a_result_per_finding(tmp_path):
    out = tmp_path / "r.sarif"
    p = run("faults", tmp_path, METRALE_REDZONE_REPORT=out, METRALE_REDZONE_STACKS=8)
    assert p.returncode == 0, p.stderr
    with open(out) as f:
        doc = json.load(f)
    run_ = sarif_ok(doc, 3)
    assert [r["ruleId"] for r in run_["results"]] == ["copy-refused", "overrun", "overrun"]
    names = [l["logicalLocations"][0]["name"] for l in run_["results"][1]["locations"] if "logicalLocations" in l]
    assert names[:2] == ["make_buffer", "faults"]
    uri = run_["results"][1]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.startswith("file:///") and uri.endswith("/rzreport")
    assert run_["properties"]["complete"] is True and run_["properties"]["findings"] == 3


def test_sarif_stays_one_document_across_a_fork(tmp_path):
    out = tmp_path / "r.sarif"
    p = run("fork", tmp_path, METRALE_REDZONE_REPORT=out)
    assert p.returncode == 0, p.stderr
    assert "rzreport: child exited 0" in p.stdout
    with open(out) as f:
        doc = json.load(f)
    run_ = sarif_ok(doc, 2)
    assert run_["properties"]["complete"] is True
    assert sorted(os.listdir(str(tmp_path))) == ["r.sarif"]  # the child found nothing: no file of its own


def test_jsonl_across_a_fork_has_one_summary(tmp_path):
    out = tmp_path / "r.jsonl"
    p = run("fork", tmp_path, METRALE_REDZONE_REPORT=out)
    assert p.returncode == 0, p.stderr
    recs = jsonl(out)
    check_records(recs)
    assert [r["type"] for r in recs] == ["finding", "finding", "summary"]


@pytest.mark.parametrize("name", ["r.jsonl", "r.sarif"])
def test_report_never_lands_in_a_file_the_program_opened(tmp_path, name):
    """The program closes every descriptor and opens data.txt, which gets the report file's number."""
    p = run("reuse", tmp_path, METRALE_REDZONE_REPORT=name, METRALE_REDZONE_LOG="log")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "data.txt").read_text() == "program data\nmore data\n"
    if name.endswith(".sarif"):
        with open(str(tmp_path / name)) as f:
            sarif_ok(json.load(f), 2)
    else:
        recs = jsonl(tmp_path / name)
        check_records(recs)
        assert [r["type"] for r in recs] == ["finding", "finding", "summary"]


# ---- item 3: %q{ENV} ----------------------------------------------------------------------------------------
def test_q_env_in_log_and_report_names(tmp_path):
    p = run("faults", tmp_path, METRALE_REDZONE_LOG="log.%q{RANK}.%p", METRALE_REDZONE_REPORT="rep.%q{RANK}.jsonl",
            RANK="3")
    assert p.returncode == 0, p.stderr
    names = sorted(os.listdir(str(tmp_path)))
    assert len(names) == 2 and names[1] == "rep.3.jsonl" and re.match(r"^log\.3\.\d+$", names[0]), names
    with open(str(tmp_path / names[0])) as f:
        assert len(reports(f.read())) == 3
    assert reports(p.stderr) == []


def test_q_env_unset_is_empty_and_bad_q_is_a_warning(tmp_path):
    p = run("faults", tmp_path, METRALE_REDZONE_REPORT="rep%q{NO_SUCH_VAR_31}.jsonl", METRALE_REDZONE_LOG="l%q")
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(str(tmp_path))) == ["rep.jsonl"]
    warn = [l for l in p.stderr.splitlines() if "METRALE_REDZONE_LOG" in l]
    assert warn == ['redzone: warning: METRALE_REDZONE_LOG="l%q" has a %q not followed by {NAME} (letters, digits, '
                    '_); using stderr'], p.stderr


# ---- item 4: suppressions -----------------------------------------------------------------------------------
def summary_line(tmp_path):
    with open(str(tmp_path / "summary")) as f:
        return f.read()


def exit_line(text):
    return [l for l in text.splitlines() if l.startswith("redzone: exit:")][-1]


def test_suppress_by_kernel(tmp_path):
    (tmp_path / "supp").write_text("# the scribbler is known\n\nkernel:scrib*   # its overrun\n")
    p = run("faults", tmp_path, METRALE_REDZONE_SUPPRESSIONS="supp", METRALE_REDZONE_SCAN="launch,free,exit",
            METRALE_REDZONE_SUMMARY="summary", METRALE_REDZONE_REPORT="r.jsonl")
    assert p.returncode == 0, p.stderr
    # the launch policy reports each overrun at its launch, before the copy
    assert [l[:38] for l in reports(p.stderr)] == ["REDZONE VIOLATION alloc#0 user_bytes=1",
                                                    "redzone: copy past the end of alloc#0:"]
    assert "scribble" not in p.stderr and "warning" not in p.stderr
    assert " 2 violations in " in exit_line(p.stderr) and exit_line(p.stderr).endswith("; 1 findings suppressed")
    assert " violations=2 " in summary_line(tmp_path)
    recs = jsonl(tmp_path / "r.jsonl")
    assert [r["alloc"] for r in recs if r["type"] == "finding"] == [0, 0]
    assert recs[-1]["suppressed"] == 1


def test_suppress_by_alloc_frame_and_kind(tmp_path):
    (tmp_path / "supp").write_text("alloc-frame:make_buf*\n")
    p = run("faults", tmp_path, METRALE_REDZONE_SUPPRESSIONS="supp", METRALE_REDZONE_STACKS=8,
            METRALE_REDZONE_SUMMARY="summary")
    assert p.returncode == 0, p.stderr
    assert reports(p.stderr) == [] and "violated when it was freed" not in p.stderr
    assert " 0 violations in " in exit_line(p.stderr) and exit_line(p.stderr).endswith("; 3 findings suppressed")
    assert " violations=0 " in summary_line(tmp_path)
    (tmp_path / "supp").write_text("kind:copy-refused\nkind:overrun alloc-frame:rzreport alloc-frame:nosuch\n")
    p = run("faults", tmp_path, METRALE_REDZONE_SUPPRESSIONS="supp", METRALE_REDZONE_STACKS=8)
    assert [l[:27] for l in reports(p.stderr)] == ["REDZONE VIOLATION alloc#0 u", "REDZONE VIOLATION alloc#1 u"]
    assert exit_line(p.stderr).endswith("; 1 findings suppressed")


def test_bad_rule_lines_warn_with_file_and_line(tmp_path):
    (tmp_path / "supp").write_text("kind:overrun\nkernal:foo\nkind:nosuch\n# fine\nkernel:\n")
    p = run("faults", tmp_path, METRALE_REDZONE_SUPPRESSIONS="supp")
    assert p.returncode == 0, p.stderr
    warns = [l for l in p.stderr.splitlines() if "warning" in l]
    assert [re.search(r'"supp":(\d+):', w).group(1) for w in warns] == ["2", "3", "5"], warns
    assert len(reports(p.stderr)) == 1  # kind:overrun held: the copy is left


def test_print_suppressions_prints_rules_that_suppress(tmp_path):
    p = run("faults", tmp_path, METRALE_REDZONE_PRINT_SUPPRESSIONS=1, METRALE_REDZONE_STACKS=4,
            METRALE_REDZONE_SCAN="launch,free,exit")
    assert p.returncode == 0, p.stderr
    rules = [l[len("redzone: suppression: "):] for l in p.stderr.splitlines() if l.startswith("redzone: suppression: ")]
    assert rules == ["kind:overrun kernel:write_past alloc-frame:make_buffer",
                     "kind:overrun kernel:scribble alloc-frame:make_buffer", "kind:copy-refused alloc-frame:make_buffer"]
    (tmp_path / "supp").write_text("\n".join(rules) + "\n")
    p = run("faults", tmp_path, METRALE_REDZONE_SUPPRESSIONS="supp", METRALE_REDZONE_STACKS=4,
            METRALE_REDZONE_SCAN="launch,free,exit")
    assert reports(p.stderr) == [] and exit_line(p.stderr).endswith("; 3 findings suppressed")


# ---- item 5: the print limit and halting --------------------------------------------------------------------
def test_print_limit_counts_the_rest(tmp_path):
    p = run("faults", tmp_path, METRALE_REDZONE_PRINT_LIMIT=1, METRALE_REDZONE_SUMMARY="summary",
            METRALE_REDZONE_REPORT="r.jsonl", METRALE_REDZONE_STACKS=4)
    assert p.returncode == 0, p.stderr
    assert len(reports(p.stderr)) == 1 and p.stderr.count("was allocated at:") == 1
    assert "violated when it was freed" not in p.stderr and "kernels launched" not in p.stderr
    assert " 3 violations in " in exit_line(p.stderr)
    assert exit_line(p.stderr).endswith("; 2 findings not printed (METRALE_REDZONE_PRINT_LIMIT=1)")
    assert " violations=3 " in summary_line(tmp_path)
    assert len([r for r in jsonl(tmp_path / "r.jsonl") if r["type"] == "finding"]) == 3


def test_halt_on_error_ends_at_the_first_finding(tmp_path):
    p = run("faults", tmp_path, METRALE_REDZONE_HALT_ON_ERROR=1, METRALE_REDZONE_SUMMARY="summary",
            METRALE_REDZONE_REPORT="r.sarif")
    assert p.returncode == HALT_STATUS, (p.returncode, p.stderr)
    assert len(reports(p.stderr)) == 1 and "faults done" not in p.stdout
    assert p.stderr.splitlines()[-1] == ("redzone: halting after the first finding (METRALE_REDZONE_HALT_ON_ERROR=1): "
                                         "exit status 86")
    assert " violations=1 " in summary_line(tmp_path)
    with open(str(tmp_path / "r.sarif")) as f:
        run_ = sarif_ok(json.load(f), 1)
    assert run_["properties"]["halted"] is True


def test_halt_on_error_passes_suppressed_findings(tmp_path):
    (tmp_path / "supp").write_text("kind:copy-refused\n")
    p = run("faults", tmp_path, METRALE_REDZONE_HALT_ON_ERROR=1, METRALE_REDZONE_SUPPRESSIONS="supp")
    assert p.returncode == HALT_STATUS, (p.returncode, p.stderr)
    assert [l[:27] for l in reports(p.stderr)] == ["REDZONE VIOLATION alloc#0 u"]
    assert "rzreport: copy past the end returned 1" in p.stdout  # the copy is still refused
