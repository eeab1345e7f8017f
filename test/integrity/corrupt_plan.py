#!/usr/bin/env python3
"""Corrupts a compiled training plan in many ways and runs shardrun on each.

Compiles an example into a ZeRO-3 plan for 2 ranks, trains the clean plan for
a few steps (losses and the --export model are the reference), then for each
mutation copies the plan, damages it and runs `shardrun PLAN --data ...
--export ...` under a timeout. Each run is one of:

  clean-error  exit code 1 with a "shardrun: error:" line
  correct      exit code 0, the same losses and the same exported model
  wrong        exit code 0, but different losses or exported model
  different    the same for a hostile mutation: the resealed plan passed
               every check and computes something else (another op type of
               the same signature, another learning rate in range, ...);
               listed for review, not a failure
  crash        killed by a signal, or a failure without a clear error
  hang         still running at the timeout (the whole process tree is
               killed)

Mutations (reproducible: a seeded generator picks every byte and field):
  bytes     flip a byte, truncate or extend a file of the plan (plan.pb,
            params.bin, constants.bin, model.onnx, manifest): corruption,
            the manifest is left as it was
  hostile   flip a byte of plan.pb, or change one decoded field of plan.pb
            (an index, offset, size, shape, attribute, unit, op order, ...)
            and reseal the manifest: a self-consistent plan that only the
            reader's own checks can stop
  special   plan.pb as a FIFO or a link to /dev/zero, files that are links
            out of the plan directory, a source model path outside it, a
            missing manifest or data file

With --sample N only N mutations (spread over the kinds) run. The exit code
is 1 when any run is wrong, crashed or hung. Each group of mutations has a
generator of its own, seeded from --seed, so two builds get the same
mutations of the same files; plans without a manifest (older builds) are
mutated the same way, without resealing, so their runs compare.

  corrupt_plan.py --shardc build/bin/shardc --shardrun build/bin/shardrun \\
      --example examples/gpt --proto plan/plan.proto --work /tmp/corrupt
"""
import argparse
import collections
import hashlib
import importlib
import json
import os
import random
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

OUTCOMES = ["clean-error", "correct", "wrong", "different", "crash", "hang"]
PLAN_FILES = ["plan.pb", "params.bin", "constants.bin", "model.onnx",
              "manifest"]


# --------------------------------------------------------------------------
# Processes: every run in its own session; on a timeout, the whole tree dies.
# --------------------------------------------------------------------------

def children_map():
    kids = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            kids[int(fields[1])].append(int(entry))
        except (OSError, IndexError, ValueError):
            pass
    return kids


def descendants(pid):
    kids = children_map()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(proc):
    pids = descendants(proc.pid) + [proc.pid]
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


MEM_LIMIT = 4 << 30


def limit_memory():
    # A plan that makes shardrun read without end (plan.pb as /dev/zero)
    # fails its allocation here instead of waking the machine's OOM killer.
    resource.setrlimit(resource.RLIMIT_DATA, (MEM_LIMIT, MEM_LIMIT))


