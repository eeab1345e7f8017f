#!/usr/bin/python3
"""Trains a shipped example with shardc + shardrun and compares the run with
PyTorch's (committed in examples/NAME/reference by examples/make_reference.py):
the loss of every step, and every initializer of the exported model.

    check_parity.py --shardc BIN --shardrun BIN --example examples/cnn --optimizer adam
                    [--world-size N --zero-stage K [--against-stage0]]

Elements listed in reference/OPT_gradmask.npz are left out of the weight
comparison: their trained values are set by float rounding noise (see
make_reference.py). Needs numpy and onnx only. Exit code 1 on a mismatch.

With --world-size N, shardc compiles for N data parallel ranks (at ZeRO
stage K with --zero-stage), shardrun starts them, and the run is compared with
the simulated DDP reference reference/ddpN_OPT.* (N = 1: reference/OPT.*).
With --against-stage0 it also compiles and runs stage 0 at the same N and
checks that stage K reproduces its losses and exported weights to 1e-5, every
element, no mask: the stages differ only in where gradients, optimizer state
and parameters live, so they must train the same model. On a power-of-two
number of ranks shardrun's all-reduce (stage 0) and reduce-scatter (stages
1-3) add the ranks' gradients along one tree (runtime/comm/MpiCommunicator.cpp),
so there the stages agree to the bit."""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

LOSS_RTOL = 1e-4
WEIGHT_RTOL = 1e-3
WEIGHT_ATOL = 1e-5

# The logged learning rate (9 significant digits) against LambdaLR's.
LR_RTOL = 1e-8

# The logged gradient norm (shardc --clip-grad-norm) against
# torch.nn.utils.clip_grad_norm_'s: both sum the same float32 gradients in
# different orders (and Shard in float64), so they agree as the losses do.
GRAD_NORM_RTOL = 1e-4

# Stage K against stage 0 (--against-stage0).
STAGE_LOSS_RTOL = 1e-5
STAGE_WEIGHT_RTOL = 1e-5
STAGE_WEIGHT_ATOL = 1e-5

# Keys of the reference config that are not shardc flags (world_size comes
# from --world-size, which must agree with it).
NOT_FLAGS = {"optimizer", "steps", "batch", "world_size"}

# A run that takes longer has hung (a 20-step run takes seconds).
RUN_TIMEOUT_S = 240

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
        elif isinstance(value, str):
            flags.append(f"{flag}={value}")
        else:
            flags.append(f"{flag}={value!r}")
    return flags


def run(cmd, what):
    """Runs CMD; exits on failure."""
    print("$ " + " ".join(cmd), flush=True)
    # A session of its own, so that a hung mpirun goes with all its ranks;
    # no stdin, which mpirun would otherwise read from the caller.
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        sys.stdout.write(out)
        raise SystemExit(f"FAILED: {what} did not finish in {RUN_TIMEOUT_S} s")
    if proc.returncode != 0:
        sys.stdout.write(out)
        raise SystemExit(f"FAILED: {what} exited with code {proc.returncode}")


def read_log(log_path, key="loss"):
    """Each step's `key` from a shardrun --log, in step order (None where a
    step has none; JSON's null, a non-finite value, as NaN)."""
    steps = {}
    with open(log_path) as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                v = rec.get(key, "absent")
                steps[int(rec["step"])] = None if v == "absent" else \
                    float("nan") if v is None else float(v)
    return [steps[s] for s in sorted(steps)]


def read_losses(log_path):
    return read_log(log_path, "loss")


def compare_losses(want, got, rtol=LOSS_RTOL, names=("reference", "shard")):
    """Prints the table; returns the number of steps that differ and the
    largest relative error."""
    print(f"\n{'step':>4}  {names[0]:>14}  {names[1]:>14}  {'rel-err':>9}")
    bad, worst = 0, 0.0
    for s, (w, g) in enumerate(zip(want, got)):
        if w is None:
            # A step loss scaling skipped: no value to compare (shardrun
            # logs null, a non-finite norm).
            ok = g is None or g != g
            bad += not ok
            print(f"{s:>4}  {'skipped':>14}  {g!s:>14}{'' if ok else '  MISMATCH'}")
            continue
        if g is None:
            g = float("nan")  # shardrun logs a non-finite value as null
        rel = abs(g - w) / abs(w) if w != 0 else abs(g)
        ok = rel <= rtol
        bad += not ok
        worst = max(worst, rel) if rel == rel else float("nan")
        print(f"{s:>4}  {w:>14.8g}  {g:>14.8g}  {rel:>9.2e}{'' if ok else '  MISMATCH'}")
    if len(got) != len(want):
        print(f"shardrun logged {len(got)} steps, the reference has {len(want)}")
        bad += abs(len(got) - len(want))
    return bad, worst


