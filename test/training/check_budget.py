#!/usr/bin/python3
"""shardc --memory-budget on real training runs of the GPT example with
AdamW on 4 ranks:

  - the reach: the stage-0 peak (the fastest plan) and the smallest peak
    within reach (what a budget of 1 byte is refused with, a plan that
    `shardc --print-memory` with the flags the message names predicts
    exactly);
  - three budgets between them: shardc logs one line per decision and the
    flags it chose, the plan's predicted peak fits the budget, and a run of
    it measures exactly that peak on every rank (--report-memory), never
    above the budget; the chosen plan is the plan of the chosen flags given
    by hand (same predicted memory and step time);
  - a budget the stage-0 plan fits chooses stage 0; a knob given on the
    command line (--zero-stage 3) stays as given;
  - errors: a budget below the smallest peak, with that peak in the message;
    a budget that is no size; a budget without a training step.

Needs no Python packages."""
import argparse
import os
import re
import shutil
import tempfile

from training_checks import (check_report, fail, measured_rows, predicted, run,
                             tool_env)


def cost(text):
    """shardc --print-cost's predicted step time, in seconds."""
    m = re.search(r"predicted step time per rank \(seconds\): total=([0-9.e+-]+)", text)
    if not m:
        fail("no step time in shardc --print-cost:\n" + text)
    return float(m.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shardc", required=True)
    p.add_argument("--shardrun", required=True)
    p.add_argument("--example", required=True)
    args = p.parse_args()
    model = os.path.join(args.example, "gpt.onnx")
    data = os.path.join(args.example, "data")
    env = tool_env()
    work = tempfile.mkdtemp(prefix="shard-budget-")
    ranks = ["--world-size", "4"]
    try:
        def compile_plan(name, flags, ok=True):
            plan = os.path.join(work, name)
            r = run([args.shardc, model, "-o", plan, "--optimizer", "adamw",
                     "--print-memory", "--print-cost"] + ranks + flags, env, ok)
            return plan, r

        # The reach.
        _, r = compile_plan("s0", ["--zero-stage", "0"])
        top = predicted(r.stdout)["total"]
        _, r = compile_plan("floor", ["--memory-budget", "1"], ok=False)
        m = re.search(r"below the smallest predicted per-rank peak within "
                      r"reach, [0-9.]+ \w+ \((\d+) bytes, with ([^)]*)\)", r.stderr)
        if not m:
            fail("a budget of 1 byte: no smallest peak in the error:\n" + r.stderr)
        floor, floor_flags = int(m.group(1)), m.group(2).split()
        if os.path.exists(os.path.join(work, "floor")):
            fail("the refused budget wrote a plan")
        _, r = compile_plan("floor-flags", floor_flags)
        if predicted(r.stdout)["total"] != floor:
            fail("the smallest peak %d is not the peak of %s: %d" %
                 (floor, floor_flags, predicted(r.stdout)["total"]))
        if not floor < top:
            fail("no room between the smallest peak %d and stage 0's %d" % (floor, top))
        print("ok reach: stage 0 %d bytes, smallest %d bytes (%s)" %
              (top, floor, " ".join(floor_flags)))

        # Three budgets between them, and one above stage 0.
        chosen = set()
        for frac in (0.75, 0.4, 0.05, 1.5):
            budget = int(floor + frac * (top - floor))
            name = "b%d" % int(frac * 100)
            plan, r = compile_plan(name, ["--memory-budget", str(budget)])
            decisions = [l for l in r.stderr.splitlines()
                         if l.startswith("shardc: --memory-budget")]
            pick = [l for l in decisions if ": chose " in l]
            if len(pick) != 1 or not any("start from" in l for l in decisions):
                fail("%s: no decision log:\n%s" % (name, r.stderr))
            flags = re.search(r": chose (.*): peak", pick[0]).group(1).split()
            peak = predicted(r.stdout)["total"]
            if peak > budget:
                fail("%s: predicted peak %d over the budget %d" % (name, peak, budget))
            if frac > 1 and flags != ["--zero-stage", "0"]:
                fail("%s: stage 0 fits but %s was chosen" % (name, flags))
            # The plan is the plan of its flags.
            _, by_hand = compile_plan(name + "-hand", flags)
            if (predicted(by_hand.stdout) != predicted(r.stdout) or
                    cost(by_hand.stdout) != cost(r.stdout)):
                fail("%s: the plan differs from the plan of %s:\n%s\n%s" %
                     (name, flags, r.stdout, by_hand.stdout))
            out = run([args.shardrun, plan, "--data", data, "--steps", "2",
                       "--progress", "off", "--report-memory",
                       "--offload-dir", os.path.join(work, "tier")], env).stdout
            check_report(name, out, 4)
            worst = max(cells[-1][0] for cells in measured_rows(out).values())
            if worst > budget:
                fail("%s: a rank measured %d bytes, over the budget %d" %
                     (name, worst, budget))
            chosen.add(" ".join(flags))
            print("ok %s: budget %d, chose %s: predicted peak %d, step %.3f s "
                  "predicted" % (name, budget, " ".join(flags), peak, cost(r.stdout)))
        if len(chosen) < 3:
            fail("four budgets chose only %d plans: %s" % (len(chosen), chosen))

        # A knob given on the command line stays: the search never names it,
        # and the chosen flags with it give the same plan.
        budget = int(floor + 0.3 * (top - floor))
        _, r = compile_plan("fixed", ["--zero-stage", "3", "--memory-budget", str(budget)])
        pick = [l for l in r.stderr.splitlines() if ": chose " in l]
        if not pick or any("--zero-stage" in l for l in r.stderr.splitlines()):
            fail("the search moved the given --zero-stage 3:\n" + r.stderr)
        flags = re.search(r": chose (.*): peak", pick[0]).group(1)
        flags = [] if flags == "the command line's flags" else flags.split()
        _, by_hand = compile_plan("fixed-hand", ["--zero-stage", "3"] + flags)
        if predicted(by_hand.stdout) != predicted(r.stdout):
            fail("--zero-stage 3 %s by hand is another plan" % flags)
        print("ok --zero-stage 3 kept: " + pick[0])

        # Errors.
        for bad, says in ((["--memory-budget", "lots"], "expects a size in bytes"),
                          (["--memory-budget", "0"], "expects a size in bytes")):
            _, r = compile_plan("bad", bad, ok=False)
            if says not in r.stderr:
                fail("%s: expected %r in:\n%s" % (bad, says, r.stderr))
        r = run([args.shardc, model, "-o", os.path.join(work, "fwd"),
                 "--memory-budget", "1G"], env, ok=False)
        if "--memory-budget chooses how a training step" not in r.stderr:
            fail("--memory-budget without --optimizer:\n" + r.stderr)
        print("ok errors")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
