#!/usr/bin/python3
"""Trains a shipped example with shardc + shardrun and compares the run with
PyTorch's (committed in examples/NAME/reference by examples/make_reference.py):
the loss of every step, and every initializer of the exported model.

    check_parity.py --shardc BIN --shardrun BIN --example examples/cnn --optimizer adam

Elements listed in reference/OPT_gradmask.npz are left out of the weight
comparison: their trained values are set by float rounding noise (see
make_reference.py). Needs numpy and onnx only. Exit code 1 on a mismatch."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

LOSS_RTOL = 1e-4
WEIGHT_RTOL = 1e-3
WEIGHT_ATOL = 1e-5

# Keys of the reference config that are not shardc flags.
NOT_FLAGS = {"optimizer", "steps", "batch"}


def shardc_flags(cfg):
    """The config's hyperparameters as shardc flags ("weight_decay" ->
    --weight-decay); a true bool is a bare flag."""
    flags = ["--optimizer", cfg["optimizer"]]
    for key, value in cfg.items():
        if key in NOT_FLAGS:
            continue
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            flags += [flag] if value else []
        else:
            flags.append(f"{flag}={value!r}")
    return flags


def run(cmd, what):
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout)
        raise SystemExit(f"FAILED: {what} exited with code {proc.returncode}")


def read_losses(log_path):
    steps = {}
    with open(log_path) as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                steps[int(rec["step"])] = float(rec["loss"])
    return [steps[s] for s in sorted(steps)]


def compare_losses(want, got):
    """Prints the table; returns the number of steps that differ."""
    print(f"\n{'step':>4}  {'reference':>14}  {'shard':>14}  {'rel-err':>9}")
    bad = 0
    for s, (w, g) in enumerate(zip(want, got)):
        rel = abs(g - w) / abs(w) if w != 0 else abs(g)
        ok = rel <= LOSS_RTOL
        bad += not ok
        print(f"{s:>4}  {w:>14.8g}  {g:>14.8g}  {rel:>9.2e}{'' if ok else '  MISMATCH'}")
    if len(got) != len(want):
        print(f"shardrun logged {len(got)} steps, the reference has {len(want)}")
        bad += abs(len(got) - len(want))
    return bad


def compare_weights(want, got, masks):
    """Prints one line per initializer; returns the names that differ."""
    print(f"\n{'initializer':<24} {'shape':<16} {'max-abs-err':>11} {'max-rel-err':>11} "
          f"{'bad':>5} {'excluded':>8}")
    failed = []
    excluded_total = 0
    for name in sorted(want):
        w = want[name]
        if name not in got:
            print(f"{name:<24} missing from the exported model  MISMATCH")
            failed.append(name)
            continue
        g = got[name]
        shape = "x".join(map(str, w.shape)) or "scalar"
        if g.shape != w.shape or g.dtype != w.dtype:
            print(f"{name:<24} {shape:<16} exported as {g.dtype}{list(g.shape)}  MISMATCH")
            failed.append(name)
            continue
        if not np.issubdtype(w.dtype, np.floating):
            same = np.array_equal(g, w)
            print(f"{name:<24} {shape:<16} {'(exact)':>11} {'':>11} "
                  f"{0 if same else int((g != w).sum()):>5} {0:>8}{'' if same else '  MISMATCH'}")
            failed += [] if same else [name]
            continue
        keep = ~masks[name] if name in masks else np.ones(w.shape, bool)
        excluded = int((~keep).sum())
        excluded_total += excluded
        w64, g64 = w[keep].astype(np.float64), g[keep].astype(np.float64)
        err = np.abs(g64 - w64)
        bad = int((~(err <= WEIGHT_ATOL + WEIGHT_RTOL * np.abs(w64))).sum())  # NaN is bad
        max_abs = float(err.max()) if err.size else 0.0
        max_rel = float((err / np.maximum(np.abs(w64), WEIGHT_ATOL)).max()) if err.size else 0.0
        print(f"{name:<24} {shape:<16} {max_abs:>11.3e} {max_rel:>11.3e} {bad:>5} "
              f"{excluded:>8}{'  MISMATCH' if bad else ''}")
        if bad:
            failed.append(name)
    extra = sorted(set(got) - set(want))
    if extra:
        print(f"exported initializers without a reference (not compared): {extra}")
    print(f"{excluded_total} elements excluded as rounding-noise driven "
          f"(reference gradmask)")
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--shardrun", required=True)
    ap.add_argument("--example", required=True, help="example directory, e.g. examples/mlp")
    ap.add_argument("--optimizer", required=True, help="a reference in DIR/reference, e.g. sgd")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR and keep the plan, log and model")
    args = ap.parse_args()

    name = os.path.basename(os.path.normpath(args.example))
    refdir = os.path.join(args.example, "reference")
    with open(os.path.join(refdir, f"{args.optimizer}.json")) as f:
        ref = json.load(f)
    cfg = ref["config"]
    want_weights = dict(np.load(os.path.join(refdir, f"{args.optimizer}_weights.npz")))
    mask_path = os.path.join(refdir, f"{args.optimizer}_gradmask.npz")
    masks = dict(np.load(mask_path)) if os.path.exists(mask_path) else {}

    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        plan = os.path.join(work, "plan")
        log = os.path.join(work, "run.jsonl")
        trained = os.path.join(work, "trained.onnx")
        run([args.shardc, os.path.join(args.example, f"{name}.onnx"), "-o", plan]
            + shardc_flags(cfg), "shardc")
        run([args.shardrun, plan, "--data", os.path.join(args.example, "data"),
             "--steps", str(cfg["steps"]), "--log", log, "--export", trained,
             "--progress", "off"], "shardrun")
        got_losses = read_losses(log)
        got_weights = {i.name: numpy_helper.to_array(i)
                       for i in onnx.load(trained).graph.initializer}

    print(f"\n{name} / {args.optimizer}: {cfg}")
    bad_steps = compare_losses(ref["losses"], got_losses)
    failed = compare_weights(want_weights, got_weights, masks)
    problems = []
    if bad_steps:
        problems.append(f"{bad_steps} of {len(ref['losses'])} step losses differ from "
                        f"PyTorch's by more than rtol {LOSS_RTOL:g}")
    if failed:
        problems.append(f"{len(failed)} trained initializers differ from PyTorch's by more "
                        f"than rtol {WEIGHT_RTOL:g}, atol {WEIGHT_ATOL:g}: {', '.join(failed)}")
    if problems:
        print(f"\nparity {name} {args.optimizer}: FAILED\n  " + "\n  ".join(problems))
        return 1
    print(f"\nparity {name} {args.optimizer}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