def compare_weights(want, got, masks, rtol=WEIGHT_RTOL, atol=WEIGHT_ATOL, stats=None):
    """Prints one line per initializer; returns the names that differ. Fills
    `stats` with the largest absolute error and the largest error in units
    of the tolerance (above 1 fails) over the compared elements."""
    print(f"\n{'initializer':<24} {'shape':<16} {'max-abs-err':>11} {'max-rel-err':>11} "
          f"{'bad':>5} {'excluded':>8}")
    failed = []
    excluded_total = 0
    stats = {} if stats is None else stats
    stats.update(max_abs=0.0, max_tol=0.0)
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
        with np.errstate(invalid="ignore"):  # inf - inf, compared below
            err = np.abs(g64 - w64)
        tol = atol + rtol * np.abs(w64)
        # Equal values match, infinities too (a float mask's -inf); the
        # error of unequal ones is finite or NaN, and NaN is bad.
        err[g64 == w64] = 0.0
        bad = int((~(err <= tol)).sum())
        max_abs = float(err.max()) if err.size else 0.0
        max_rel = float((err / np.maximum(np.abs(w64), atol)).max()) if err.size else 0.0
        if err.size:
            stats["max_abs"] = max(stats["max_abs"], max_abs)
            stats["max_tol"] = max(stats["max_tol"], float((err / tol).max()))
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


def plan_key(name, optimizer, sharding):
    """The directory name of a precompiled plan (--compile-to, --compiled)."""
    return "-".join([name, optimizer] + [f.lstrip("-").replace("=", "")
                                         for f in sharding])


def train(args, name, cfg, work, sharding):
    """Compiles the example with the config's hyperparameters and the
    `sharding` flags, trains it in WORK; returns the logged losses, the exported model's
    initializers and each step's logged "lr" and "grad_norm" (by field)."""
    os.makedirs(work, exist_ok=True)
    plan = os.path.join(work, "plan")
    log = os.path.join(work, "run.jsonl")
    trained = os.path.join(work, "trained.onnx")
    if args.compile_to or args.compiled:
        plan = os.path.join(args.compile_to or args.compiled,
                            plan_key(name, args.optimizer, sharding))
    if not args.compiled:
        run([args.shardc, os.path.join(args.example, f"{name}.onnx"), "-o", plan]
            + shardc_flags(cfg) + sharding + args.shardc_arg, "shardc")
    if args.compile_to:
        return None, None, None
    run([args.shardrun, plan, "--data", os.path.join(args.example, "data"),
         "--steps", str(cfg["steps"]), "--log", log, "--export", trained,
         "--progress", "off"] + args.shardrun_arg, "shardrun")
    return read_losses(log), {i.name: numpy_helper.to_array(i)
                              for i in onnx.load(trained).graph.initializer}, \
        {field: read_log(log, field)
         for field in ("lr", "grad_norm", "loss_scale", "skipped")}


