"""Reads two --report-memory outputs (stage 0, stage 3) and compares them."""
import re
import sys


def parse(path):
    rows = {}
    for line in open(path):
        m = re.match(r"^(\d+)\s+(.*)$", line)
        if not m:
            continue
        pairs = re.findall(r"(\d+) \(\s*(\d+)\)", m.group(2))
        rows[int(m.group(1))] = [(int(a), int(b)) for a, b in pairs]
    return rows


s0, s3 = parse(sys.argv[1]), parse(sys.argv[2])
same = all(a == b for rows in (s0, s3) for row in rows.values() for a, b in row)
print("measured == predicted on every rank:", "yes" if same else "no")
state = lambda row: row[1][0] + row[2][0] + row[3][0]
print("stage 3 model state < stage 0 model state:",
      "yes" if all(state(s3[r]) < state(s0[r]) for r in s0) else "no")
