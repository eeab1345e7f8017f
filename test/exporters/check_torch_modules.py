#!/usr/bin/python3
"""Exports models built from PyTorch's own modules and functions with
Debian's PyTorch 1.13 (TorchScript exporter, training mode, opset 14; 16
where OPSETS says),
trains each with shardc + shardrun and compares with PyTorch, one line per
model.

    /usr/bin/python3 test/exporters/check_torch_modules.py [--models lstm einsum ...]

Not part of ctest (tests need no torch): a check to run after changing the
importer or the kernels. The models cover what a PyTorch user's model is
made of: nn.RNN/LSTM/GRU (bidirectional, two layers, Relu), attention
(nn.MultiheadAttention with masks and kdim/vdim, nn.Transformer, encoder
and decoder layers, einsum attention, a LLaMA block with RMSNorm, rotary
tables and SwiGLU), convolutions (1-d, 2-d grouped and dilated, 3-d,
transposed) with every norm (BatchNorm, GroupNorm, InstanceNorm,
LayerNorm), pooling, upsampling, padding and pixel shuffle, and the
activation, loss and indexing functions (torch.gather, F.one_hot, cumsum,
var/std, F.normalize, slice and index assignment, scatter, scatter_add,
tan, asin, acos, atan, topk, sort).

Each model takes a fixed random data set and is trained with SGD (lr 0.05)
for 4 steps:
  - on one rank, whose losses must match PyTorch's on the same micro-batches
    within 1e-5 relative;
  - on 2 ranks at ZeRO stage 0, whose losses must match PyTorch on the
    global batch within 1e-5 (DDP semantics), except for models whose loss
    depends on how the batch is split (batch statistics, a sum reduction, a
    scan over samples), marked below;
  - on 2 ranks at ZeRO stage 3, whose losses must equal stage 0's bit for bit.
Registered buffers that PyTorch does not train (the LLaMA block's rotary
tables, BCEWithLogitsLoss's pos_weight: the loss is a submodule here) are
frozen with --freeze, as the TorchScript export cannot say which
initializers are buffers; left trained, pos_weight moved the losses by
1.5e-3 within 3 steps. Exit code 1 if any model fails.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import harness  # this directory's shared part

BATCH, STEPS, LR = 8, 4, 0.05
LOSS_RTOL = 1e-5


class LSTMCls(nn.Module):
    def __init__(self, kind, bi=False, layers=2):
        super().__init__()
        self.emb = nn.Embedding(50, 32)
        rnn = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[kind]
        self.rnn = rnn(32, 48, num_layers=layers, batch_first=True, bidirectional=bi)
        self.head = nn.Linear(48 * (2 if bi else 1), 5)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.head(h[:, -1])


class MHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 64)
        self.att = nn.MultiheadAttention(64, 4, batch_first=True)
        self.ln = nn.LayerNorm(64)
        self.head = nn.Linear(64, 5)

    def forward(self, x):
        h = self.emb(x)
        t = h.shape[1]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        a, _ = self.att(h, h, h, attn_mask=mask, need_weights=False)
        return self.head(self.ln(h + a).mean(1))


class Dec(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 64)
        self.dec = nn.TransformerDecoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
        self.head = nn.Linear(64, 50)

    def forward(self, x):
        h = self.emb(x)
        t = h.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        return self.head(self.dec(h, h, tgt_mask=mask)).reshape(-1, 50)


class Enc(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 64)
        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(64, 5)

    def forward(self, x):
        return self.head(self.enc(self.emb(x))[:, 0])


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + self.down(x))


class Full(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 32)
        self.tr = nn.Transformer(32, 4, 1, 1, 64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        h = self.emb(x)
        return self.head(self.tr(h, h[:, :6]).mean(1))


class MHAPad(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 32)
        self.att = nn.MultiheadAttention(32, 2, kdim=16, vdim=24, batch_first=True)
        self.k = nn.Linear(32, 16)
        self.v = nn.Linear(32, 24)
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        h = self.emb(x)
        pad = x == 3
        a, w = self.att(h, self.k(h), self.v(h), key_padding_mask=pad)
        return self.head(a.mean(1) + w.mean(1) @ torch.ones(12, 32))


class Dw(nn.Module):
    def __init__(self):
        super().__init__()
        self.b = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU6(),
                               nn.Conv2d(16, 16, 3, 1, 1, groups=16), nn.BatchNorm2d(16), nn.ReLU6(),
                               nn.Conv2d(16, 24, 1), nn.Conv2d(24, 24, 3, dilation=2, padding=2),
                               nn.Hardtanh(-2, 2), nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False),
                               nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                               nn.ReflectionPad2d(1), nn.Conv2d(24, 8, 3), nn.PixelShuffle(2), nn.SELU(),
                               nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(2, 5))

    def forward(self, x):
        return self.b(x)


class Vol(nn.Module):
    def __init__(self):
        super().__init__()
        self.b = nn.Sequential(nn.Conv3d(2, 8, 3, padding=1), nn.BatchNorm3d(8), nn.CELU(), nn.MaxPool3d(2),
                               nn.ConvTranspose3d(8, 4, 2, stride=2), nn.LogSigmoid(), nn.Flatten(),
                               nn.Linear(4 * 8 * 8 * 8, 5), nn.Softsign())

    def forward(self, x):
        return self.b(x)


class Misc(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(20, 64)
        self.glu = nn.GLU()
        self.bil = nn.Linear(32, 16)
        self.ln = nn.LayerNorm(16, elementwise_affine=False)
        self.c1 = nn.ConvTranspose1d(1, 2, 3, stride=2, output_padding=1)
        self.head = nn.Linear(68, 5)

    def forward(self, x):
        g = self.glu(self.l1(x))
        b = self.ln(self.bil(g))
        c = F.tanhshrink(self.c1(b.unsqueeze(1))).flatten(1)
        cs = F.cosine_similarity(g[:, :16], b, dim=1).unsqueeze(1)
        cum = torch.cumsum(b, 1)[:, -1:]
        return self.head(torch.cat([c, cs, cum, F.softmin(b, 1)[:, :1]], 1)[:, :68]) + F.softplus(cs, beta=2)


class EinAttn(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 32)
        self.qkv = nn.Linear(32, 96)
        self.w = nn.Parameter(torch.randn(32, 4, 8) * 0.1)
        self.head = nn.Linear(4, 5)

    def forward(self, x):
        h = self.emb(x)
        q, k, v = self.qkv(h).reshape(x.shape[0], 12, 3, 4, 8).unbind(2)
        a = torch.einsum("bqhd,bkhd->bhqk", q, k).softmax(-1)
        o = torch.einsum("bhqk,bkhd->bqhd", a, v)
        s = torch.einsum("...qhd,...qhd->...qh", o, q)
        t = torch.einsum("bqhd,chd->bqc", o, self.w)
        u = torch.einsum("bqc,bqc->b", t, h).unsqueeze(1)
        return self.head(s.mean(1)) + u * 0.01 + torch.einsum("bqh->bh", s)[:, :1]


class VarNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(20, 32)
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        h = self.l(x)
        h = (h - h.mean(-1, keepdim=True)) / torch.sqrt(h.var(-1, keepdim=True) + 1e-5)
        h = h / (h.std(0, keepdim=True, unbiased=False) + 1) + h.var() + h.std(-1, keepdim=True)
        return self.head(h)


class Cum(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(20, 16)
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        h = torch.tanh(self.l(x))
        c = torch.cumsum(h, dim=1) / 4 + torch.cumsum(h.flip(0), 0).flip(0) * 0.1
        l2 = h.norm(dim=1, keepdim=True)
        return self.head(c / (l2 + 1)) + torch.logsumexp(h, 1, keepdim=True)


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 32)
        self.qkv = nn.Linear(32, 96, bias=False)
        self.o = nn.Linear(32, 32, bias=False)
        self.w1 = nn.Linear(32, 64, bias=False)
        self.w3 = nn.Linear(32, 64, bias=False)
        self.w2 = nn.Linear(64, 32, bias=False)
        self.g = nn.Parameter(torch.ones(32))
        self.head = nn.Linear(32, 50, bias=False)
        t = torch.arange(12).float()[:, None] * (1.0 / 10000 ** (torch.arange(0, 8, 2).float() / 8))[None]
        self.register_buffer("cos", torch.cos(t))
        self.register_buffer("sin", torch.sin(t))

    def rms(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.g

    def rope(self, x):
        x1, x2 = x[..., :4], x[..., 4:]
        return torch.cat([x1 * self.cos - x2 * self.sin, x1 * self.sin + x2 * self.cos], -1)

    def forward(self, x):
        b, t = x.shape
        h = self.emb(x)
        q, k, v = self.qkv(self.rms(h)).split(32, -1)
        q = self.rope(q.view(b, t, 4, 8).transpose(1, 2))
        k = self.rope(k.view(b, t, 4, 8).transpose(1, 2))
        v = v.view(b, t, 4, 8).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / 8 ** 0.5
        att = att.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf")).softmax(-1)
        h = h + self.o((att @ v).transpose(1, 2).reshape(b, t, 32))
        n = self.rms(h)
        h = h + self.w2(F.silu(self.w1(n)) * self.w3(n))
        return self.head(self.rms(h)).reshape(b * t, 50)


class Picks(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(20, 5)

    def forward(self, x):
        z = self.l(x)
        n = F.normalize(z, dim=1)
        mx, idx = z.max(dim=1, keepdim=True)
        g = torch.gather(z, 1, idx)
        oh = F.one_hot(idx.squeeze(1), 5).float()
        return n + g * oh + z.clamp(-0.5, 0.5) + torch.clamp_min(z, 0.1) * 0.1 - mx * 0.1



class Assign(nn.Module):
    """Slice and index assignment in a forward (ScatterND into computed
    tensors): a column set from a parameter, a block copied, columns picked
    by an index tensor written."""

    def __init__(self):
        super().__init__()
        self.l = nn.Linear(20, 16)
        self.scale = nn.Parameter(torch.tensor([0.5, -0.25]))
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        h = torch.tanh(self.l(x))
        y = h.clone()
        y[:, 0] = self.scale[0] * h[:, 1]
        y[:, 4:8] = h[:, 8:12] * self.scale[1]
        y[:, torch.tensor([2, 12, 9])] = h[:, 13:16] + 1
        return self.head(y)


class Scatters(nn.Module):
    """torch.scatter and scatter_add (ScatterElements): a one-hot at the
    argmax, the picked logit written into zeros, the argmin's column cleared
    in the computed logits, and columns summed into buckets (repeated
    indices)."""

    def __init__(self):
        super().__init__()
        self.l = nn.Linear(20, 6)
        self.head = nn.Linear(6, 5)
        self.buckets = nn.Linear(3, 5)

    def forward(self, x):
        z = self.l(x)
        idx = z.argmax(dim=1, keepdim=True)
        hot = torch.zeros_like(z).scatter(1, idx, 1.0)
        picked = torch.zeros_like(z).scatter(1, idx, z.gather(1, idx))
        cleared = z.scatter(1, z.argmin(dim=1, keepdim=True), 0.0)
        cols = torch.tensor([[0, 1, 2, 0, 1, 2]]).expand(z.shape[0], 6)
        sums = torch.zeros(z.shape[0], 3).scatter_add(1, cols, z)
        return self.head(z * hot + picked + cleared) + self.buckets(sums)


class Trig(nn.Module):
    """The trigonometric functions and inverses that PyTorch 1.13 exports
    (not the hyperbolic ones), inside their domains."""

    def __init__(self):
        super().__init__()
        self.l = nn.Linear(20, 8)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        t = torch.tanh(self.l(x)) * 0.9
        h = torch.asin(t) * torch.acos(t) + torch.atan(t) + torch.tan(t)
        return self.head(h)


class TopKRouter(nn.Module):
    """A mixture-of-experts router (torch.topk over the experts' scores,
    softmax over the two picked, the experts' outputs gathered at them) and
    torch.sort of the features."""

    def __init__(self):
        super().__init__()
        self.router = nn.Linear(20, 6)
        self.experts = nn.Linear(20, 6 * 5)
        self.head = nn.Linear(20, 5)

    def forward(self, x):
        scores, picked = torch.topk(self.router(x), 2, dim=1)
        weights = torch.softmax(scores, dim=1)
        out = self.experts(x).view(-1, 6, 5)
        chosen = torch.gather(out, 1, picked.unsqueeze(2).expand(-1, 2, 5))
        ranked, _ = torch.sort(x, dim=1, descending=True)
        return (weights.unsqueeze(2) * chosen).sum(1) + self.head(ranked)


def seq_x(n):
    return np.random.default_rng(1).integers(0, 50, (n, 12)).astype(np.int64)


def cls_y(n):
    return np.random.default_rng(2).integers(0, 5, (n,)).astype(np.int64)


def tokens_y(n):
    return np.random.default_rng(4).integers(0, 50, (n, 12)).astype(np.int64)


def normal(*shape, seed=3):
    return lambda n: np.random.default_rng(seed).standard_normal((n,) + shape).astype(np.float32)


def flat_ce(o, y):
    return F.cross_entropy(o, y.reshape(-1))


def mse(o, t):
    return ((o - t) ** 2).mean()


def smooth_l1(o, t):
    d = (o - t).abs()
    return torch.where(d < 1, 0.5 * d ** 2, d - 0.5).mean()


def bce(p, t):
    return -(t * torch.log(p) + (1 - t) * torch.log(1 - p)).mean()


def rnn_relu():
    m = LSTMCls("rnn", bi=True, layers=2)
    m.rnn = nn.RNN(32, 48, num_layers=2, batch_first=True, bidirectional=True,
                   nonlinearity="relu")
    return m


def resblocks():
    return nn.Sequential(Block(3, 16, 2), Block(16, 32, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(32, 5))


# name -> (module, inputs, targets, loss, split-dependent, shardc flags)
MODELS = {
    "lstm": (lambda: LSTMCls("lstm"), seq_x, cls_y, F.cross_entropy, False, []),
    "gru_bidirectional": (lambda: LSTMCls("gru", bi=True), seq_x, cls_y, F.cross_entropy, False, []),
    "rnn": (lambda: LSTMCls("rnn", layers=1), seq_x, cls_y, F.cross_entropy, False, []),
    "rnn_relu_bidirectional": (rnn_relu, seq_x, cls_y, F.cross_entropy, False, []),
    "multihead_attention": (MHA, seq_x, cls_y, F.cross_entropy, False, []),
    "multihead_attention_padding_kdim": (MHAPad, seq_x, cls_y, F.cross_entropy, False, []),
    "transformer_decoder_layer": (Dec, seq_x, tokens_y, flat_ce, False, []),
    "transformer_encoder_prenorm": (Enc, seq_x, cls_y, F.cross_entropy, False, []),
    "transformer": (Full, seq_x, cls_y, F.cross_entropy, False, []),
    "einsum_attention": (EinAttn, seq_x, cls_y, F.cross_entropy, False, []),
    "llama_block": (Llama, seq_x, tokens_y, flat_ce, False, ["--freeze", "(cos|sin)$"]),
    "resnet_blocks": (resblocks, normal(3, 16, 16), cls_y, F.cross_entropy, True, []),
    "groupnorm_silu_mish": (lambda: nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.SiLU(),
        nn.Conv2d(16, 16, 3, stride=2, padding=1), nn.Mish(), nn.AdaptiveAvgPool2d((2, 2)),
        nn.Flatten(), nn.Linear(64, 5)), normal(3, 12, 12), cls_y, F.cross_entropy, False, []),
    "mobile_ops": (Dw, normal(3, 16, 16), cls_y, F.cross_entropy, True, []),
    "conv1d_batchnorm": (lambda: nn.Sequential(
        nn.Conv1d(4, 16, 5, padding=2), nn.BatchNorm1d(16), nn.Hardswish(), nn.MaxPool1d(2),
        nn.Conv1d(16, 8, 3), nn.ELU(), nn.Flatten(), nn.Linear(8 * 14, 5)),
        normal(4, 32), cls_y, F.cross_entropy, True, []),
    "conv3d": (Vol, normal(2, 8, 8, 8, seed=9), cls_y, F.cross_entropy, True, []),
    "deconv_instancenorm_mse": (lambda: nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.InstanceNorm2d(8, affine=True),
        nn.LeakyReLU(0.2), nn.ConvTranspose2d(8, 3, 4, stride=2, padding=1), nn.Tanh()),
        normal(3, 8, 8), normal(3, 8, 8, seed=5), mse, False, []),
    "mlp_activations_nll": (lambda: nn.Sequential(
        nn.Linear(20, 256), nn.Softplus(), nn.Linear(256, 256), nn.GELU(approximate="tanh"),
        nn.LayerNorm(256), nn.Linear(256, 128), nn.PReLU(), nn.Linear(128, 5), nn.LogSoftmax(-1)),
        normal(20), cls_y, F.nll_loss, False, []),
    "large_linear_smooth_l1": (lambda: nn.Sequential(
        nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 384), nn.Sigmoid(), nn.Linear(384, 256)),
        normal(32, 256), normal(32, 256, seed=8), smooth_l1, False, []),
    "misc_functions": (Misc, normal(20), cls_y, F.cross_entropy, False, []),
    "bce_with_logits": (lambda: nn.Linear(20, 5), normal(20),
                        lambda n: (np.random.default_rng(10).random((n, 5)) > 0.5).astype(np.float32),
                        nn.BCEWithLogitsLoss(pos_weight=torch.tensor([1., 2., 1., 1., .5])),
                        False, ["--freeze", "pos_weight$"]),
    "bce_sigmoid": (lambda: nn.Sequential(nn.Linear(20, 5), nn.Sigmoid()), normal(20),
                    lambda n: (np.random.default_rng(10).random((n, 5)) > 0.5).astype(np.float32),
                    bce, False, []),
    "kl_divergence": (lambda: nn.Sequential(nn.Linear(20, 5), nn.LogSoftmax(-1)), normal(20),
                      lambda n: np.random.default_rng(11).dirichlet(np.ones(5), n).astype(np.float32),
                      nn.KLDivLoss(reduction="batchmean"), False, []),
    "nll_ignore_index_sum": (lambda: nn.Sequential(nn.Linear(20, 5), nn.LogSoftmax(-1)), normal(20),
                             cls_y, nn.NLLLoss(ignore_index=2, reduction="sum"), True, []),
    "var_std_norm": (VarNorm, normal(20), cls_y, F.cross_entropy, True, []),
    "cumsum_logsumexp": (Cum, normal(20), cls_y, F.cross_entropy, True, []),
    "gather_one_hot_normalize": (Picks, normal(20), cls_y, F.cross_entropy, False, []),
    "slice_index_assignment": (Assign, normal(20), cls_y, F.cross_entropy, False, []),
    "scatter_scatter_add": (Scatters, normal(20), cls_y, F.cross_entropy, False, []),
    "trig_inverse": (Trig, normal(20), cls_y, F.cross_entropy, False, []),
    "topk_router_sort": (TopKRouter, normal(20), cls_y, F.cross_entropy, False, []),
}


# Models exported at another opset than 14: PyTorch 1.13 exports scatter_add
# before opset 16 as a ScatterElements into zeros plus an Add, which keeps only
# the last of repeated indices (ONNX's rule); from 16 on it is ScatterElements
# with reduction "add".
OPSETS = {"scatter_scatter_add": 16}


class WithLoss(nn.Module):
    def __init__(self, model, loss):
        super().__init__()
        self.model, self.loss = model, loss

    def forward(self, x, y):
        out = self.model(x)
        return out, self.loss(out, y)


def torch_losses(make, loss, x, y, ranks):
    torch.manual_seed(0)
    model = make()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    out = []
    for s in range(STEPS):
        lo, hi = s * ranks * BATCH, (s + 1) * ranks * BATCH
        opt.zero_grad()
        value = loss(model(torch.from_numpy(x[lo:hi])), torch.from_numpy(y[lo:hi]))
        value.backward()
        opt.step()
        out.append(value.item())
    return out


def shard_losses(args, out, ranks, stage, flags):
    return harness.shard_losses(args, os.path.join(out, "model.onnx"), os.path.join(out, "data"),
                                out, ranks, stage, STEPS, LR, flags)


def check(args, name, out):
    make, inputs, targets, loss, split_dependent, flags = MODELS[name]
    n = BATCH * 2 * STEPS
    x, y = inputs(n), targets(n)
    os.makedirs(os.path.join(out, "data"))
    np.save(os.path.join(out, "data", "x.npy"), x)
    np.save(os.path.join(out, "data", "y.npy"), y)
    torch.manual_seed(0)
    model = make()
    model.train()
    torch.onnx.export(WithLoss(model, loss), (torch.from_numpy(x[:BATCH]), torch.from_numpy(y[:BATCH])),
                      os.path.join(out, "model.onnx"), input_names=["x", "y"],
                      output_names=["out", "loss"], opset_version=OPSETS.get(name, 14),
                      do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING)
    rel = lambda a, b: max(abs(p - q) / max(abs(q), 1e-12) for p, q in zip(a, b))
    one = rel(shard_losses(args, out, 1, 0, flags), torch_losses(make, loss, x, y, 1))
    s0 = shard_losses(args, out, 2, 0, flags)
    s3 = shard_losses(args, out, 2, 3, flags)
    two = None if split_dependent else rel(s0, torch_losses(make, loss, x, y, 2))
    ok = one <= LOSS_RTOL and (two is None or two <= LOSS_RTOL) and s0 == s3
    print(f"{name}: {'ok' if ok else 'MISMATCH'}; 1 rank {one:.1e}; 2 ranks "
          f"{'(split-dependent loss)' if two is None else f'{two:.1e}'}; stage 3 "
          f"{'==' if s0 == s3 else '!='} stage 0", flush=True)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    harness.add_tool_args(ap)
    args = ap.parse_args()
    return harness.check_models(args.models, lambda name, out: check(args, name, out),
                                "shard-modules")


if __name__ == "__main__":
    sys.exit(main())
