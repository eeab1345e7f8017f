#!/usr/bin/python3
"""Exports small training-mode models built from PyTorch's standard modules
and functions (activations, norms, pooling, reductions, losses, ...) and
compiles each with shardc, printing which compile and the first error of
those that do not: a quick survey of what a PyTorch user will hit.

    /usr/bin/python3 scripts/probe_pytorch_modules.py build/bin/shardc [WORKDIR]

Needs Debian's python3-torch; the test suite does not use it.
"""
import os
import subprocess
import sys
import tempfile
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore")
SHARDC = os.path.abspath(sys.argv[1])
os.makedirs(sys.argv[2], exist_ok=True) if len(sys.argv) > 2 else None
os.chdir(sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="probe-"))


class M(nn.Module):
    def __init__(s, f, shape): super().__init__(); s.f=f; s.lin=nn.Linear(shape[-1], shape[-1])
    def forward(s, x): y=s.f(s.lin(x)); return y, (y.float()**2).mean()
cases = {
 "LeakyReLU": (nn.LeakyReLU(0.1), (4,8)), "ELU": (nn.ELU(), (4,8)), "SELU": (nn.SELU(), (4,8)), "CELU": (nn.CELU(), (4,8)),
 "SiLU": (nn.SiLU(), (4,8)), "Mish": (nn.Mish(), (4,8)), "PReLU": (nn.PReLU(), (4,8)), "Hardtanh": (nn.Hardtanh(), (4,8)),
 "ReLU6": (nn.ReLU6(), (4,8)), "Hardsigmoid": (nn.Hardsigmoid(), (4,8)), "Softsign": (nn.Softsign(), (4,8)),
 "GELU_tanh": (nn.GELU(approximate="tanh"), (4,8)), "LogSigmoid": (nn.LogSigmoid(), (4,8)), "Tanhshrink": (nn.Tanhshrink(), (4,8)),
 "Softmin": (nn.Softmin(-1), (4,8)), "BatchNorm1d": (nn.BatchNorm1d(8), (4,8)), "LayerNorm": (nn.LayerNorm(8), (4,8)),
 "GroupNorm": (nn.Sequential(nn.Unflatten(1,(8,1)), nn.GroupNorm(2,8), nn.Flatten()), (4,8)),
 "Conv1d": (nn.Sequential(nn.Unflatten(1,(1,8)), nn.Conv1d(1,2,3,padding=1), nn.Flatten()), (4,8)),
 "MaxPool1d": (nn.Sequential(nn.Unflatten(1,(1,8)), nn.MaxPool1d(2), nn.Flatten()), (4,8)),
 "AvgPool1d": (nn.Sequential(nn.Unflatten(1,(1,8)), nn.AvgPool1d(2), nn.Flatten()), (4,8)),
 "AdaptiveAvgPool1d4": (nn.Sequential(nn.Unflatten(1,(1,8)), nn.AdaptiveAvgPool1d(4), nn.Flatten()), (4,8)),
 "AdaptiveMaxPool1d1": (nn.Sequential(nn.Unflatten(1,(1,8)), nn.AdaptiveMaxPool1d(1), nn.Flatten()), (4,8)),
 "PixelShuffle": (nn.Sequential(nn.Unflatten(1,(8,1,1)), nn.PixelShuffle(2), nn.Flatten()), (4,8)),
 "Dropout2d_eval": (nn.Sequential(nn.Unflatten(1,(8,1,1)), nn.Dropout2d(0.0), nn.Flatten()), (4,8)),
 "max_reduce": (lambda x: x.max(dim=-1).values, (4,8)), "min_reduce": (lambda x: x.amin(dim=-1), (4,8)),
 "clamp": (lambda x: x.clamp(-0.5, 0.5), (4,8)), "cumsum": (lambda x: x.cumsum(-1), (4,8)),
 "norm": (lambda x: x.norm(dim=-1), (4,8)), "normalize": (lambda x: F.normalize(x, dim=-1), (4,8)),
 "cosine": (lambda x: F.cosine_similarity(x, x.flip(0)), (4,8)), "topk": (lambda x: x.topk(2).values, (4,8)),
 "sort": (lambda x: x.sort(-1).values, (4,8)), "var": (lambda x: x.var(-1), (4,8)), "std": (lambda x: x.std(-1), (4,8)),
 "logsumexp": (lambda x: x.logsumexp(-1), (4,8)), "rsqrt": (lambda x: (x*x+1).rsqrt(), (4,8)),
 "reciprocal": (lambda x: 1/(x*x+1), (4,8)), "sin_cos": (lambda x: x.sin()+x.cos(), (4,8)), "atan": (lambda x: x.atan(), (4,8)),
 "floor": (lambda x: x.floor()+x, (4,8)), "sign": (lambda x: x.sign()*x, (4,8)), "minimum": (lambda x: torch.minimum(x, x.flip(0)), (4,8)),
 "masked_fill": (lambda x: x.masked_fill(x > 0.5, 0.0), (4,8)), "pad": (lambda x: F.pad(x, (1,1)), (4,8)),
 "roll": (lambda x: x.roll(1, -1), (4,8)), "repeat": (lambda x: x.repeat(1,2), (4,8)), "tile_expand": (lambda x: x[:, None].expand(4,3,8).sum(1), (4,8)),
 "einsum": (lambda x: torch.einsum("bi,bj->bij", x, x).sum(-1), (4,8)), "bmm": (lambda x: torch.bmm(x[:,None], x[:,:,None]).squeeze(-1), (4,8)),
 "one_hot": (lambda x: x + F.one_hot(torch.arange(4) % 8, 8).float(), (4,8)),
 "mse": (lambda x: F.mse_loss(x, x.detach()*0.5)[None], (4,8)), "l1": (lambda x: F.l1_loss(x, x.detach()*0.5)[None], (4,8)),
 "smooth_l1": (lambda x: F.smooth_l1_loss(x, x.detach()*0.5)[None], (4,8)), "huber": (lambda x: F.huber_loss(x, x.detach()*0.5)[None], (4,8)),
 "bce_logits": (lambda x: F.binary_cross_entropy_with_logits(x, (x.detach()>0).float())[None], (4,8)),
 "bce": (lambda x: F.binary_cross_entropy(torch.sigmoid(x), (x.detach()>0).float())[None], (4,8)),
 "kl_div": (lambda x: F.kl_div(F.log_softmax(x,-1), F.softmax(x.detach(),-1), reduction="batchmean")[None], (4,8)),
 "nll_weight": (lambda x: F.cross_entropy(x, torch.arange(4), weight=torch.ones(8), label_smoothing=0.1)[None], (4,8)),
}
res={}
for name,(f,shape) in cases.items():
    m=M(f,shape); m.train(); x=torch.randn(*shape)
    try:
        torch.onnx.export(m, (x,), f"{name}.onnx", input_names=["x"], output_names=["y","loss"], training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    except Exception as e:
        res[name]="EXPORT FAIL: "+str(e).splitlines()[0][:80]; continue
    r=subprocess.run([SHARDC, f"{name}.onnx", "-o", f"{name}.plan", "--optimizer", "sgd", "--loss", "loss"], capture_output=True, text=True)
    res[name]="ok" if r.returncode==0 else r.stderr.strip().splitlines()[0][:200]
for k,v in res.items(): print(f"{k:20s} {v}")
