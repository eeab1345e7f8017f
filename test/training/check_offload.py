#!/usr/bin/python3
"""Offload (shardc --offload optimizer|params|grads, shardrun --offload-dir; FSDP's
CPUOffload, DeepSpeed's offload_optimizer / offload_param) on real training
runs of the GPT example with AdamW:

  - training: the GPT with AdamW for each world size and stage (1 rank; 2
    ranks at stages 0-2; 4 ranks at stage 3) and each choice (optimizer,
    params, grads, all three), and the CNN (BatchNorm) with SGD momentum at
    stages 0 and 3 with all three: the logs (every value but timings) and the
    exported model are bit for bit those of the same plan without offload;
  - memory: the executor measures exactly the predicted peaks
    (--report-memory), the predicted peak total falls (gradients alone:
    does not rise), and the tier holds
    what `shardc --print-memory` says is offloaded;
  - the trace has the tier's reads and writes ("offload" events);
  - checkpoints: a run with offload saves, resumes itself bit for bit, and
    the plan without offload resumes its checkpoint;
  - errors, each before step 1 with no step logged: no --offload-dir, an
    offload directory that cannot be created, a tier that does not fit
    (ulimit -f), a full disk (a 64 KiB tmpfs, where mounting one is
    allowed); and a short read in the middle of a 2-rank run (the fault
    hook truncates rank 0's file) stops both ranks with a message naming the
    file, the offset and the bytes.

Needs no Python packages."""
import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile

