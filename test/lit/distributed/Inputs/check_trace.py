"""Summarizes a Shard Chrome trace: events per rank and category, and whether
any collective executed on the communication thread while a kernel ran on
the same rank."""
import json
import sys

events = json.load(open(sys.argv[1]))["traceEvents"]
ranks = int(sys.argv[2])
overlap = 0.0
for r in range(ranks):
    mine = [e for e in events if e["pid"] == r]
    count = {c: sum(1 for e in mine if e["cat"] == c)
             for c in ("kernel", "collective-start", "collective-wait", "communication")}
    print(f"rank {r}: " + ", ".join(f"{c} {n}" for c, n in count.items()))
    comm = [e for e in mine if e["tid"] == 1]
    kern = [e for e in mine if e["cat"] == "kernel"]
    for c in comm:
        for k in kern:
            lo = max(c["ts"], k["ts"])
            hi = min(c["ts"] + c["dur"], k["ts"] + k["dur"])
            overlap += max(0.0, hi - lo)
print("overlap:", "yes" if overlap > 0 else "no", f"({overlap:.1f} us)")
