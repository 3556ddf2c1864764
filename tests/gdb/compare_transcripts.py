"""Compare the transcripts case_transcript wrote under each debugger (tests/CMakeLists.txt): every one must
exist and equal the first byte for byte. Usage: compare_transcripts.py DIR TAG [TAG...]"""
import difflib
import os
import sys

folder, tags = sys.argv[1], sys.argv[2:]
texts = {}
for tag in tags:
    path = os.path.join(folder, f"{tag}.txt")
    if not os.path.exists(path):
        sys.exit(f"compare_transcripts: {path} is missing (its case did not run or failed)")
    with open(path) as f:
        texts[tag] = f.read()
base = tags[0]
bad = 0
for tag in tags[1:]:
    if texts[tag] != texts[base]:
        bad += 1
        sys.stdout.writelines(difflib.unified_diff(texts[base].splitlines(True), texts[tag].splitlines(True),
                                                   base, tag))
if bad:
    sys.exit(f"compare_transcripts: {bad} debugger(s) printed something else than {base}")
print(f"compare_transcripts: {', '.join(tags)}: {len(texts[base].splitlines())} lines, identical")
