"""Compare the transcripts case_transcript wrote under each debugger (tests/CMakeLists.txt): every one must
exist and equal the first byte for byte, and the first must equal the committed reference
(tests/gdb/transcript.ref) once both are normalised: addresses (0x and 6 or more hex digits) and offsets
in functions (`main+0xacb`) become `0x?`, the build and source folders `BUILD` and `SOURCE`.

  compare_transcripts.py --build DIR --source DIR REFERENCE TRANSCRIPT_DIR TAG [TAG...]
  compare_transcripts.py --build DIR --source DIR --update REFERENCE TRANSCRIPT_DIR TAG   (rewrite REFERENCE)

Exit 0: the reference matches and every debugger printed the same; 1: something differs or is missing (the
diff is shown); 77 (a skip, with its reason printed): the reference matches but only one debugger is
configured, so there was nothing to compare it with."""
import argparse
import difflib
import os
import re
import sys

SKIP = 77
ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}|(?<=\+)0x[0-9a-fA-F]+")


def normalise(text, build, source):
    for folder, name in sorted(((build, "BUILD"), (source, "SOURCE")), key=lambda p: -len(p[0])):
        text = text.replace(folder.rstrip("/") + "/", name + "/")
    return ADDRESS.sub("0x?", text)


def diff(a, b, name_a, name_b):
    sys.stdout.writelines(difflib.unified_diff(a.splitlines(True), b.splitlines(True), name_a, name_b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--update", action="store_true")
    ap.add_argument("reference")
    ap.add_argument("folder")
    ap.add_argument("tags", nargs="+")
    args = ap.parse_args()
    texts = {}
    for tag in args.tags:
        path = os.path.join(args.folder, f"{tag}.txt")
        if not os.path.exists(path):
            sys.exit(f"compare_transcripts: {path} is missing (its case did not run or failed)")
        with open(path) as f:
            texts[tag] = f.read()
    base = args.tags[0]
    ours = normalise(texts[base], os.path.abspath(args.build), os.path.abspath(args.source))
    if args.update:
        with open(args.reference, "w") as f:
            f.write(ours)
        print(f"compare_transcripts: {args.reference} rewritten from {base} ({len(ours.splitlines())} lines)")
        return 0
    if not os.path.exists(args.reference):
        sys.exit(f"compare_transcripts: the reference {args.reference} is missing (docs/testing.md: regenerate)")
    with open(args.reference) as f:
        reference = f.read()
    bad = 0
    if ours != reference:
        diff(reference, ours, "reference", f"{base} (normalised)")
        print(f"compare_transcripts: {base} differs from the reference {args.reference}")
        bad += 1
    else:
        print(f"compare_transcripts: {base} matches the reference ({len(reference.splitlines())} lines)")
    for tag in args.tags[1:]:
        if texts[tag] != texts[base]:
            diff(texts[base], texts[tag], base, tag)
            print(f"compare_transcripts: {tag} printed something else than {base}")
            bad += 1
    if bad:
        return 1
    if len(args.tags) < 2:
        print(f"compare_transcripts: SKIPPED the comparison between debuggers: only {base} is configured (no "
              "cuda-gdb found, REDZONE_GDB16_ROOT unset); a transcript compared with itself would prove nothing")
        return SKIP
    print(f"compare_transcripts: {', '.join(args.tags)}: {len(texts[base].splitlines())} lines, identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
