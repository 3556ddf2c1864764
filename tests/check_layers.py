#!/usr/bin/env python3
"""The house rules of native/src that a reader can check from the text (docs/design.md, "Layers"):

- every file sits in one of the layer folders, and includes only headers of its own layer or of layers below
  it (a call up a layer needs the header of the layer above: the include is where it would show);
- the driver table `rz__drv` is used only by the device seam (device/) and the interposers (interpose/);
- no source file of native/src or native/emu is over 800 lines.

Usage: check_layers.py SOURCE_DIR. Prints each breach and exits 1, or prints a summary and exits 0.
"""
import os
import re
import sys

LAYERS = ["base", "output", "device", "core", "bridge", "policy", "interpose"]
LIMIT = 800


def main(root):
    src = os.path.join(root, "native", "src")
    where, files, bad = {}, [], []
    for layer in os.listdir(src):
        path = os.path.join(src, layer)
        if not os.path.isdir(path):
            bad.append(f"native/src/{layer}: a file outside the layer folders")
            continue
        if layer not in LAYERS:
            bad.append(f"native/src/{layer}/: not a layer (docs/design.md lists {', '.join(LAYERS)})")
            continue
        for name in sorted(os.listdir(path)):
            if name.endswith((".c", ".h", ".inc")):
                if name in where:
                    bad.append(f"{name}: in {where[name]}/ and {layer}/ (headers are found by name)")
                where[name] = layer
                files.append((layer, name))
    for layer, name in files:
        with open(os.path.join(src, layer, name), errors="replace") as f:
            text = f.read()
        code = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', code, flags=re.M):
            other = where.get(os.path.basename(inc))
            if other and LAYERS.index(other) > LAYERS.index(layer):
                bad.append(f"native/src/{layer}/{name} includes {other}/{inc}: a call up a layer "
                           f"(register it with the lower layer instead)")
        if re.search(r"\brz__drv\s*\.", code) and layer not in ("device", "interpose"):
            bad.append(f"native/src/{layer}/{name} calls the driver table rz__drv: only device/ (the seam) and "
                       f"interpose/ may")
        lines = text.count("\n")
        if lines > LIMIT:
            bad.append(f"native/src/{layer}/{name}: {lines} lines (over {LIMIT})")
    emu = os.path.join(root, "native", "emu")
    for name in sorted(os.listdir(emu)):
        if name.endswith((".c", ".h")):
            with open(os.path.join(emu, name), errors="replace") as f:
                lines = f.read().count("\n")
            if lines > LIMIT:
                bad.append(f"native/emu/{name}: {lines} lines (over {LIMIT})")
    for b in bad:
        print("check_layers:", b)
    if bad:
        return 1
    print(f"check_layers: {len(files)} files in {len(LAYERS)} layers, includes only downward, rz__drv only in "
          f"device/ and interpose/, none over {LIMIT} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