def run(cmd, timeout, cwd=None):
    """(returncode or None on timeout, combined output, seconds)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            cwd=cwd, start_new_session=True,
                            preexec_fn=limit_memory)
    try:
        out, _ = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        out, _ = proc.communicate()
        rc = None
    # Nothing of this run may outlive it (an orphaned rank, say).
    for p in descendants(os.getpid()):
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    return rc, out.decode("utf-8", "replace"), time.monotonic() - start


# --------------------------------------------------------------------------
# The manifest (docs/plan-format.md), for resealing hostile plans.
# --------------------------------------------------------------------------

def reseal(plan_dir):
    path = os.path.join(plan_dir, "manifest")
    if not os.path.isfile(path):
        return
    with open(path, "rb") as f:
        lines = f.read().decode().split("\n")
    out = [lines[0]]
    for line in lines[1:]:
        parts = line.split(" ")
        if len(parts) != 3:
            continue
        name = parts[0]
        p = os.path.join(plan_dir, name)
        if os.path.isfile(p) and not os.path.islink(p):
            with open(p, "rb") as f:
                data = f.read()
            parts = [name, str(len(data)), hashlib.sha256(data).hexdigest()]
        out.append(" ".join(parts))
    text = "\n".join(out) + "\n"
    text += "sha256 " + hashlib.sha256(text.encode()).hexdigest() + "\n"
    with open(path, "w") as f:
        f.write(text)


# --------------------------------------------------------------------------
# Mutations. Each is (kind, description, function(plan_dir, rng, pb)).
# --------------------------------------------------------------------------

def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def byte_mutations(clean_dir, seed):
    muts = []
    for name in PLAN_FILES:
        path = os.path.join(clean_dir, name)
        if not os.path.isfile(path):
            continue
        rng = random.Random("%d:bytes:%s" % (seed, name))
        size = os.path.getsize(path)
        for _ in range(20):
            if size == 0:
                break
            pos = rng.randrange(size)
            bit = 1 << rng.randrange(8)

            def flip(d, name=name, pos=pos, bit=bit):
                p = os.path.join(d, name)
                b = bytearray(read(p))
                b[pos] ^= bit
                write(p, bytes(b))
            muts.append(("bytes", "%s: flip bit %d of byte %d" %
                         (name, bit.bit_length() - 1, pos), flip))
        for _ in range(6):
            n = rng.randrange(size) if size else 0

            def trunc(d, name=name, n=n):
                p = os.path.join(d, name)
                write(p, read(p)[:n])
            muts.append(("bytes", "%s: truncate to %d bytes" % (name, n),
                         trunc))
        for _ in range(4):
            n = rng.choice([1, 7, 64, 4096])
            junk = bytes(rng.randrange(256) for _ in range(n))

            def extend(d, name=name, junk=junk):
                p = os.path.join(d, name)
                write(p, read(p) + junk)
            muts.append(("bytes", "%s: append %d bytes" % (name, n), extend))
    return muts


def field_mutations(pb, plan, rng, count):
    """Changes of one decoded field of plan.pb (resealed afterwards)."""
    muts = []
    nb, no, nu = len(plan.buffers), len(plan.ops), len(plan.units)
    data_bufs = [i for i, b in enumerate(plan.buffers) if b.data_file]
    upd_ops = [j for j, o in enumerate(plan.ops) if o.type.endswith("Update")]
    coll_ops = [j for j, o in enumerate(plan.ops)
                if o.type.endswith("Start") or o.type == "CollectiveWait"]
    attr_ops = [j for j, o in enumerate(plan.ops) if len(o.attributes)]

    def ints():
        return rng.choice([0, 1, -1, 2, 3, 7, 1 << 20, (1 << 31) - 1,
                           -(1 << 31), (1 << 40), -(1 << 62)])

    def delta(v):
        return v + rng.choice([-8, -4, -1, 1, 4, 8, 1024])

    makers = []

    def buffer_field():
        i = rng.choice(data_bufs if data_bufs and rng.random() < 0.5
                       else range(nb))
        field = rng.choice(["shape", "dtype", "kind", "data_offset",
                            "data_bytes", "checksum", "shard_count",
                            "alias_of", "alias_offset", "is_alias",
                            "data_file"])

        def f(p):
            b = p.buffers[i]
            if field == "shape":
                if len(b.shape):
                    k = rng.randrange(len(b.shape))
                    b.shape[k] = rng.choice([0, -1, b.shape[k] + 1,
                                             b.shape[k] * 2, 1 << 40])
                else:
                    b.shape.append(2)
            elif field == "dtype":
                b.dtype = rng.choice([0, 1, 2, 5, 6, 7, 9, 10, 11, 99])
            elif field == "kind":
                b.kind = rng.choice([0, 1, 2, 3, 4, 9])
            elif field in ("data_offset", "data_bytes", "alias_offset"):
                v = getattr(b, field)
                setattr(b, field, max(0, rng.choice(
                    [delta(v), v * 2, 0, (1 << 63) - 1, 1 << 32])))
            elif field == "checksum":
                b.checksum ^= 1 << rng.randrange(64)
            elif field == "shard_count":
                b.shard_count = rng.choice([0, 1, 3, 4, -1])
            elif field == "alias_of":
                b.alias_of = rng.choice([-1, 0, nb, rng.randrange(nb)])
            elif field == "is_alias":
                b.is_alias = not b.is_alias
            elif field == "data_file":
                b.data_file = rng.choice(["../params.bin", "/dev/zero",
                                          "constants.bin", "params.bin",
                                          "manifest", "plan.pb", ""])
        return "buffers[%d].%s" % (i, field), f
    makers.append(buffer_field)

    def op_field():
        j = rng.randrange(no)
        field = rng.choice(["input", "output", "type", "drop", "swap",
                            "dup_input", "attr"])

        def f(p):
            o = p.ops[j]
            if field == "input" and len(o.inputs):
                k = rng.randrange(len(o.inputs))
                o.inputs[k] = rng.choice([-1, -2, nb, nb + 100,
                                          rng.randrange(nb)])
            elif field == "output" and len(o.outputs):
                k = rng.randrange(len(o.outputs))
                o.outputs[k] = rng.choice([-1, -2, nb, rng.randrange(nb)])
            elif field == "type":
                o.type = rng.choice(["Relu", "Add", "Identity", "Frob",
                                     o.type + "x", ""])
            elif field == "drop":
                del p.ops[j]
            elif field == "swap" and no > 1:
                k = rng.randrange(no)
                a, b = plan_op_copy(p.ops[j]), plan_op_copy(p.ops[k])
                p.ops[j].CopyFrom(b)
                p.ops[k].CopyFrom(a)
            elif field == "dup_input":
                o.inputs.append(o.inputs[0] if len(o.inputs) else 0)
            elif field == "attr" and len(o.attributes):
                mutate_attr(o.attributes[rng.randrange(len(o.attributes))])
        return "ops[%d].%s" % (j, field), f
    makers.append(op_field)

    def mutate_attr(a):
        what = rng.choice(["rename", "value", "kind", "drop"])
        if what == "rename":
            a.name = a.name + "x" if rng.random() < 0.5 else a.name[:-1]
        elif what == "value":
            which = a.WhichOneof("value")
            if which == "f":
                a.f = rng.choice([a.f * 10, -a.f, 0.0, 1.0, 2.0,
                                  float("nan"), float("inf"), a.f + 1e-3])
            elif which == "i":
                a.i = rng.choice([a.i + 1, a.i - 1, -1, 0, 1 << 40])
            elif which == "s":
                a.s = a.s + "x"
            elif which == "ints" and len(a.ints.values):
                k = rng.randrange(len(a.ints.values))
                a.ints.values[k] = ints()
            elif which == "floats" and len(a.floats.values):
                a.floats.values[0] *= 2
        elif what == "kind":
            which = a.WhichOneof("value")
            if which == "f":
                a.i = int(a.f)
            else:
                a.f = 0.5
        elif what == "drop":
            a.ClearField(a.WhichOneof("value") or "f")

    def plan_op_copy(o):
        c = type(o)()
        c.CopyFrom(o)
        return c

    def hyper():
        if not upd_ops:
            return op_field()
        j = rng.choice(upd_ops)

        def f(p):
            mutate_attr(p.ops[j].attributes[
                rng.randrange(len(p.ops[j].attributes))])
        return "ops[%d] (%s) hyper-parameter" % (j, plan.ops[j].type), f
    makers.append(hyper)

    def collective():
        if not coll_ops:
            return op_field()
        j = rng.choice(coll_ops)
        what = rng.choice(["drop", "world", "type", "input"])

        def f(p):
            o = p.ops[j]
            if what == "drop":
                del p.ops[j]
            elif what == "world" and len(o.attributes):
                o.attributes[0].i = rng.choice([1, 3, 4])
            elif what == "type":
                o.type = rng.choice(["AllReduceStart", "AllGatherStart",
                                     "ReduceScatterStart", "CollectiveWait"])
            elif what == "input" and len(o.inputs):
                o.inputs[0] = rng.randrange(nb)
        return "ops[%d] (%s) collective %s" % (j, plan.ops[j].type, what), f
    makers.append(collective)

    def unit():
        if not nu:
            return buffer_field()
        u = rng.randrange(nu)
        what = rng.choice(["offset", "shape", "padded", "buffer", "name",
                           "drop_param"])

        def f(p):
            un = p.units[u]
            k = rng.randrange(len(un.params)) if len(un.params) else None
            if what == "offset" and k is not None:
                un.params[k].offset = rng.choice(
                    [un.padded_elements, un.padded_elements * 100, -1,
                     un.params[k].offset + 1, 1 << 40])
            elif what == "shape" and k is not None and len(un.params[k].shape):
                un.params[k].shape[0] = rng.choice(
                    [un.params[k].shape[0] + 1, un.params[k].shape[0] * 4, -1])
            elif what == "padded":
                un.padded_elements = rng.choice(
                    [un.padded_elements * 2, un.padded_elements - 1, 0])
            elif what == "buffer":
                un.buffer = rng.choice([-1, nb, rng.randrange(nb)])
            elif what == "name" and k is not None:
                un.params[k].name = un.params[k].name + "x"
            elif what == "drop_param" and k is not None:
                del un.params[k]
        return "units[%d].%s" % (u, what), f
    makers.append(unit)

    def top():
        what = rng.choice(["world_size", "zero_stage", "fingerprint",
                           "optimizer", "micro_batch", "loss_output",
                           "source_model", "inputs", "outputs",
                           "bound_inputs"])

        def f(p):
            t = p.training
            if what == "world_size":
                p.world_size = rng.choice([0, 1, 3, 4, -1])
            elif what == "zero_stage":
                p.zero_stage = rng.choice([0, 1, 2, 5, -1])
            elif what == "fingerprint":
                p.fingerprint ^= 1 << rng.randrange(64)
            elif what == "optimizer":
                t.optimizer = rng.choice(["sgd", "adam", "adamx", ""])
            elif what == "micro_batch":
                t.micro_batch = rng.choice([0, -1, t.micro_batch + 1,
                                            t.micro_batch * 2, 1 << 40])
            elif what == "loss_output":
                t.loss_output = rng.choice([-1, 1, 2, 5])
            elif what == "source_model":
                t.source_model = rng.choice(
                    ["../model.onnx", "/etc/passwd", "params.bin",
                     "plan.pb", "missing.onnx", ""])
            elif what == "inputs" and len(p.inputs):
                p.inputs[rng.randrange(len(p.inputs))] = rng.choice(
                    [-1, nb, rng.randrange(nb)])
            elif what == "outputs" and len(p.outputs):
                p.outputs[rng.randrange(len(p.outputs))] = rng.choice(
                    [-1, nb, rng.randrange(nb)])
            elif what == "bound_inputs":
                t.bound_inputs.append("idx")
        return what, f
    makers.append(top)

    weights = [3, 3, 2, 2, 2, 2]
    for _ in range(count):
        maker = rng.choices(makers, weights)[0]
        desc, f = maker()

        def mut(d, f=f):
            p = pb.Plan()
            path = os.path.join(d, "plan.pb")
            p.ParseFromString(read(path))
            f(p)
            write(path, p.SerializeToString())
            reseal(d)
        muts.append(("hostile", "plan.pb field " + desc, mut))
    return muts


def hostile_byte_flips(clean_dir, rng, count):
    size = os.path.getsize(os.path.join(clean_dir, "plan.pb"))
    muts = []
    for _ in range(count):
        pos, bit = rng.randrange(size), 1 << rng.randrange(8)

        def f(d, pos=pos, bit=bit):
            p = os.path.join(d, "plan.pb")
            b = bytearray(read(p))
            b[pos] ^= bit
            write(p, bytes(b))
            reseal(d)
        muts.append(("hostile", "plan.pb: flip bit %d of byte %d, resealed"
                     % (bit.bit_length() - 1, pos), f))
    return muts


def special_mutations(pb, outside):
    def replace_with_fifo(name):
        def f(d):
            os.remove(os.path.join(d, name))
            os.mkfifo(os.path.join(d, name))
        return f

    def replace_with_link(name, target):
        def f(d):
            os.remove(os.path.join(d, name))
            os.symlink(target, os.path.join(d, name))
        return f

    def link_out(name):
        def f(d):
            copy = os.path.join(outside, name)
            shutil.copyfile(os.path.join(d, name), copy)
            os.remove(os.path.join(d, name))
            os.symlink(copy, os.path.join(d, name))
        return f

    def source_model(path_of):
        def f(d):
            copy = os.path.join(outside, "model.onnx")
            shutil.copyfile(os.path.join(d, "model.onnx"), copy)
            p = pb.Plan()
            p.ParseFromString(read(os.path.join(d, "plan.pb")))
            p.training.source_model = path_of(d, copy)
            write(os.path.join(d, "plan.pb"), p.SerializeToString())
            reseal(d)
        return f

    def remove(name):
        def f(d):
            os.remove(os.path.join(d, name))
        return f

    def directory(name):
        def f(d):
            os.remove(os.path.join(d, name))
            os.mkdir(os.path.join(d, name))
        return f

    return [
        ("special", "plan.pb is a FIFO", replace_with_fifo("plan.pb")),
        ("special", "params.bin is a FIFO", replace_with_fifo("params.bin")),
        ("special", "plan.pb links to /dev/zero",
         replace_with_link("plan.pb", "/dev/zero")),
        ("special", "params.bin links to /dev/zero",
         replace_with_link("params.bin", "/dev/zero")),
        ("special", "plan.pb links to a copy outside the plan",
         link_out("plan.pb")),
        ("special", "model.onnx links to a copy outside the plan",
         link_out("model.onnx")),
        ("special", "source model '../<outside>/model.onnx'",
         source_model(lambda d, c: os.path.relpath(c, d))),
        ("special", "source model is an absolute path outside the plan",
         source_model(lambda d, c: c)),
        ("special", "no manifest", remove("manifest")),
        ("special", "no params.bin", remove("params.bin")),
        ("special", "constants.bin is a directory", directory("constants.bin")),
    ]


# --------------------------------------------------------------------------

def classify(rc, out, ref, log_path, export_path):
    if rc is None:
        return "hang", "timed out"
    if rc < 0 or rc >= 128 or "signal" in out or "core dumped" in out:
        return "crash", "exit code %s" % rc
    if rc != 0:
        if "shardrun: error:" in out or "shardrun: error" in out:
            return "clean-error", ""
        return "crash", "exit code %d without a clear error" % rc
    losses = read_losses(log_path)
    if losses != ref["losses"]:
        return "wrong", "losses %s, clean %s" % (losses, ref["losses"])
    digest = file_digest(export_path)
    if digest != ref["export"]:
        return "wrong", "exported model differs"
    return "correct", ""


def read_losses(path):
    if not os.path.isfile(path):
        return None
    out = []
    with open(path) as f:
        for line in f:
            try:
                out.append(json.loads(line)["loss"])
            except (ValueError, KeyError):
                return None
    return out


def file_digest(path):
    if not os.path.isfile(path):
        return None
    return hashlib.sha256(read(path)).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--shardrun", required=True)
    ap.add_argument("--example", required=True,
                    help="example directory (NAME.onnx and data/)")
    ap.add_argument("--proto", required=True, help="plan/plan.proto")
    ap.add_argument("--protoc", default="protoc")
    ap.add_argument("--work", help="work directory (default: a temporary)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--zero-stage", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fields", type=int, default=150,
                    help="decoded-field mutations of plan.pb")
    ap.add_argument("--flips", type=int, default=40,
                    help="resealed byte flips of plan.pb")
    ap.add_argument("--sample", type=int, default=0,
                    help="run only this many mutations (0: all)")
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--mem-limit-gib", type=float, default=4,
                    help="data size limit of every process (RLIMIT_DATA)")
    ap.add_argument("--json", help="write every result to this file")
    ap.add_argument("--dump", metavar="DIR",
                    help="write the plan.pb of every hostile mutation to DIR "
                         "(inputs for the plan fuzzer's corpus) and run "
                         "nothing")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    global MEM_LIMIT
    MEM_LIMIT = int(args.mem_limit_gib * (1 << 30))

    work = args.work or tempfile.mkdtemp(prefix="shard-corrupt-")
    keep = bool(args.work)
    os.makedirs(work, exist_ok=True)
    try:
        return harness(args, work)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def dump_hostile(args, pb, clean, work):
    """Writes the plan.pb of each hostile mutation to args.dump."""
    plan = pb.Plan()
    plan.ParseFromString(read(os.path.join(clean, "plan.pb")))
    muts = (hostile_byte_flips(clean, random.Random("%d:flips" % args.seed),
                               args.flips) +
            field_mutations(pb, plan, random.Random("%d:fields" % args.seed),
                            args.fields))
    os.makedirs(args.dump, exist_ok=True)
    written = 0
    for n, (kind, desc, mutate) in enumerate(muts):
        d = os.path.join(work, "mutant.plan")
        if os.path.lexists(d):
            shutil.rmtree(d)
        shutil.copytree(clean, d)
        try:
            mutate(d)
        except Exception:  # a mutation that does not apply to the plan
            continue
        data = read(os.path.join(d, "plan.pb"))
        name = "hostile-%s" % hashlib.sha1(data).hexdigest()[:16]
        write(os.path.join(args.dump, name), data)
        written += 1
    print("wrote %d hostile plan.pb files to %s" % (written, args.dump))
    return 0


def harness(args, work):
    # The plan schema as a Python module.
    gen = os.path.join(work, "gen")
    os.makedirs(gen, exist_ok=True)
    subprocess.check_call([args.protoc, "-I", os.path.dirname(args.proto),
                           "--python_out", gen, args.proto])
    sys.path.insert(0, gen)
    pb = importlib.import_module("plan_pb2")

    name = os.path.basename(os.path.normpath(args.example))
    clean = os.path.join(work, "clean.plan")
    shutil.rmtree(clean, ignore_errors=True)
    subprocess.check_call(
        [args.shardc, os.path.join(args.example, name + ".onnx"), "-o", clean,
         "--optimizer", "adamw", "--lr", "3e-3", "--world-size",
         str(args.ranks), "--zero-stage", str(args.zero_stage)],
        stdout=subprocess.DEVNULL)
    data = os.path.join(args.example, "data")

    def shardrun(plan_dir, tag):
        log = os.path.join(work, tag + ".jsonl")
        export = os.path.join(work, tag + ".onnx")
        for p in (log, export):
            if os.path.exists(p):
                os.remove(p)
        rc, out, secs = run([args.shardrun, plan_dir, "--data", data,
                             "--steps", str(args.steps), "--log", log,
                             "--export", export, "--progress", "off"],
                            args.timeout)
        return rc, out, secs, log, export

    if args.dump:
        return dump_hostile(args, pb, clean, work)

    rc, out, secs, log, export = shardrun(clean, "clean")
    if rc != 0:
        print("the clean plan does not run (exit code %s):\n%s" % (rc, out))
        return 2
    ref = {"losses": read_losses(log), "export": file_digest(export)}
    rc2, _, _, log2, export2 = shardrun(clean, "clean2")
    if rc2 != 0 or read_losses(log2) != ref["losses"] or \
            file_digest(export2) != ref["export"]:
        print("two runs of the clean plan differ: nothing to compare with")
        return 2
    print("clean plan: %d steps in %.1f s, losses %s" %
          (args.steps, secs, ref["losses"]))

    plan = pb.Plan()
    plan.ParseFromString(read(os.path.join(clean, "plan.pb")))
    outside = os.path.join(work, "outside")
    os.makedirs(outside, exist_ok=True)
    muts = (byte_mutations(clean, args.seed) +
            hostile_byte_flips(clean, random.Random("%d:flips" % args.seed),
                               args.flips) +
            field_mutations(pb, plan, random.Random("%d:fields" % args.seed),
                            args.fields) +
            special_mutations(pb, outside))
    if args.sample and args.sample < len(muts):
        # Every special case and kind is represented; the rest at random.
        pick = random.Random(args.seed + 1)
        by_kind = collections.defaultdict(list)
        for i, m in enumerate(muts):
            by_kind[m[0]].append(i)
        chosen = set()
        kinds = sorted(by_kind)
        while len(chosen) < args.sample:
            for k in kinds:
                left = [i for i in by_kind[k] if i not in chosen]
                if left and len(chosen) < args.sample:
                    chosen.add(pick.choice(left))
        muts = [muts[i] for i in sorted(chosen)]

    counts = collections.Counter()
    per_kind = collections.defaultdict(collections.Counter)
    results = []
    bad = []
    start = time.monotonic()
    for n, (kind, desc, mutate) in enumerate(muts):
        d = os.path.join(work, "mutant.plan")
        if os.path.lexists(d):
            shutil.rmtree(d)
        shutil.copytree(clean, d)
        for f in os.listdir(outside):
            os.remove(os.path.join(outside, f))
        try:
            mutate(d)
        except Exception as e:  # a mutation that does not apply to the plan
            results.append({"kind": kind, "mutation": desc,
                            "result": "skipped", "why": str(e)})
            continue
        rc, out, secs, log, export = shardrun(d, "mutant")
        result, why = classify(rc, out, ref, log, export)
        if result == "wrong" and kind == "hostile":
            result = "different"
        counts[result] += 1
        per_kind[kind][result] += 1
        error = ""
        for line in out.splitlines():
            if "error" in line:
                error = line.strip()
                break
        results.append({"kind": kind, "mutation": desc, "result": result,
                        "why": why, "exit": rc, "seconds": round(secs, 2),
                        "error": error[:400]})
        if result in ("wrong", "crash", "hang"):
            bad.append(results[-1])
            print("%s: %s (%s)\n  %s" % (result.upper(), desc, why,
                                        out.strip()[-600:].replace(
                                            "\n", "\n  ")))
        elif result == "different":
            print("different (review): %s (%s)" % (desc, why))
        elif args.verbose:
            print("%-11s %s: %s" % (result, desc, error[:200]))
        shutil.rmtree(d, ignore_errors=True)
    elapsed = time.monotonic() - start
    print("%d mutations in %.0f s: %s" % (
        sum(counts.values()), elapsed,
        ", ".join("%s %d" % (k, counts[k]) for k in
                  OUTCOMES)))
    for kind in sorted(per_kind):
        c = per_kind[kind]
        print("  %-8s %s" % (kind, ", ".join(
            "%s %d" % (k, c[k]) for k in
            OUTCOMES if c[k])))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"counts": counts, "results": results}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
