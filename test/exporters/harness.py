"""What test/exporters' checks share (no torch here: each check runs under
its own PyTorch): running shardc and shardrun on an exported model, and the
loop over the models with its summary line."""
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def add_tool_args(ap):
    """--shardc and --shardrun, defaulting to the build tree's."""
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build/bin/shardc"))
    ap.add_argument("--shardrun", default=os.path.join(ROOT, "build/bin/shardrun"))


def run(cmd, timeout=3600):
    """Runs CMD; an exception with the end of its output when it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n"
                           f"{r.stdout[-2000:]}{r.stderr[-3000:]}")


def shard_losses(args, onnx_path, data, out, ranks, stage, steps, lr, flags=()):
    """Each step's loss of the model trained by SGD at LR for STEPS steps on
    DATA, compiled for RANKS ranks at ZeRO STAGE (one rank: no sharding
    flags) in OUT, with more shardc FLAGS."""
    plan, log = os.path.join(out, f"plan{ranks}_{stage}"), os.path.join(out, f"log{ranks}_{stage}")
    world = ["--world-size", str(ranks), "--zero-stage", str(stage)] if ranks > 1 else []
    run([args.shardc, onnx_path, "-o", plan, "--optimizer", "sgd", "--lr", str(lr)] + world
        + list(flags))
    run([args.shardrun, plan, "--data", data, "--steps", str(steps), "--log", log,
         "--progress", "off"])
    with open(log) as f:
        return [json.loads(line)["loss"] for line in f]


def check_models(names, check, prefix):
    """Calls check(name, workdir) for each model in a temporary directory
    (an exception, an export or a run failing, is a failure too), prints one
    line in all; the exit code: 1 if any failed."""
    failed = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"{prefix}-{name}-") as out:
            try:
                if not check(name, out):
                    failed.append(name)
            except Exception as e:
                print(f"{name}: FAILED: {str(e)[:3000]}", flush=True)
                failed.append(name)
    print(f"{len(names) - len(failed)} of {len(names)} models ok"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0
