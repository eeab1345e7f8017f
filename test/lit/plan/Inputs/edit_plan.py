#!/usr/bin/env python3
"""Edits a compiled plan on purpose, then reseals its manifest.

  edit_plan.py PLAN --proto plan/plan.proto [--set-lr X]
      [--negate-first-param] [--source-model PATH] [--unit-offset OFFSET]
      [--set-version N] [--no-reseal]

The manifest (docs/plan-format.md) is rewritten for the edited files, so
the plan is self-consistent and only shardrun's own checks can stop it.
"""
import argparse
import hashlib
import importlib
import os
import struct
import subprocess
import sys
import tempfile


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def reseal(plan_dir):
    path = os.path.join(plan_dir, "manifest")
    with open(path) as f:
        lines = f.read().split("\n")
    out = [lines[0]]
    for line in lines[1:]:
        parts = line.split(" ")
        if len(parts) != 3:
            continue
        with open(os.path.join(plan_dir, parts[0]), "rb") as f:
            data = f.read()
        out.append("%s %d %s" % (parts[0], len(data),
                                 hashlib.sha256(data).hexdigest()))
    text = "\n".join(out) + "\n"
    text += "sha256 " + hashlib.sha256(text.encode()).hexdigest() + "\n"
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("--proto", required=True)
    ap.add_argument("--set-lr", type=float)
    ap.add_argument("--negate-first-param", action="store_true")
    ap.add_argument("--source-model")
    ap.add_argument("--unit-offset", type=int)
    ap.add_argument("--set-version", type=int)
    ap.add_argument("--no-reseal", action="store_true")
    args = ap.parse_args()

    gen = tempfile.mkdtemp(prefix="shard-plan-proto-")
    subprocess.check_call(["protoc", "-I", os.path.dirname(args.proto),
                           "--python_out", gen, args.proto])
    sys.path.insert(0, gen)
    pb = importlib.import_module("plan_pb2")

    plan_pb = os.path.join(args.plan, "plan.pb")
    plan = pb.Plan()
    with open(plan_pb, "rb") as f:
        plan.ParseFromString(f.read())
    if args.set_lr is not None:
        for op in plan.ops:
            for a in op.attributes:
                if op.type.endswith("Update") and a.name == "lr":
                    a.f = args.set_lr
    if args.negate_first_param:
        b = next(b for b in plan.buffers if b.kind == pb.PARAMETER)
        path = os.path.join(args.plan, b.data_file)
        with open(path, "rb") as f:
            data = bytearray(f.read())
        (v,) = struct.unpack_from("<f", data, b.data_offset)
        struct.pack_into("<f", data, b.data_offset, -v if v else 1.0)
        with open(path, "wb") as f:
            f.write(data)
        b.checksum = fnv1a64(
            data[b.data_offset:b.data_offset + b.data_bytes])
    if args.source_model is not None:
        plan.training.source_model = args.source_model
    if args.unit_offset is not None:
        plan.units[0].params[0].offset = args.unit_offset
    if args.set_version is not None:
        plan.version = args.set_version
    with open(plan_pb, "wb") as f:
        f.write(plan.SerializeToString())
    if not args.no_reseal:
        reseal(args.plan)


if __name__ == "__main__":
    main()
