#!/usr/bin/env python3
"""Exports torchvision's models with PyTorch 2.x, trains each with shardc +
shardrun and compares with PyTorch, one line per model.

Needs torch and torchvision, which Debian does not ship at 2.x; make a
virtual environment from PyPI once (the wheels bring CUDA libraries along,
a few GiB; everything runs on the CPU):

    /usr/bin/python3 -m venv /work/venv-tv
    /work/venv-tv/bin/pip install torch==2.5.1 torchvision==0.20.1 onnx numpy
    /work/venv-tv/bin/python test/exporters/check_torchvision.py [--models resnet18 ...]

Each model (10 classes, dropout and stochastic depth off, so that PyTorch's
run can be repeated) gets a fixed random data set of 2 x 3 micro-batches of
8 images and is exported with its cross-entropy loss in training mode
(torch.onnx.export(..., dynamo=False, training=TRAINING), opset 17; with
--dynamo, dynamo=True, optimize=False). Then:

  - PyTorch trains it with SGD for 3 steps, in float64 (the reference) and
    in float32 (how far float32 rounding alone moves the losses);
  - Shard trains it on one rank; each step's loss must be within 1e-4 of
    the reference's, or within 10 times its sensitivity: the largest
    of PyTorch float32's distance from it and those of four float64 runs on
    images changed by 1e-6 relative noise. Batch statistics over a few
    pixels and ReLU kinks make some of these networks amplify rounding
    (a float32 forward differs from float64 by about that much), and
    training steps amplify it further;
  - Shard trains it on 2 ranks at ZeRO stages 0 and 3: the two runs' losses
    must be bitwise equal.

Exit code 1 when a model fails any of these, 0 otherwise.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.models as tvm

import harness  # this directory's shared part

BATCH, STEPS, LR = 8, 3, 1e-3
LOSS_RTOL = 1e-4

# name -> (constructor, image size)
MODELS = {
    "resnet18": (lambda: tvm.resnet18(num_classes=10), 32),
    "mobilenet_v2": (lambda: tvm.mobilenet_v2(num_classes=10, dropout=0.0), 32),
    "mobilenet_v3_small": (lambda: tvm.mobilenet_v3_small(num_classes=10, dropout=0.0), 32),
    "efficientnet_b0": (lambda: tvm.efficientnet_b0(
        num_classes=10, dropout=0.0, stochastic_depth_prob=0.0), 32),
    "shufflenet_v2_x0_5": (lambda: tvm.shufflenet_v2_x0_5(num_classes=10), 32),
    "squeezenet1_1": (lambda: tvm.squeezenet1_1(num_classes=10, dropout=0.0), 64),
    "densenet121": (lambda: tvm.densenet121(num_classes=10), 32),
    "googlenet": (lambda: tvm.googlenet(num_classes=10, aux_logits=False, init_weights=True,
                                        dropout=0.0), 32),
    "regnet_x_400mf": (lambda: tvm.regnet_x_400mf(num_classes=10), 32),
    "mnasnet0_5": (lambda: tvm.mnasnet0_5(num_classes=10, dropout=0.0), 32),
    "convnext_tiny": (lambda: tvm.convnext_tiny(num_classes=10, stochastic_depth_prob=0.0), 32),
    "vit": (lambda: tvm.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                          hidden_dim=64, mlp_dim=128, num_classes=10), 32),
    "swin": (lambda: tvm.SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2],
                                         num_heads=[2, 4], window_size=[4, 4],
                                         stochastic_depth_prob=0.0, num_classes=10), 32),
    "alexnet": (lambda: tvm.alexnet(num_classes=10, dropout=0.0), 224),
    "vgg11_bn": (lambda: tvm.vgg11_bn(num_classes=10, dropout=0.0), 224),
}


class WithLoss(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, x, y):
        logits = self.m(x)
        return logits, F.cross_entropy(logits, y)


def torch_losses(make, x, y, dtype, noise_seed=None):
    if noise_seed is not None:
        x = x.astype(np.float64)
        x = x * (1 + 1e-6 * np.random.default_rng(noise_seed).standard_normal(x.shape))
    torch.manual_seed(0)
    model = make().to(dtype)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for s in range(STEPS):
        xb = torch.from_numpy(x[s * BATCH:(s + 1) * BATCH]).to(dtype)
        yb = torch.from_numpy(y[s * BATCH:(s + 1) * BATCH])
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def shard_losses(args, onnx_path, data, out, ranks, stage):
    return harness.shard_losses(args, onnx_path, data, out, ranks, stage, STEPS, LR)


def check(args, name, out):
    make, size = MODELS[name]
    data = os.path.join(out, "data")
    os.makedirs(data)
    n = BATCH * 2 * STEPS
    x = np.random.default_rng(1).standard_normal((n, 3, size, size)).astype(np.float32)
    y = np.random.default_rng(2).integers(0, 10, (n,)).astype(np.int64)
    np.save(os.path.join(data, "x.npy"), x)
    np.save(os.path.join(data, "y.npy"), y)
    torch.manual_seed(0)
    model = make()
    model.train()
    path = os.path.join(out, "model.onnx")
    example = (torch.from_numpy(x[:BATCH]), torch.from_numpy(y[:BATCH]))
    if args.dynamo:
        torch.onnx.export(WithLoss(model), example, path, input_names=["x", "y"],
                          output_names=["logits", "loss"], dynamo=True, optimize=False)
    else:
        torch.onnx.export(WithLoss(model), example, path, input_names=["x", "y"],
                          output_names=["logits", "loss"], opset_version=17,
                          do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING,
                          dynamo=False)
    ref = torch_losses(make, x, y, torch.float64)
    rel = lambda a, b: [abs(p - q) / abs(q) for p, q in zip(a, b)]
    others = [torch_losses(make, x, y, torch.float32)] + [
        torch_losses(make, x, y, torch.float64, seed) for seed in (3, 4, 5, 6)]
    # Per step: the first is the forward alone, the later ones add training.
    sensitivity = np.max([rel(o, ref) for o in others], axis=0)
    one = shard_losses(args, path, data, out, 1, 0)
    s0 = shard_losses(args, path, data, out, 2, 0)
    s3 = shard_losses(args, path, data, out, 2, 3)
    err = np.array(rel(one, ref))
    ok = bool(np.all((err <= LOSS_RTOL) | (err <= 10 * sensitivity))) and s0 == s3
    params = sum(p.numel() for p in model.parameters())
    print(f"{name}: {'ok' if ok else 'MISMATCH'}, {params / 1e6:.2f} M parameters; "
          f"1 rank: step losses within {', '.join(f'{e:.1e}' for e in err)} of PyTorch "
          f"float64 (its sensitivity: {', '.join(f'{e:.1e}' for e in sensitivity)}); "
          f"2 ranks: stage 3 {'==' if s0 == s3 else '!='} stage 0", flush=True)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--dynamo", action="store_true",
                    help="export with dynamo=True, optimize=False instead of TorchScript")
    harness.add_tool_args(ap)
    args = ap.parse_args()
    return harness.check_models(args.models, lambda name, out: check(args, name, out), "shard-tv")


if __name__ == "__main__":
    sys.exit(main())
