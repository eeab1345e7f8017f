"""What the training checks (check_*.py) share: running the tools, reading
their logs, predictions and memory reports, failing with a message. Needs no
Python packages."""
import json
import os
import re
import subprocess
import sys

# Log fields that vary from run to run.
TIMINGS = {"step_ms", "samples_per_s", "samples_per_s_mean", "peak_rss_bytes"}


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def tool_env():
    """The environment for the tools: mpirun may run as root in CI."""
    env = dict(os.environ)
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


def run(cmd, env, ok=True):
    """Runs `cmd`; fails the check unless it exits 0 (`ok`) or not (not `ok`)."""
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if ok and r.returncode != 0:
        fail("command failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd),
                                               r.stdout, r.stderr))
    if not ok and r.returncode == 0:
        fail("command succeeded but should fail: %s\n%s%s" %
             (" ".join(cmd), r.stdout, r.stderr))
    return r


def read_log(path):
    """A JSONL training log without its timings ([] if there is none)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMINGS}
                for line in f]


def predicted(text):
    """shardc --print-memory's prediction: {category or count: value}."""
    m = re.search(r"predicted per-rank peak memory \(bytes\): (.*)", text)
    if not m:
        fail("no prediction in shardc --print-memory:\n" + text)
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))}


def measured_rows(text):
    """shardrun --report-memory: per rank, (measured, predicted) of each
    category."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^(\d+)\s+(.*)$", line)
        if m:
            rows[int(m.group(1))] = [(int(a), int(b)) for a, b in
                                     re.findall(r"(\d+) \(\s*(\d+)\)", m.group(2))]
    return rows


def check_report(name, text, ranks):
    """Every rank of --report-memory measured exactly what was predicted."""
    rows = measured_rows(text)
    if len(rows) != ranks:
        fail("%s: %d --report-memory rows, not %d:\n%s" % (name, len(rows),
                                                           ranks, text))
    for rank, cells in sorted(rows.items()):
        for measured, expected in cells:
            if measured != expected:
                fail("%s: rank %d measured %d bytes, predicted %d:\n%s" %
                     (name, rank, measured, expected, text))
