#!/usr/bin/env python3
"""The loops of a `cuobjdump -sass` listing and the instruction mix of each.

Usage:
    python3 scripts/sass_loops.py KERNEL.sass [KERNEL.sass ...] [--all]

A loop is a backward branch: the instructions from its target to the branch. Nested loops
are listed each with its whole body, innermost first by address. Without `--all`, only loops
that hold a `wgmma` (`HGMMA`) or more than 150 instructions are shown: the key loops of the
sm90 family. Counts are static (every path of a branch counted), so a modified kernel's
loop counts its softcap and ALiBi code whether or not a problem runs it.

The listing comes from the device (it has `cuobjdump`; this machine has ptxas only), from a
cubin assembled here:
    target/tools/ptxas -arch=sm_90a -O3 ENTRY.ptx -o ENTRY.cubin   # here
    cuobjdump -sass ENTRY.cubin > ENTRY.sass                        # on the device
"""

import collections
import re
import sys

OPCODES = ("HGMMA", "MUFU", "FFMA", "FMUL", "FADD", "FSEL", "FMNMX", "ISETP", "F2FP", "BAR",
           "SYNCS", "BRA")
INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")
OPCODE = re.compile(r"(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")
TARGET = re.compile(r"(0x[0-9a-f]+)\s*$")


def instructions(path):
    """(address, text) of every instruction of the listing, in address order."""
    found = []
    with open(path) as listing:
        for line in listing:
            match = INSTRUCTION.match(line)
            if match:
                found.append((int(match.group(1), 16), match.group(2).strip()))
    return found


def opcode(text):
    match = OPCODE.match(text)
    return match.group(1) if match else "?"


def loops(found):
    """(start, end, opcode counts) of every backward branch's body."""
    index = {address: i for i, (address, _) in enumerate(found)}
    result = []
    for i, (address, text) in enumerate(found):
        if opcode(text) != "BRA":
            continue
        target = TARGET.search(text)
        if not target:
            continue
        start = int(target.group(1), 16)
        if start < address and start in index:
            body = found[index[start]:i + 1]
            result.append((start, address, collections.Counter(opcode(t) for _, t in body)))
    return result


def main():
    paths = [argument for argument in sys.argv[1:] if argument != "--all"]
    show_all = "--all" in sys.argv[1:]
    if not paths:
        sys.exit(__doc__)
    for path in paths:
        found = instructions(path)
        print(f"{path}: {len(found)} instructions")
        for start, end, counts in loops(found):
            size = sum(counts.values())
            if show_all or counts["HGMMA"] or size > 150:
                mix = ", ".join(f"{name} {counts[name]}" for name in OPCODES)
                print(f"  loop {start:#x}-{end:#x}: {size} instructions; {mix}")


if __name__ == "__main__":
    main()
