#!/usr/bin/python3
"""Checkpoints of training runs (runtime/Checkpoint.h, docs/checkpoints.md),
with real multi-rank jobs. One case per run (--case); each prints what it
checked.

  resume    For each --config N,stage: S steps straight, and K steps, stop,
            resume to S. The logs (every value but timings) and the exported
            models are equal bit for bit. Models: examples/mlp in float16
            with dynamic loss scaling and a cosine LR schedule (loss-scale
            state and schedule position), examples/cnn (BatchNorm running
            statistics, one value per rank), and an MLP with Dropout built
            here (the dropout masks continue).
  reshard   --from N,stage: a checkpoint saved there loads into every world
            size 1, 2, 4 and stage 0-3; exporting it with no further step
            writes the model exported at save time, bit for bit. Two round
            trips (save there with no step, load back, train on) end equal
            to a run that never stopped: the optimizer state was moved
            exactly.
  consolidate
            A run at 1 rank exports its model; its checkpoint exported from
            1, 2 and 4 ranks (stage 3) is the same file.
  corrupt   A truncated, a flipped or a missing rank file, a flipped
            checkpoint.pb, a deleted manifest, a damaged manifest, another
            model's checkpoint, another optimizer's, and a --seed that
            differs: each a clear error naming what, and no step runs.
  keep-last --checkpoint-every 1 --keep-last 2 keeps the newest two; --resume
            DIR takes the newest; a directory step-N without a manifest is
            skipped, and named when given itself.
  large     A 2.16 GB model (over ONNX's 2 GiB limit, so saved with external
            data) at 2 ranks, ZeRO-3: trains, saves and exports with
            external data.

Needs numpy and onnx (Debian's python3-numpy, python3-onnx)."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

TIMINGS = {"step_ms", "samples_per_s", "samples_per_s_mean", "peak_rss_bytes",
           "checkpoint_ms"}


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


class Runner:
    def __init__(self, args, work):
        self.shardc = args.shardc
        self.shardrun = args.shardrun
        self.work = work
        self.env = dict(os.environ)
        if os.geteuid() == 0:
            self.env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
            self.env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
        self.plans = {}

    def run(self, cmd, expect_ok=True):
        r = subprocess.run(cmd, capture_output=True, text=True, env=self.env,
                           timeout=300)
        if expect_ok and r.returncode != 0:
            fail("command failed (%d): %s\n%s%s" %
                 (r.returncode, " ".join(cmd), r.stdout, r.stderr))
        return r

    def plan(self, model, world, stage, flags):
        """The plan of `model` compiled for (world, stage), compiled once."""
        key = (model, world, stage, tuple(flags))
        if key not in self.plans:
            out = os.path.join(self.work, "plan%d" % len(self.plans))
            self.run([self.shardc, model, "-o", out, "--world-size", str(world),
                      "--zero-stage", str(stage)] + flags)
            self.plans[key] = out
        return self.plans[key]

    def train(self, plan, *extra, expect_ok=True):
        return self.run([self.shardrun, plan, "--progress", "off"] +
                        list(extra), expect_ok)


def read_log(path):
    """The log's lines without timings, by step."""
    steps = []
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            steps.append({k: v for k, v in record.items() if k not in TIMINGS})
    return steps


