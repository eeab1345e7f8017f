"""Summarizes a Shard Chrome trace: events per rank and category, and whether
any collective executed on the communication thread while a kernel ran on
the same rank.

    check_trace.py TRACE RANKS [SHARDRUN_STDOUT]

With shardrun's output, also checks its "trace:" line against the trace:
per rank, the time some collective that a training step started (from the
first "step" event's start to the last one's end) was in flight and the part
of it no kernel covered, found here by sweeping the events' start and end
points."""
import json
import re
import sys


def swept(kernels, comms):
    """(collective time, exposed time) by a sweep over every boundary."""
    points = sorted({t for a, b in kernels + comms for t in (a, b)})
    total = exposed = 0.0
    for lo, hi in zip(points, points[1:]):
        mid = (lo + hi) / 2
        if any(a <= mid < b for a, b in comms):
            total += hi - lo
            if not any(a <= mid < b for a, b in kernels):
                exposed += hi - lo
    return total, exposed


events = json.load(open(sys.argv[1]))["traceEvents"]
ranks = int(sys.argv[2])
overlap = 0.0
for r in range(ranks):
    mine = [e for e in events if e["pid"] == r]
    count = {c: sum(1 for e in mine if e["cat"] == c)
             for c in ("step", "kernel", "collective-start", "collective-wait",
                       "communication")}
    print(f"rank {r}: " + ", ".join(f"{c} {n}" for c, n in count.items()))
    comm = [e for e in mine if e["tid"] == 1]
    kern = [e for e in mine if e["cat"] == "kernel"]
    for c in comm:
        for k in kern:
            lo = max(c["ts"], k["ts"])
            hi = min(c["ts"] + c["dur"], k["ts"] + k["dur"])
            overlap += max(0.0, hi - lo)
print("overlap:", "yes" if overlap > 0 else "no", f"({overlap:.1f} us)")

if len(sys.argv) > 3:
    line = next(l for l in open(sys.argv[3]) if l.startswith("trace:"))
    m = re.search(r"in flight ([0-9.]+) ms per rank, ([0-9.]+) % of "
                  r"it hidden behind kernels \(([0-9.]+) ms exposed", line)
    total = exposed = 0.0
    for r in range(ranks):
        mine = [e for e in events if e["pid"] == r]
        span = lambda e: (e["ts"], e["ts"] + e["dur"])
        steps = [span(e) for e in mine if e["cat"] == "step"]
        lo, hi = min(a for a, _ in steps), max(b for _, b in steps)
        t, x = swept([span(e) for e in mine if e["cat"] in ("kernel", "recompute")],
                     [span(e) for e in mine if e["tid"] == 1 and lo <= e["ts"] < hi])
        total += t
        exposed += x
    want = (total / ranks / 1e3, 100 * (1 - exposed / total), exposed / ranks / 1e3)
    got = tuple(float(g) for g in m.groups())
    ok = all(abs(a - b) <= 0.1 + 1e-3 * abs(b) for a, b in zip(got, want))
    print("reported overlap:", "matches" if ok else f"differs: {got} vs {want}")
