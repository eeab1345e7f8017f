#!/usr/bin/python3
"""Exports torchvision's ResNet-18 (Debian's python3-torchvision; 11.7 M
parameters, BatchNorm, residual adds, adaptive average pooling) in training
mode with its loss, at 64x64 inputs and a micro-batch of 8, and trains it in
PyTorch to make the reference check_resnet18.py compares Shard with. It
trains twice, in float32 and in float64: BatchNorm over 8 samples makes
this network sensitive enough that float32 rounding alone moves its losses
by up to ~1e-2 within 20 steps, and the check allows Shard to differ from
PyTorch's float32 run by as much as that run differs from the float64 one.

    /usr/bin/python3 test/models/export_resnet18.py

Writes next to this script:
    resnet18.onnx             the graph, initializers without data (their
                              values are resnet18_init.initial_value's)
    resnet18_reference.json   per optimizer and precision (float32,
                              float64): the loss of each of 20 steps and
                              the L2 norm of every float initializer after
                              them
Needs torch and torchvision; the tests do not.
"""
import json
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import resnet18_init  # noqa: E402

BATCH, STEPS = 8, 20
OPTIMIZERS = {
    "sgd": dict(lr=0.01, momentum=0.9),
    "adam": dict(lr=1e-4),
    "adamw": dict(lr=1e-4, weight_decay=0.01),
}


class ResNet18(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torchvision.models.resnet18(num_classes=10)

    def forward(self, x, y):
        logits = self.net(x)
        return logits, F.cross_entropy(logits, y)


def make_model():
    model = ResNet18()
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if name.endswith("num_batches_tracked"):
                t.zero_()
            else:
                t.copy_(torch.from_numpy(resnet18_init.initial_value(
                    name, tuple(t.shape), np.float32)))
    return model


def main():
    data = resnet18_init.data()
    x, y = torch.from_numpy(data["x"]), torch.from_numpy(data["y"])
    model = make_model()
    model.train()
    path = os.path.join(HERE, "resnet18.onnx")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    torch.onnx.export(model, (x[:BATCH], y[:BATCH]), path, input_names=["x", "y"],
                      output_names=["logits", "loss"], opset_version=15,
                      do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING)
    model.load_state_dict(state)
    m = onnx.load(path)
    for init in m.graph.initializer:
        init.ClearField("raw_data")
        init.ClearField("float_data")
        init.ClearField("int64_data")
    onnx.save(m, path)
    names = [i.name for i in m.graph.initializer]

    reference = {}
    n = len(x)
    for opt_name, kw in OPTIMIZERS.items():
        reference[opt_name] = {"config": dict(optimizer=opt_name, **kw)}
        for precision, dtype in (("float32", torch.float32), ("float64", torch.float64)):
            model = make_model().to(dtype)
            model.train()
            cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam,
                   "adamw": torch.optim.AdamW}[opt_name]
            opt = cls(model.parameters(), **kw)
            losses = []
            for s in range(STEPS):
                rows = np.arange(s * BATCH, (s + 1) * BATCH) % n
                opt.zero_grad()
                _, loss = model(x[rows].to(dtype), y[rows])
                loss.backward()
                opt.step()
                losses.append(float(loss))
            state = model.state_dict()
            norms = {k: float(np.linalg.norm(state[k].numpy().astype(np.float64)))
                     for k in names if state[k].is_floating_point()}
            reference[opt_name][precision] = {"losses": losses, "norms": norms}
            print(f"{opt_name} {precision}: loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    with open(os.path.join(HERE, "resnet18_reference.json"), "w") as f:
        json.dump(reference, f, indent=1)


if __name__ == "__main__":
    main()