def same_file(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def dropout_model(directory):
    """An MLP with Dropout (ratio 0.25, training mode) and its data set:
    x [256, 16] float, y [256] int64 labels of 4 classes."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(7)
    w1 = (rng.standard_normal((16, 32)) * 0.3).astype(np.float32)
    b1 = np.zeros(32, np.float32)
    w2 = (rng.standard_normal((32, 4)) * 0.3).astype(np.float32)
    b2 = np.zeros(4, np.float32)
    nodes = [
        helper.make_node("Constant", [], ["ratio"], name="ratio",
                         value=numpy_helper.from_array(
                             np.array(0.25, np.float32))),
        helper.make_node("Constant", [], ["training"], name="training",
                         value=numpy_helper.from_array(np.array(True))),
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Dropout", ["r", "ratio", "training"], ["d"],
                         name="drop"),
        helper.make_node("Gemm", ["d", "w2", "b2"], ["logits"], name="fc2"),
        helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"],
                         name="xent"),
    ]
    inits = [numpy_helper.from_array(a, n) for a, n in
             ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))]
    graph = helper.make_graph(
        nodes, "dropout_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16]),
         helper.make_tensor_value_info("y", TensorProto.INT64, [8])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = os.path.join(directory, "dropout_mlp.onnx")
    onnx.save(model, path)
    data = os.path.join(directory, "dropout_data")
    os.makedirs(data, exist_ok=True)
    x = rng.standard_normal((256, 16)).astype(np.float32)
    np.save(os.path.join(data, "x.npy"), x)
    np.save(os.path.join(data, "y.npy"), (x[:, 0] > 0).astype(np.int64) +
            2 * (x[:, 1] > 0).astype(np.int64))
    return path, data


def parse_config(text):
    n, stage = text.split(",")
    return int(n), int(stage)


def case_resume(r, args):
    examples = args.examples
    dropout, dropout_data = dropout_model(r.work)
    models = [
        ("mlp fp16", os.path.join(examples, "mlp", "mlp.onnx"),
         os.path.join(examples, "mlp", "data"),
         ["--optimizer", "adam", "--lr", "3e-3", "--param-dtype", "fp16",
          "--loss-scale", "dynamic", "--init-loss-scale", "16777216",
          "--loss-scale-growth-interval", "2", "--lr-schedule", "cosine",
          "--warmup-steps", "2", "--decay-steps", "8"]),
        ("cnn", os.path.join(examples, "cnn", "cnn.onnx"),
         os.path.join(examples, "cnn", "data"),
         ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"]),
        ("dropout mlp", dropout, dropout_data,
         ["--optimizer", "adamw", "--lr", "1e-2"]),
    ]
    total, stop = 6, 3
    for name, model, data, flags in models:
        for n, stage in map(parse_config, args.config):
            plan = r.plan(model, n, stage, flags)
            tag = "%s at %d rank(s), stage %d" % (name, n, stage)
            base = os.path.join(r.work, "resume-%s-%d-%d" % (name.replace(" ", "_"), n, stage))
            os.makedirs(base)
            straight_log = os.path.join(base, "straight.jsonl")
            straight = os.path.join(base, "straight.onnx")
            r.train(plan, "--data", data, "--steps", str(total), "--seed", "5",
                    "--log", straight_log, "--export", straight)
            log = os.path.join(base, "run.jsonl")
            ck = os.path.join(base, "ck")
            # The first run goes past its last checkpoint (step 2 of every
            # 2nd) and is cut at step 3: the resumed log drops step 3.
            r.train(plan, "--data", data, "--steps", str(stop), "--seed", "5",
                    "--log", log, "--checkpoint-dir", ck,
                    "--checkpoint-every", "2")
            shutil.rmtree(os.path.join(ck, "step-3"))
            resumed = os.path.join(base, "resumed.onnx")
            out = r.train(plan, "--data", data, "--steps", str(total),
                          "--log", log, "--resume", ck, "--export", resumed)
            if "resuming from %s (step 2" % os.path.join(ck, "step-2") not in out.stderr:
                fail("%s: the resumed run does not say where it resumes:\n%s" %
                     (tag, out.stderr))
            a, b = read_log(straight_log), read_log(log)
            if a != b:
                fail("%s: the resumed log differs from the straight one:\n%s\n%s"
                     % (tag, json.dumps(a), json.dumps(b)))
            if not same_file(straight, resumed):
                fail("%s: the resumed run exports another model" % tag)
            print("ok: %s: %d steps straight == %d, stop, resume from step 2 "
                  "to %d (log of %d steps and export bit for bit)" %
                  (tag, total, stop, total, len(a)))


TARGETS = [(m, s) for m in (1, 2, 4) for s in range(4)]
MLP_FLAGS = ["--optimizer", "adam", "--lr", "1e-3", "--weight-decay", "0.01"]


def case_reshard(r, args):
    n, stage = parse_config(args.source)
    model = os.path.join(args.examples, "mlp", "mlp.onnx")
    data = os.path.join(args.examples, "mlp", "data")
    source = r.plan(model, n, stage, MLP_FLAGS)
    base = os.path.join(r.work, "reshard")
    ck = os.path.join(base, "ck")
    os.makedirs(base)
    saved = os.path.join(base, "saved.onnx")
    r.train(source, "--data", data, "--steps", "3", "--checkpoint-dir", ck,
            "--export", saved)
    for m, b in TARGETS:
        plan = r.plan(model, m, b, MLP_FLAGS)
        out = os.path.join(base, "export-%d-%d.onnx" % (m, b))
        r.train(plan, "--resume", ck, "--steps", "3", "--export", out)
        if not same_file(saved, out):
            fail("saved at (%d, %d), loaded at (%d, %d): the export differs "
                 "from the one at save time" % (n, stage, m, b))
    print("ok: saved at %d rank(s), stage %d; loaded at each of %s and "
          "exported with no step: the model exported at save time, bit for "
          "bit" % (n, stage, ", ".join("(%d, %d)" % t for t in TARGETS)))
    # Round trips through two other layouts, then on to step 6.
    straight_log = os.path.join(base, "straight.jsonl")
    straight = os.path.join(base, "straight.onnx")
    r.train(source, "--data", data, "--steps", "6", "--log", straight_log,
            "--export", straight)
    index = TARGETS.index((n, stage))
    for k, (m, b) in enumerate((TARGETS[(index + 5) % 12],
                                TARGETS[(index + 7) % 12])):
        there = os.path.join(base, "there%d" % k)
        r.train(r.plan(model, m, b, MLP_FLAGS), "--resume", ck, "--steps",
                "3", "--checkpoint-dir", there)
        log = os.path.join(base, "back%d.jsonl" % k)
        back = os.path.join(base, "back%d.onnx" % k)
        r.train(source, "--data", data, "--resume", there, "--steps", "6",
                "--log", log, "--export", back)
        if read_log(log) != read_log(straight_log)[3:]:
            fail("round trip through (%d, %d): steps 4-6 differ from a run "
                 "that never stopped" % (m, b))
        if not same_file(straight, back):
            fail("round trip through (%d, %d): the model differs from a run "
                 "that never stopped" % (m, b))
        print("ok: round trip (%d, %d) -> (%d, %d) -> (%d, %d), on to step 6: "
              "the losses and the model of a run that never stopped" %
              (n, stage, m, b, n, stage))


def case_consolidate(r, args):
    model = os.path.join(args.examples, "gpt", "gpt.onnx")
    data = os.path.join(args.examples, "gpt", "data")
    flags = ["--optimizer", "adamw", "--lr", "1e-3"]
    base = os.path.join(r.work, "consolidate")
    os.makedirs(base)
    single = os.path.join(base, "single.onnx")
    ck = os.path.join(base, "ck")
    r.train(r.plan(model, 1, 0, flags), "--data", data, "--steps", "2",
            "--export", single, "--checkpoint-dir", ck)
    for m in (1, 2, 4):
        out = os.path.join(base, "from%d.onnx" % m)
        r.train(r.plan(model, m, 3, flags), "--resume", ck, "--steps", "2",
                "--export", out)
        if not same_file(single, out):
            fail("consolidated from %d rank(s) at stage 3: not the model the "
                 "single-rank run exported" % m)
    print("ok: the checkpoint consolidated from 1, 2 and 4 ranks (stage 3) is "
          "the single-rank --export, bit for bit")
    consolidate_external(r, model, data, flags, single, base)


def consolidate_external(r, model, data, flags, inline, base):
    """The same model saved with ONNX external data (as PyTorch saves models
    over 2 GiB): the plan keeps the data outside too, --export follows, and
    every world size writes the same two files, holding the values of the
    inline export."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    src = os.path.join(base, "external")
    os.makedirs(src)
    external_model = os.path.join(src, "gpt.onnx")
    onnx.save(onnx.load(model), external_model, save_as_external_data=True,
              location="gpt.weights", size_threshold=256)
    plan = r.plan(external_model, 1, 0, flags)
    if not os.path.exists(os.path.join(plan, "model.onnx.data")):
        fail("the plan of a model with external data keeps no model.onnx.data")
    ck = os.path.join(base, "ck-external")
    first = os.path.join(base, "ext1")
    os.makedirs(first)
    r.train(plan, "--data", data, "--steps", "2", "--export",
            os.path.join(first, "m.onnx"), "--checkpoint-dir", ck)
    for m in (1, 2, 4):
        out = os.path.join(base, "ext-from%d" % m)
        os.makedirs(out)
        r.train(r.plan(external_model, m, 3, flags), "--resume", ck,
                "--steps", "2", "--export", os.path.join(out, "m.onnx"))
        for name in ("m.onnx", "m.onnx.data"):
            if not same_file(os.path.join(first, name), os.path.join(out, name)):
                fail("external data, consolidated from %d rank(s): %s differs "
                     "from the single-rank --export's" % (m, name))
    path = os.path.join(first, "m.onnx")
    onnx.checker.check_model(path)
    bare = onnx.load(path, load_external_data=False)
    external = [t.name for t in bare.graph.initializer
                if t.data_location == onnx.TensorProto.EXTERNAL]
    if not external:
        fail("--export of a model with external data wrote none")
    got = {t.name: numpy_helper.to_array(t)
           for t in onnx.load(path).graph.initializer}
    want = {t.name: numpy_helper.to_array(t)
            for t in onnx.load(inline).graph.initializer}
    if got.keys() != want.keys() or any(
            got[k].dtype != want[k].dtype or not np.array_equal(got[k], want[k])
            for k in got):
        fail("the export with external data holds other values than the "
             "inline one")
    print("ok: with ONNX external data (%d of %d initializers in m.onnx.data): "
          "the export from 1, 2 and 4 ranks is the same two files, and their "
          "values are the inline export's" % (len(external), len(got)))
    export_keeps_constants(r, base)


def export_keeps_constants(r, base):
    """An initializer that is not a parameter (an int64 index table of 2 KiB)
    comes through the plan's model.onnx.data into the export's data file
    unchanged."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    src = os.path.join(base, "gather")
    os.makedirs(os.path.join(src, "data"))
    rng = np.random.default_rng(5)
    perm = rng.permutation(np.tile(np.arange(16, dtype=np.int64), 16))
    inits = [numpy_helper.from_array(
                 (rng.standard_normal((16, 4)) * 0.1).astype(np.float32),
                 "fc.weight"),
             numpy_helper.from_array(perm, "perm")]
    for name, value in (("starts", 0), ("ends", 16), ("axes", 1)):
        inits.append(numpy_helper.from_array(np.array([value], np.int64), name))
    graph = helper.make_graph(
        [helper.make_node("Gather", ["x", "perm"], ["xp"], axis=1, name="g"),
         helper.make_node("Slice", ["xp", "starts", "ends", "axes"], ["xs"],
                          name="s"),
         helper.make_node("MatMul", ["xs", "fc.weight"], ["logits"], name="fc"),
         helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"],
                          name="xent")],
        "gather",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16]),
         helper.make_tensor_value_info("y", TensorProto.INT64, [8])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    model = os.path.join(src, "gather.onnx")
    onnx.save(helper.make_model(graph,
                                opset_imports=[helper.make_opsetid("", 17)]),
              model, save_as_external_data=True, location="gather.bin",
              size_threshold=0)
    data = os.path.join(src, "data")
    np.save(os.path.join(data, "x.npy"),
            rng.standard_normal((32, 16)).astype(np.float32))
    np.save(os.path.join(data, "y.npy"), (np.arange(32) % 4).astype(np.int64))
    out = os.path.join(src, "out")
    os.makedirs(out)
    r.train(r.plan(model, 2, 3, ["--optimizer", "sgd", "--lr", "0.1"]),
            "--data", data, "--steps", "2", "--export",
            os.path.join(out, "m.onnx"))
    path = os.path.join(out, "m.onnx")
    bare = {t.name: t for t in
            onnx.load(path, load_external_data=False).graph.initializer}
    if bare["perm"].data_location != TensorProto.EXTERNAL:
        fail("the exported index table is not in m.onnx.data")
    got = {t.name: numpy_helper.to_array(t)
           for t in onnx.load(path).graph.initializer}
    if not np.array_equal(got["perm"], perm):
        fail("the exported index table differs from the source model's")
    if np.array_equal(got["fc.weight"], numpy_helper.to_array(inits[0])):
        fail("the trained weight did not change")
    print("ok: an index table that is not a parameter comes through the "
          "plan's external data into the export's, unchanged")


def case_large(r, args):
    """A model over ONNX's 2 GiB protobuf limit, saved as PyTorch saves one
    (external data): a [16384, 33000] float32 weight (2.16 GB, frozen) and a
    trained head. Compiled for 2 ranks at ZeRO-3, one step, a checkpoint and
    an export: the export has external data, the frozen weight comes back
    byte for byte, and the head changed. (Consolidating from other world
    sizes with external data: case consolidate.)"""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    k, m = 16384, 33000
    src = os.path.join(r.work, "large")
    os.makedirs(os.path.join(src, "data"))
    weight = os.path.join(src, "large.weights")
    rows = 1024
    with open(weight, "wb") as f:
        for r0 in range(0, k, rows):
            i = np.arange(r0 * m, (r0 + rows) * m, dtype=np.int64)
            ((i % 1000003).astype(np.float32) * np.float32(1e-8)).tofile(f)
    w = TensorProto()
    w.name, w.data_type = "w", TensorProto.FLOAT
    w.dims.extend([k, m])
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "large.weights"), ("offset", "0"),
                       ("length", str(k * m * 4))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    rng = np.random.default_rng(3)
    head = numpy_helper.from_array(
        (rng.standard_normal((m, 4)) * 0.01).astype(np.float32), "head")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="big"),
         helper.make_node("MatMul", ["h", "head"], ["logits"], name="proj"),
         helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"],
                          name="xent")],
        "large",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, k]),
         helper.make_tensor_value_info("y", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [w, head])
    model = os.path.join(src, "large.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              model)
    data = os.path.join(src, "data")
    np.save(os.path.join(data, "x.npy"),
            rng.standard_normal((8, k)).astype(np.float32))
    np.save(os.path.join(data, "y.npy"), np.arange(8, dtype=np.int64) % 4)
    flags = ["--optimizer", "sgd", "--lr", "0.1", "--trainable", "head"]
    plan = r.plan(model, 2, 3, flags)
    os.remove(weight)  # the plan holds everything it needs
    out = os.path.join(src, "out")
    os.makedirs(out)
    ck = os.path.join(src, "ck")
    r.train(plan, "--data", data, "--steps", "1", "--export",
            os.path.join(out, "m.onnx"), "--checkpoint-dir", ck)
    exported = onnx.load(os.path.join(out, "m.onnx"), load_external_data=False)
    inits = {t.name: t for t in exported.graph.initializer}
    where = {e.key: e.value for e in inits["w"].external_data}
    if inits["w"].data_location != TensorProto.EXTERNAL or \
            where.get("location") != "m.onnx.data":
        fail("large: the exported weight is not external data in m.onnx.data")
    offset, length = int(where.get("offset", 0)), int(where["length"])
    if length != k * m * 4:
        fail("large: the exported weight has %d bytes" % length)
    got = np.memmap(os.path.join(out, "m.onnx.data"), np.float32, "r",
                    offset=offset, shape=(k, m))
    for r0 in range(0, k, rows):
        i = np.arange(r0 * m, (r0 + rows) * m, dtype=np.int64)
        want = ((i % 1000003).astype(np.float32) * np.float32(1e-8)).reshape(rows, m)
        if not np.array_equal(got[r0:r0 + rows], want):
            fail("large: the frozen weight's rows %d.. differ after export" % r0)
    del got
    hinfo = {e.key: e.value for e in inits["head"].external_data}
    trained = np.memmap(os.path.join(out, "m.onnx.data"), np.float32, "r",
                        offset=int(hinfo["offset"]), shape=(m, 4))
    if np.array_equal(np.asarray(trained), numpy_helper.to_array(head)):
        fail("large: the trained head did not change")
    del trained
    if not os.path.exists(os.path.join(ck, "step-1", "manifest")):
        fail("large: no complete checkpoint step-1")
    print("ok: a %.2f GB model (external data) at 2 ranks, ZeRO-3: one step, "
          "a checkpoint, and an export with external data: the frozen weight "
          "back byte for byte, the head trained" % (k * m * 4 / 1e9))


def expect_error(r, plan, ck, what, *needles, extra=()):
    out = r.train(plan, "--resume", ck, "--steps", "4", "--data",
                  r.data, *extra, expect_ok=False)
    text = out.stdout + out.stderr
    if out.returncode == 0:
        fail("%s: resuming succeeded" % what)
    for needle in needles:
        if needle not in text:
            fail("%s: the error does not say %r:\n%s" % (what, needle, text))
    if "step 3" in text and "resuming" in text and "loss" in text:
        fail("%s: a step ran" % what)
    print("ok: %s: %s" % (what, text.strip().splitlines()[-1]))


def case_corrupt(r, args):
    model = os.path.join(args.examples, "mlp", "mlp.onnx")
    r.data = os.path.join(args.examples, "mlp", "data")
    plan = r.plan(model, 2, 3, MLP_FLAGS)
    base = os.path.join(r.work, "corrupt")
    good = os.path.join(base, "good")
    os.makedirs(base)
    r.train(plan, "--data", r.data, "--steps", "2", "--seed", "3",
            "--checkpoint-dir", good)
    step = os.path.join(good, "step-2")

    def copy(name):
        d = os.path.join(base, name, "step-2")
        shutil.copytree(step, d)
        return d

    def flip(path, offset):
        with open(path, "r+b") as f:
            f.seek(offset)
            byte = f.read(1)
            f.seek(offset)
            f.write(bytes([byte[0] ^ 1]))

    d = copy("truncated")
    with open(os.path.join(d, "rank-1.data"), "r+b") as f:
        f.truncate(os.path.getsize(os.path.join(d, "rank-1.data")) - 100)
    expect_error(r, plan, d, "a truncated shard", "rank-1.data", "bytes",
                 "the manifest lists")
    d = copy("flipped")
    flip(os.path.join(d, "rank-0.data"), 1000)
    expect_error(r, plan, d, "a flipped byte in a shard", "rank-0.data",
                 "SHA-256")
    d = copy("missing")
    os.remove(os.path.join(d, "rank-1.data"))
    expect_error(r, plan, d, "a missing shard", "rank-1.data")
    d = copy("pb")
    flip(os.path.join(d, "checkpoint.pb"), 20)
    expect_error(r, plan, d, "a flipped byte in checkpoint.pb",
                 "checkpoint.pb", "SHA-256")
    d = copy("nomanifest")
    os.remove(os.path.join(d, "manifest"))
    expect_error(r, plan, d, "a deleted manifest", "incomplete",
                 "no manifest")
    d = copy("badmanifest")
    with open(os.path.join(d, "manifest"), "r+b") as f:
        text = f.read().replace(b"rank-0.data ", b"rank-0.data 1", 1)
        f.seek(0)
        f.write(text)
    expect_error(r, plan, d, "a damaged manifest", "manifest",
                 "does not match its own SHA-256")
    other = r.plan(os.path.join(args.examples, "cnn", "cnn.onnx"), 2, 3,
                   MLP_FLAGS)
    expect_error(r, other, step, "another model's checkpoint",
                 "another model", extra=("--data", os.path.join(
                     args.examples, "cnn", "data")))
    sgd = r.plan(model, 2, 3, ["--optimizer", "sgd", "--lr", "0.1",
                               "--momentum", "0.9"])
    expect_error(r, sgd, step, "another optimizer's checkpoint",
                 "momentum_buffer", "another optimizer")
    expect_error(r, plan, step, "another --seed", "--seed 4",
                 "trained with --seed 3", extra=("--seed", "4"))
    # Still loadable after all that (the copies were damaged, not it).
    r.train(plan, "--resume", good, "--steps", "3", "--data", r.data)
    print("ok: the undamaged checkpoint still resumes")


def case_keep_last(r, args):
    model = os.path.join(args.examples, "mlp", "mlp.onnx")
    data = os.path.join(args.examples, "mlp", "data")
    plan = r.plan(model, 2, 2, MLP_FLAGS)
    ck = os.path.join(r.work, "keep")
    r.train(plan, "--data", data, "--steps", "5", "--checkpoint-dir", ck,
            "--checkpoint-every", "1", "--keep-last", "2")
    left = sorted(os.listdir(ck))
    if left != ["step-4", "step-5"]:
        fail("--keep-last 2 left %s" % left)
    print("ok: --checkpoint-every 1 --keep-last 2 over 5 steps left %s" % left)
    # An incomplete newer one (the run died while saving step 6) is skipped.
    shutil.copytree(os.path.join(ck, "step-5"), os.path.join(ck, "step-6"))
    os.remove(os.path.join(ck, "step-6", "manifest"))
    out = r.train(plan, "--data", data, "--resume", ck, "--steps", "5")
    if "resuming from %s (step 5" % os.path.join(ck, "step-5") not in out.stderr:
        fail("--resume DIR did not take the newest complete checkpoint:\n" +
             out.stderr)
    print("ok: --resume DIR takes step-5, the newest complete checkpoint, "
          "not the incomplete step-6")
    out = r.train(plan, "--data", data, "--resume",
                  os.path.join(ck, "step-6"), "--steps", "7", expect_ok=False)
    if out.returncode == 0 or "incomplete" not in out.stderr:
        fail("--resume of an incomplete checkpoint:\n" + out.stderr)
    print("ok: --resume DIR/step-6 (no manifest): " +
          out.stderr.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--shardc", required=True)
    p.add_argument("--shardrun", required=True)
    p.add_argument("--examples", required=True)
    p.add_argument("--case", required=True,
                   choices=["resume", "reshard", "consolidate", "corrupt",
                            "keep-last", "large"])
    p.add_argument("--config", action="append", default=[],
                   help="resume: N,stage (repeatable)")
    p.add_argument("--from", dest="source", default="2,1",
                   help="reshard: the N,stage that saves")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="shard-checkpoints-")
    try:
        r = Runner(args, work)
        {"resume": case_resume, "reshard": case_reshard,
         "consolidate": case_consolidate, "corrupt": case_corrupt,
         "keep-last": case_keep_last, "large": case_large}[args.case](r, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
