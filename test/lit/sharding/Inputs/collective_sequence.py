"""Prints the collectives of a shardc IR file, in order, one per line, then a
summary line with how many there are of each kind.

    collective_sequence.py step.mlir

The sequence names each start and wait with its operand and result types, so
that two files print the same text exactly when they issue the same
collectives in the same order.
"""
import re
import sys

KINDS = ["AllGatherStart", "ReduceScatterStart", "AllReduceStart",
         "CollectiveWait"]
pattern = re.compile(r"shardc\.(" + "|".join(KINDS) + r")\b.*?:\s*(.*)$")
counts = {k: 0 for k in KINDS}
with open(sys.argv[1]) as f:
    for line in f:
        m = pattern.search(line)
        if not m:
            continue
        counts[m.group(1)] += 1
        print(m.group(1), m.group(2).strip())
print("collectives:", " ".join(f"{k}={v}" for k, v in counts.items()))