from training_checks import check_report, fail, predicted, read_log, run, tool_env


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shardc", required=True)
    p.add_argument("--shardrun", required=True)
    p.add_argument("--example", required=True)
    args = p.parse_args()
    model = os.path.join(args.example, "gpt.onnx")
    data = os.path.join(args.example, "data")
    env = tool_env()
    work = tempfile.mkdtemp(prefix="shard-offload-")
    tier = os.path.join(work, "tier")
    steps = 4
    try:
        def compile_plan(name, flags, source=model, optimizer=("adamw",)):
            plan = os.path.join(work, name)
            out = run([args.shardc, source, "-o", plan, "--optimizer"] +
                      list(optimizer) + ["--print-memory"] + flags, env).stdout
            return plan, predicted(out)

        def train(plan, name, ranks, extra=(), data=data):
            log = os.path.join(work, name + ".jsonl")
            onnx = os.path.join(work, name + ".onnx")
            trace = os.path.join(work, name + ".trace.json")
            out = run([args.shardrun, plan, "--data", data, "--steps",
                       str(steps), "--seed", "1", "--progress", "off", "--log",
                       log, "--export", onnx, "--report-memory", "--trace",
                       trace, "--offload-dir", tier] + list(extra), env).stdout
            check_report(name, out, ranks)
            with open(onnx, "rb") as f:
                exported = f.read()
            with open(trace) as f:
                events = [e for e in json.load(f)["traceEvents"]
                          if e.get("cat") == "offload"]
            if os.path.exists(tier) and os.listdir(tier):
                fail("%s: the offload directory still holds %s after the run"
                     % (name, os.listdir(tier)))
            return read_log(log), exported, events

        # The GPT with AdamW everywhere; the CNN (BatchNorm, whose running
        # statistics stay in memory) with SGD and momentum.
        cnn = os.path.join(os.path.dirname(args.example), "cnn")
        everything = ["optimizer", "params", "grads"]
        configs = [("gpt", 1, None), ("gpt", 2, 0), ("gpt", 2, 1),
                   ("gpt", 2, 2), ("gpt", 4, 3), ("cnn", 2, 0), ("cnn", 2, 3)]
        for example, ranks, stage in configs:
            flags = [] if stage is None else ["--world-size", str(ranks),
                                              "--zero-stage", str(stage)]
            where = "%s, %s" % (example, "1 rank" if stage is None else
                                "%d ranks, stage %d" % (ranks, stage))
            source, edata, opt = model, data, ("adamw",)
            if example == "cnn":
                source = os.path.join(cnn, "cnn.onnx")
                edata = os.path.join(cnn, "data")
                opt = ("sgd", "--momentum", "0.9")
            base, bmem = compile_plan("plain", flags, source, opt)
            blog, bexported, bevents = train(base, "plain", ranks, data=edata)
            if bevents or bmem["offloaded"]:
                fail("%s: the plan without offload moves %d bytes to the tier"
                     % (where, bmem["offloaded"]))
            choices = ([["optimizer"], ["params"], ["grads"], everything]
                       if example == "gpt" else [everything])
            for choice in choices:
                name = "%s, --offload %s" % (where, " --offload ".join(choice))
                extra = sum((["--offload", c] for c in choice), [])
                plan, mem = compile_plan("offload", flags + extra, source, opt)
                log, exported, events = train(plan, "offload", ranks,
                                              data=edata)
                if log != blog or len(log) != steps:
                    fail("%s: the log differs from the plan without offload:"
                         "\n%s\n%s" % (name, log, blog))
                if exported != bexported:
                    fail("%s: the exported model differs from the plan "
                         "without offload" % name)
                # Gradients in the tier lower the peak only where gradients
                # make it (not on these small models): never raise it.
                lower = (mem["total"] <= bmem["total"] if choice == ["grads"]
                         else mem["total"] < bmem["total"])
                if not mem["offloaded"] or not lower:
                    fail("%s: %d bytes offloaded, predicted peak %d bytes, "
                         "without offload %d" % (name, mem["offloaded"],
                                                 mem["total"], bmem["total"]))
                reads = [e for e in events if e["name"].startswith("offload read")]
                writes = [e for e in events if e["name"].startswith("offload write")]
                if not reads or not writes or len(writes) % steps:
                    fail("%s: %d tier reads and %d writes in the trace" %
                         (name, len(reads), len(writes)))
                print("ok: %s: %d steps and the exported model bit for bit; "
                      "%d bytes in the tier, predicted peak %d -> %d bytes, "
                      "measured = predicted; %d reads and %d writes" %
                      (name, steps, mem["offloaded"], bmem["total"],
                       mem["total"], len(reads), len(writes)))

        # Checkpoints (4 ranks, stage 3, both offloaded).
        flags = ["--world-size", "4", "--zero-stage", "3"]
        plan, _ = compile_plan("ckpt-offload", flags + ["--offload", "optimizer",
                                                        "--offload", "params"])
        plain, _ = compile_plan("ckpt-plain", flags)
        ckpt = os.path.join(work, "ckpt")
        straight, _, _ = train(plan, "straight", 4)
        train(plan, "saving", 4, ["--checkpoint-dir", ckpt,
                                  "--checkpoint-every", "2"])
        step2 = os.path.join(ckpt, "step-2")
        resumed, _, _ = train(plan, "resumed", 4, ["--resume", step2])
        moved, _, _ = train(plain, "moved", 4, ["--resume", step2])
        if resumed != straight[2:] or moved != straight[2:]:
            fail("checkpoint: resumed from step 2 with offload %s, without %s; "
                 "the straight run %s" % (resumed, moved, straight[2:]))
        print("ok: checkpoints: the offloaded plan resumes its checkpoint bit "
              "for bit, and so does the plan without offload")

        # Errors before step 1.
        plan, mem = compile_plan("errors", ["--offload", "optimizer"])
        log = os.path.join(work, "errors.jsonl")
        base_cmd = [args.shardrun, plan, "--data", data, "--steps", "2",
                    "--progress", "off", "--log", log]
        cases = [
            ("no --offload-dir", base_cmd,
             "keeps %d bytes per rank in the offload tier (shardc --offload): "
             "give shardrun --offload-dir DIR" % mem["offloaded"]),
            ("a directory that cannot be created",
             base_cmd + ["--offload-dir", os.path.join(model, "tier")],
             "cannot create the offload directory"),
            ("a tier over the file size limit",
             ["sh", "-c", "ulimit -f 1 && exec \"$@\"", "sh"] + base_cmd +
             ["--offload-dir", tier],
             "cannot reserve %d bytes for the offload file" % mem["offloaded"]),
        ]
        for what, cmd, message in cases:
            if os.path.exists(log):
                os.remove(log)
            r = run(cmd, env, ok=False)
            if message not in r.stderr or read_log(log):
                fail("%s: exit %d, %d steps logged, stderr:\n%s" %
                     (what, r.returncode, len(read_log(log)), r.stderr))
            print("ok: %s: %s" % (what, r.stderr.strip().splitlines()[0]))

        # A full disk: a tmpfs of 64 KiB, where mounting one is allowed
        # (root in a container that permits it).
        full = os.path.join(work, "full")
        os.makedirs(full)
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k",
                                  "tmpfs", full], capture_output=True).returncode == 0
        if mounted:
            try:
                r = run(base_cmd + ["--offload-dir", full], env, ok=False)
                expected = "No space left on device; free space there"
                if expected not in r.stderr or read_log(log):
                    fail("a full disk: exit %d, stderr:\n%s" % (r.returncode,
                                                                r.stderr))
                print("ok: a full disk: " + r.stderr.strip().splitlines()[0])
            finally:
                subprocess.run(["umount", full], capture_output=True)
        else:
            print("skipped: a full disk (this machine does not let the check "
                  "mount a small tmpfs)")

        # A short read in the middle of a 2-rank run stops both ranks.
        plan, _ = compile_plan("fault", ["--world-size", "2", "--offload",
                                         "optimizer"])
        fenv = dict(env)
        fenv["SHARDRUN_FAULT_OFFLOAD_TRUNCATE_AT"] = "15"
        r = run([args.shardrun, plan, "--data", data, "--steps", "4",
                 "--progress", "off", "--offload-dir", tier,
                 "--collective-timeout", "60"], fenv, ok=False)
        m = re.search(r"rank 0: step \d+: .*short read of the offload file "
                      r"\S*rank-0\.offload at offset \d+: \d+ of \d+ bytes",
                      r.stderr)
        if not m:
            fail("short read: exit %d, stderr:\n%s" % (r.returncode, r.stderr))
        if os.path.exists(tier) and os.listdir(tier):
            fail("short read: the aborted ranks left %s in the offload "
                 "directory" % os.listdir(tier))
        print("ok: a short read stops both ranks: " + m.group(0))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