def compare_stages(stage, losses0, weights0, losses, weights, masks):
    """Stage `stage` against stage 0 at the same world size: losses to
    rtol 1e-5, every float element of every initializer to atol + rtol
    1e-5, the reference gradmask's elements included. Returns the problems,
    the largest loss error and the weight statistics.

    The stages run the same kernels on the same micro-batches and, with the
    ranks' gradients added in one order (power-of-two ranks, see the file
    comment), must agree to the bit; the tolerance leaves room for other
    rank counts, where MPI's own algorithms choose each collective's order. Even then the gradmask's elements are not excluded, since that
    would also hide, say, a stage that drops a noise gradient's update;
    instead each failing initializer says how many of its differing elements
    are in the gradmask (set by rounding noise: a summation-order effect)."""
    problems = []
    print(f"\nstage {stage} against stage 0")
    bad_steps, worst = compare_losses(losses0, losses, STAGE_LOSS_RTOL,
                                      ("stage 0", f"stage {stage}"))
    if bad_steps:
        problems.append(f"{bad_steps} step losses of stage {stage} differ from stage 0's "
                        f"by more than rtol {STAGE_LOSS_RTOL:g}")
    stats = {}
    failed = compare_weights(weights0, weights, {}, STAGE_WEIGHT_RTOL, STAGE_WEIGHT_ATOL,
                             stats)
    for k in failed:
        w, g = weights0.get(k), weights.get(k)
        if w is None or g is None or g.shape != w.shape or \
                not np.issubdtype(w.dtype, np.floating):
            continue
        off = ~(np.abs(g.astype(np.float64) - w) <=
                STAGE_WEIGHT_ATOL + STAGE_WEIGHT_RTOL * np.abs(w.astype(np.float64)))
        noisy = int((off & masks[k]).sum()) if k in masks else 0
        print(f"  {k}: {int(off.sum())} elements differ, {noisy} of them in the "
              f"reference gradmask (rounding-noise driven)")
    if failed:
        problems.append(f"{len(failed)} exported initializers of stage {stage} differ from "
                        f"stage 0's by more than rtol {STAGE_WEIGHT_RTOL:g}, atol "
                        f"{STAGE_WEIGHT_ATOL:g}: {', '.join(failed)}")
    return problems, worst, stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardc", help="the compiler (not with --compiled)")
    ap.add_argument("--shardrun", help="the runtime (not with --compile-to)")
    ap.add_argument("--shardrun-arg", action="append", default=[], metavar="ARG",
                    help="one more shardrun flag, e.g. --shardrun-arg=--device=cuda "
                         "(repeatable)")
    ap.add_argument("--compile-to", metavar="DIR",
                    help="only compile the check's plan into DIR/NAME-OPT[-...] and stop "
                         "(for a machine without the compiler: scripts/gpu_bundle.sh)")
    ap.add_argument("--compiled", metavar="DIR",
                    help="run the plan precompiled by --compile-to into DIR instead of "
                         "compiling it")
    ap.add_argument("--example", required=True, help="example directory, e.g. examples/mlp")
    ap.add_argument("--optimizer", required=True, help="a reference in DIR/reference, e.g. sgd")
    ap.add_argument("--world-size", type=int, metavar="N",
                    help="compile for N data parallel ranks (default: single-rank, "
                         "without sharding flags)")
    ap.add_argument("--zero-stage", type=int, choices=range(4), metavar="K",
                    help="ZeRO stage 0-3 (with --world-size)")
    ap.add_argument("--against-stage0", action="store_true",
                    help="also run stage 0 and compare stage K with it to 1e-5")
    ap.add_argument("--shardc-arg", action="append", default=[], metavar="ARG",
                    help="one more shardc flag for every compile, e.g. "
                         "--shardc-arg=--bucket-cap-mb=0.01 (repeatable)")
    ap.add_argument("--shardc-stage-arg", action="append", default=[], metavar="ARG",
                    help="one more shardc flag for the compile at --zero-stage K only, not "
                         "for --against-stage0's stage 0 (e.g. "
                         "--shardc-stage-arg=--accumulate-unsharded; repeatable)")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR and keep the plan, log and model")
    args = ap.parse_args()
    if args.world_size is not None and args.world_size < 1:
        ap.error("--world-size must be at least 1")
    if args.zero_stage is not None and args.world_size is None:
        ap.error("--zero-stage needs --world-size")
    if args.against_stage0 and args.zero_stage is None:
        ap.error("--against-stage0 needs --zero-stage")
    if args.compile_to and args.compiled:
        ap.error("--compile-to and --compiled are exclusive")
    if (args.compile_to or args.compiled) and args.against_stage0:
        ap.error("--compile-to and --compiled check one plan: no --against-stage0")
    if not args.compiled and not args.shardc:
        ap.error("--shardc is needed (or --compiled DIR)")
    if not args.compile_to and not args.shardrun:
        ap.error("--shardrun is needed (or --compile-to DIR)")

    name = os.path.basename(os.path.normpath(args.example))
    world = args.world_size or 1
    stem = args.optimizer if world == 1 else f"ddp{world}_{args.optimizer}"
    refdir = os.path.join(args.example, "reference")
    ref_path = os.path.join(refdir, f"{stem}.json")
    if not os.path.exists(ref_path):
        raise SystemExit(f"no reference {ref_path}: make it with examples/make_reference.py"
                         f" --world-size {world}")
    with open(ref_path) as f:
        ref = json.load(f)
    cfg = ref["config"]
    if cfg.get("world_size", 1) != world:
        raise SystemExit(f"{ref_path} is for world size {cfg.get('world_size', 1)}, "
                         f"not {world}")
    want_weights = dict(np.load(os.path.join(refdir, f"{stem}_weights.npz")))
    mask_path = os.path.join(refdir, f"{stem}_gradmask.npz")
    masks = dict(np.load(mask_path)) if os.path.exists(mask_path) else {}

    sharding = []
    if args.world_size is not None:
        sharding += [f"--world-size={world}"]
    if args.zero_stage is not None:
        sharding += [f"--zero-stage={args.zero_stage}"]
    sharding += args.shardc_stage_arg
    stage0 = args.against_stage0 and args.zero_stage != 0
    setup = ("" if args.world_size is None else f" world {world}") + \
        ("" if args.zero_stage is None else f" stage {args.zero_stage}")
    what = f"{name} {args.optimizer}{setup}"
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        got_losses, got_weights, got_log = train(args, name, cfg, work, sharding)
        if args.compile_to:
            print(f"compiled {what} into {args.compile_to}")
            return 0
        if stage0:
            losses_k, weights_k = got_losses, got_weights
            losses0, weights0, _ = train(args, name, cfg, os.path.join(work, "stage0"),
                                         [f"--world-size={world}", "--zero-stage=0"])

    print(f"\n{name} / {args.optimizer}{setup}: {cfg}")
    # A mixed-precision reference carries its own tolerance, derived from
    # the spread of two PyTorch runs (examples/make_reference.py).
    tol = ref.get("tolerance", {})
    loss_rtol = tol.get("loss_rtol", LOSS_RTOL)
    weight_rtol = tol.get("weight_rtol", WEIGHT_RTOL)
    weight_atol = tol.get("weight_atol", WEIGHT_ATOL)
    bad_steps, loss_err = compare_losses(ref["losses"], got_losses, loss_rtol)
    stats = {}
    failed = compare_weights(want_weights, got_weights, masks, weight_rtol, weight_atol,
                             stats=stats)
    problems = []
    if bad_steps:
        problems.append(f"{bad_steps} of {len(ref['losses'])} step losses differ from "
                        f"PyTorch's by more than rtol {loss_rtol:g}")
    if failed:
        problems.append(f"{len(failed)} trained initializers differ from PyTorch's by more "
                        f"than rtol {weight_rtol:g}, atol {weight_atol:g}: {', '.join(failed)}")
    # Each step's logged learning rate and gradient norm, where the
    # reference has them.
    grad_norm_err = None
    for key, field, rtol, differ in (
            ("lrs", "lr", LR_RTOL, "learning rates differ from PyTorch's LambdaLR"),
            ("grad_norms", "grad_norm", tol.get("grad_norm_rtol", GRAD_NORM_RTOL),
             "gradient norms differ from torch.nn.utils.clip_grad_norm_'s")):
        if key not in ref:
            continue
        print(f"\n{field} of each step")
        got = got_log[field]
        if None in got:
            problems.append(f"shardrun logged no \"{field}\" at some steps")
            continue
        bad, worst = compare_losses(ref[key], got, rtol, ("reference", "shard"))
        if bad:
            problems.append(f"{bad} logged {differ} by more than rtol {rtol:g}")
        if key == "grad_norms":
            grad_norm_err = worst
    # Loss scaling: the same steps skipped, the same scale at every step
    # (powers of two: exact).
    if "loss_scales" in ref:
        got_scales = got_log["loss_scale"]
        got_skipped = [v is not None for v in got_log["skipped"]]
        print(f"\n{'step':>4}  {'reference scale':>16}  {'shard scale':>16}  skipped")
        for s, (w, g, ws, gs) in enumerate(zip(ref["loss_scales"], got_scales,
                                                ref["skipped"], got_skipped)):
            same = w == g and ws == gs
            print(f"{s:>4}  {w:>16.9g}  {g!s:>16}  {ws!s:>5} {gs!s:>5}"
                  f"{'' if same else '  MISMATCH'}")
        if got_scales != ref["loss_scales"] or got_skipped != ref["skipped"]:
            problems.append("the loss scale or the skipped steps differ from "
                            "GradScaler's")
    summary = (f"loss-rel-err={loss_err:.2e} weight-abs-err={stats['max_abs']:.2e} "
               f"weight-err/tol={stats['max_tol']:.2f}")
    if "grad_norms" in ref and grad_norm_err is not None:
        summary += f" grad-norm-rel-err={grad_norm_err:.2e}"
    if stage0:
        more, loss0_err, stats0 = compare_stages(args.zero_stage, losses0, weights0,
                                                 losses_k, weights_k, masks)
        problems += more
        summary += (f" vs-stage0: loss-rel-err={loss0_err:.2e} "
                    f"weight-abs-err={stats0['max_abs']:.2e} "
                    f"weight-err/tol={stats0['max_tol']:.2f}")
    print(f"\nsummary {what}: {summary}")
    if problems:
        print(f"\nparity {what}: FAILED\n  " + "\n  ".join(problems))
        return 1
    print(f"\nparity {what}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
