#!/usr/bin/python3
"""Step time of Shard against PyTorch data parallel training on the CPU, the
same model, data, optimizer and threads, in one run.

    bench/step_time.py [--models gpt mlp cnn] [--ranks 2] [--stages 0 3]
                       [--steps 30] [--warmup 5] [--threads 1]

(`--stages` with no stage runs no Shard column.)

Models (PyTorch modules of examples/export_examples.py, exported here):
    gpt  d 256, 4 layers, 8 heads, T 64, vocab 8192, untied head (7.37 M
         parameters), micro-batch 8
    mlp  784 -> 1024 -> 1024 -> 10 (1.86 M parameters), micro-batch 64
    cnn  the CNN example's layers at 32 and 64 channels on 28 x 28 inputs
         with a 3136 -> 256 -> 10 head (0.83 M + 0.02 M parameters),
         micro-batch 32
Every run uses Adam (lr 1e-3), N ranks of one thread each (OpenBLAS and
PyTorch's intra-op pool set to --threads), the same samples per step.

Shard: `shardc --optimizer adam --world-size N --zero-stage S` for each stage
given, run by `shardrun --data --steps --log`; a step's time is the slowest
rank's step_ms from the JSONL log, and the figure is the median over the
steps after the warm-up.
PyTorch: torch.nn.parallel.DistributedDataParallel over gloo (Debian's
python3-torch), N processes; a step is forward, backward and Adam, timed
between barriers on rank 0, the median after the warm-up. When a virtual
environment made by bench/setup_peers.sh is found (bench/.peers), the same
is run with its PyTorch 2.x DDP and FSDP (FULL_SHARD, SHARD_GRAD_OP) and FairScale's
FullyShardedDataParallel (its defaults: reshard after forward, 25 MB
reduce-scatter buckets; run on the CPU as fairscale_fsdp() says).

Prints a Markdown table: ms per step and the ratio to PyTorch DDP.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, HERE)
from memory_bench import tool_env  # noqa: E402

PEERS = os.path.join(HERE, ".peers", "bin", "python3")


def build(name):
    """The model NAME, its example inputs' names and a function making
    `samples` samples of data as {input name: array}."""
    import torch
    import export_examples as ex
    torch.manual_seed(0)
    if name == "gpt":
        vocab, ctx = 8192, 64
        model = ex.GPT(vocab=vocab, ctx=ctx, d=256, heads=8, layers=4, tied=False)

        def data(n, rng):
            tokens = rng.integers(0, vocab, (n, ctx + 1))
            return {"idx": tokens[:, :-1].astype(np.int64),
                    "targets": tokens[:, 1:].astype(np.int64)}
        return model, ["idx", "targets"], 8, data
    if name == "mlp":
        model = ex.MLP(d_in=784, hidden=1024, classes=10)

        def data(n, rng):
            return {"x": rng.standard_normal((n, 784)).astype(np.float32),
                    "y": rng.integers(0, 10, n).astype(np.int64)}
        return model, ["x", "y"], 64, data
    if name == "cnn":
        model = WideCNN()

        def data(n, rng):
            return {"x": rng.standard_normal((n, 1, 28, 28)).astype(np.float32),
                    "y": rng.integers(0, 10, n).astype(np.int64)}
        return model, ["x", "y"], 32, data
    raise SystemExit(f"step_time.py: unknown model {name}")


def WideCNN():
    """The CNN example's layers (conv, BatchNorm, ReLU, max and average
    pooling, a linear head), wider, with a hidden layer in the head."""
    import torch.nn as nn
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(32)
            self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
            self.bn2 = nn.BatchNorm2d(64)
            self.fc = nn.Linear(64 * 7 * 7, 384)
            self.head = nn.Linear(384, 10)

        def forward(self, x, y):
            h = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
            h = F.avg_pool2d(F.relu(self.bn2(self.conv2(h))), 2)
            logits = self.head(F.relu(self.fc(h.flatten(1))))
            return logits, F.cross_entropy(logits, y)
    return Net()


def export(name, out, samples):
    """Exports NAME to OUT/NAME.onnx and its data to OUT/data; returns the
    parameter count."""
    import torch
    model, inputs, batch, make = build(name)
    data = make(samples, np.random.default_rng(0))
    os.makedirs(os.path.join(out, "data"), exist_ok=True)
    for k, v in data.items():
        np.save(os.path.join(out, "data", f"{k}.npy"), v)
    args = tuple(torch.from_numpy(data[k][:batch]) for k in inputs)
    model.train()
    torch.onnx.export(model, args, os.path.join(out, f"{name}.onnx"), input_names=inputs,
                      output_names=["logits", "loss"], opset_version=15,
                      do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)
    torch.save(model.state_dict(), os.path.join(out, f"{name}.pt"))
    return sum(p.numel() for p in model.parameters())


def shard_ms(args, name, out, stage):
    plan = os.path.join(out, f"plan{stage}")
    log = os.path.join(out, f"shard{stage}.jsonl")
    env = tool_env()
    env["OPENBLAS_NUM_THREADS"] = str(args.threads)
    subprocess.run([args.shardc, os.path.join(out, f"{name}.onnx"), "-o", plan, "--optimizer",
                    "adam", "--lr", "1e-3", "--world-size", str(args.ranks), "--zero-stage",
                    str(stage)], check=True, env=env)
    subprocess.run([args.shardrun, plan, "--data", os.path.join(out, "data"), "--steps",
                    str(args.warmup + args.steps), "--log", log, "--progress", "off"],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    with open(log) as f:
        rows = [json.loads(line) for line in f]
    step = {}
    for r in rows:
        step[r["step"]] = max(step.get(r["step"], 0.0), r["step_ms"])
    return statistics.median(v for k, v in sorted(step.items())[args.warmup:])


def torch_ms(args, name, out, mode, python):
    env = tool_env()
    env.update(OPENBLAS_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29500 + os.getpid() % 1000))
    res = os.path.join(out, f"torch_{mode}.json")
    procs = [subprocess.Popen([python, __file__, "--worker", mode, "--model", name, "--dir", out,
                               "--rank", str(r), "--ranks", str(args.ranks), "--steps",
                               str(args.steps), "--warmup", str(args.warmup), "--threads",
                               str(args.threads), "--result", res], env=env)
             for r in range(args.ranks)]
    if any(p.wait() for p in procs):
        raise SystemExit(f"step_time.py: the PyTorch {mode} run failed")
    with open(res) as f:
        return json.load(f)["ms"]


def worker(args):
    """One rank of the PyTorch run (DDP, FSDP or FairScale's FSDP over gloo)."""
    import time
    import torch
    import torch.distributed as dist
    torch.set_num_threads(args.threads)
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(args.rank), str(args.ranks)
    dist.init_process_group("gloo", rank=args.rank, world_size=args.ranks)
    model, inputs, batch, _ = build(args.model)
    model.load_state_dict(torch.load(os.path.join(args.dir, f"{args.model}.pt"), weights_only=True))
    model.train()
    if args.worker == "ddp":
        # gloo cannot broadcast the GPT's boolean mask buffer (a constant).
        DDP = torch.nn.parallel.DistributedDataParallel
        DDP._set_params_and_buffers_to_ignore_for_model(
            model, [k for k, b in model.named_buffers() if b.dtype == torch.bool])
        model = DDP(model)
    elif args.worker == "fairscale":
        model = fairscale_fsdp(model)
    else:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        strategy = {"fsdp_full": ShardingStrategy.FULL_SHARD,
                    "fsdp_grad_op": ShardingStrategy.SHARD_GRAD_OP}[args.worker]
        model = FSDP(model, sharding_strategy=strategy, device_id=torch.device("cpu"))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = {k: np.load(os.path.join(args.dir, "data", f"{k}.npy")) for k in inputs}
    n = len(data[inputs[0]])
    times = []
    for s in range(args.warmup + args.steps):
        rows = (np.arange(batch) + (s * args.ranks + args.rank) * batch) % n
        xs = [torch.from_numpy(data[k][rows]) for k in inputs]
        dist.barrier()
        t0 = time.perf_counter()
        _, loss = model(*xs)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        dist.barrier()
        times.append(1e3 * (time.perf_counter() - t0))
    if args.rank == 0:
        with open(args.result, "w") as f:
            json.dump({"ms": statistics.median(times[args.warmup:])}, f)
    dist.destroy_process_group()


def fairscale_fsdp(model):
    """MODEL in FairScale's FullyShardedDataParallel at its defaults, on the
    CPU. FairScale (0.4.13, its last release) is written for CUDA: its compute
    device defaults to the GPU, and forward and backward wait on CUDA streams
    and record tensors on them. Here the compute device is the CPU, the
    streams are stand-ins whose waits do nothing (CPU kernels run in order on
    the calling thread), and a full reduce-scatter bucket, a [ranks, n] tensor,
    is passed to gloo flat (gloo checks its first dimension against ranks x n,
    NCCL only its size). Sharding, gathering and reduction are FairScale's."""
    import warnings
    import torch
    import torch.distributed as dist
    from fairscale.nn import FullyShardedDataParallel

    class NoStream:
        def wait_stream(self, stream):
            pass
    no_stream = NoStream()
    torch.cuda.current_stream = lambda device=None: no_stream
    torch.Tensor.record_stream = lambda self, stream: None
    reduce_scatter = dist._reduce_scatter_base
    dist._reduce_scatter_base = lambda out, inp, group=None, async_op=False: reduce_scatter(
        out, inp.reshape(-1), group=group, async_op=async_op)
    warnings.filterwarnings("ignore", message=".*(TypedStorage is deprecated|_all_gather_base|"
                            "_reduce_scatter_base)")

    class CPUFSDP(FullyShardedDataParallel):
        def _setup_streams(self):
            super()._setup_streams()
            for k in ("fp32_to_fp16", "all_gather", "post_backward"):
                self._streams.setdefault(k, no_stream)
    return CPUFSDP(model, compute_device=torch.device("cpu"))


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["gpt", "mlp", "cnn"])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--stages", type=int, nargs="*", default=[0, 3])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build/bin/shardc"))
    ap.add_argument("--shardrun", default=os.path.join(ROOT, "build/bin/shardrun"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)

    peers = os.path.exists(PEERS)
    print(f"CPU: {cpu_model()}; {os.cpu_count()} cores; {args.ranks} ranks of "
          f"{args.threads} thread(s); Adam; median of {args.steps} steps after {args.warmup}")
    cols = [f"Shard stage {s}" for s in args.stages] + ["PyTorch DDP"]
    if peers:
        cols += ["DDP (PyTorch 2.x)", "FSDP FULL_SHARD", "FSDP SHARD_GRAD_OP", "FairScale FSDP"]
    print()
    print("| model | params | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 2) + "|")
    for name in args.models:
        with tempfile.TemporaryDirectory() as out:
            samples = (args.warmup + args.steps) * args.ranks * build(name)[2]
            psi = export(name, out, samples)
            ddp = torch_ms(args, name, out, "ddp", "/usr/bin/python3")
            times = [shard_ms(args, name, out, s) for s in args.stages] + [ddp]
            if peers:
                times += [torch_ms(args, name, out, m, PEERS)
                          for m in ("ddp", "fsdp_full", "fsdp_grad_op", "fairscale")]
            cells = [f"{t:.1f} ms ({t / ddp:.2f}x)" for t in times]
            print(f"| {name} | {psi / 1e6:.2f} M | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
