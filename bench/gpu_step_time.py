#!/usr/bin/env python3
"""Step time of a shipped example on one GPU: Shard (shardrun --device cuda
on a compiled plan) against PyTorch (the example's own nn.Module on the same
GPU, the same batch, optimizer and hyperparameters, fp32, TF32 off in both).

    gpu_step_time.py --shardrun BIN --plan PLAN_DIR --example examples/gpt
                     --optimizer adamw [--steps 60 --warmup 10]

Shard's time per step is the median of the step_ms its JSONL log records
(each step ends with the device synchronized) after the warm-up steps;
PyTorch's the median of the same steps timed with torch.cuda.synchronize.
Prints one JSON line. Needs PyTorch with CUDA, numpy and onnx; run by
scripts/gpu_check.sh on a GPU machine."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))


def shard_step_ms(args):
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "run.jsonl")
        subprocess.run([args.shardrun, args.plan, "--device", "cuda", "--data",
                        os.path.join(args.example, "data"), "--steps",
                        str(args.warmup + args.steps), "--log", log,
                        "--progress", "off"], check=True)
        with open(log) as f:
            rows = [json.loads(line) for line in f]
    return statistics.median(r["step_ms"] for r in rows[args.warmup:])


def torch_step_ms(args):
    import numpy as np
    import torch
    import make_reference as ref
    import export_examples

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    name = os.path.basename(os.path.normpath(args.example))
    with open(os.path.join(args.example, "reference", f"{args.optimizer}.json")) as f:
        cfg = json.load(f)["config"]
    model = ref.build_model(name, ref.load_initializers(
        os.path.join(args.example, f"{name}.onnx"))).cuda().train()
    opt = ref.make_optimizer(cfg, [p for p in model.parameters() if p.requires_grad])
    _, _, batch, input_names = export_examples.EXAMPLES[name]
    data = {k: np.load(os.path.join(args.example, "data", f"{k}.npy"))
            for k in input_names}
    n = len(data[input_names[0]])
    times = []
    for s in range(args.warmup + args.steps):
        rows = np.arange(s * batch, (s + 1) * batch) % n
        inputs = [torch.from_numpy(data[k][rows]).cuda() for k in input_names]
        torch.cuda.synchronize()
        start = time.perf_counter()
        _, loss = model(*inputs)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times[args.warmup:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardrun", required=True)
    ap.add_argument("--plan", required=True, help="the example compiled for one rank")
    ap.add_argument("--example", required=True)
    ap.add_argument("--optimizer", default="adamw")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()
    shard = shard_step_ms(args)
    torch_ms = torch_step_ms(args)
    import torch
    print(json.dumps({"example": os.path.basename(os.path.normpath(args.example)),
                      "optimizer": args.optimizer, "gpu": torch.cuda.get_device_name(),
                      "shard_step_ms": round(shard, 3),
                      "pytorch_step_ms": round(torch_ms, 3),
                      "shard_over_pytorch": round(shard / torch_ms, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
