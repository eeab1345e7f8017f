#!/usr/bin/python3
"""Hostile-input harness for shardc: mutates the shipped example models and
checks that shardc answers every mutant with a clean error or a plan.

    mutate_onnx.py --shardc build/bin/shardc [--sample K] [--jobs N]
                   [--timeout S] [--only REGEX] [--keep DIR] [--list]

The mutants are deterministic: each is named after its model, its kind and
what it changes (e.g. `cnn/attr-type/Conv_0.strides=string`), and the same
names always give the same models. For every mutant shardc compiles a training
step (`-o PLAN --optimizer sgd`) under a timeout, and the run is classified:

  clean-error  exit code 1 and an `error:` line on stderr
  accepted     exit code 0 (a plan was written)
  crash        killed by a signal, or an abort, `LLVM ERROR`, assertion,
               stack dump or uncaught exception on stderr, whatever the code
  hang         still running after the timeout
  unclear      any other exit: a failure without a clear error line

Each run's address space is limited (--memory-mb, default 4096): a mutant
that makes shardc allocate without bound ends as a crash (an out-of-memory
abort), not by taking the machine's memory.

The script prints the counts per class and each crash, hang and unclear run
with the command that reproduces it, and exits 1 if there was any. With
`--sample K` it runs every K-th mutant only, plus those `--always` names (the
ctest runs such a sample, with the mutants of every known past crash);
`--only` selects mutants by name; `--keep DIR` leaves the mutant models in
DIR.
"""
import argparse
import concurrent.futures
import copy
import os
import re
import resource
import subprocess
import sys
import tempfile

import onnx
from onnx import TensorProto, helper, numpy_helper

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = ["mlp", "cnn", "gpt", "mhagpt", "mhagpt_dynamic_batch", "tenclm"]

CRASH_MARKERS = re.compile(
    r"LLVM ERROR|Assertion .* failed|Stack dump|PLEASE submit a bug report|"
    r"terminate called|Segmentation fault|Aborted|core dumped|"
    r"AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:")
ERROR_LINE = re.compile(r"(^|\s)error:", re.MULTILINE)

HUGE = 1 << 62


def example_path(name):
    folder = "mhagpt" if name.startswith("mhagpt") else name
    return os.path.join(ROOT, "examples", folder, name + ".onnx")


def node_label(node, index):
    return node.name or "%s#%d" % (node.op_type, index)


def first_of_each_op(graph):
    """The first node of every op type, with its index: one representative
    per operator keeps the count of mutants near 130 per model."""
    seen = {}
    for i, n in enumerate(graph.node):
        if n.op_type not in seen:
            seen[n.op_type] = i
    return sorted(seen.values())


def default_opset(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o
    return None


def replace_attr(node, attr):
    for i, a in enumerate(node.attribute):
        if a.name == attr.name:
            node.attribute[i].CopyFrom(attr)
            return
    node.attribute.append(attr)


def wrong_typed(a):
    """Attributes of the same name and other types than `a`'s."""
    out = [("string", helper.make_attribute(a.name, "garbage"))]
    t = a.type
    if t == onnx.AttributeProto.INT:
        out.append(("float", helper.make_attribute(a.name, 0.5)))
        out.append(("ints", helper.make_attribute(a.name, [1, 2])))
    elif t == onnx.AttributeProto.FLOAT:
        out.append(("int", helper.make_attribute(a.name, 7)))
    elif t == onnx.AttributeProto.INTS:
        out.append(("int", helper.make_attribute(a.name, 3)))
        out.append(("floats", helper.make_attribute(a.name, [1.5, 2.5])))
    elif t == onnx.AttributeProto.STRING:
        out.append(("int", helper.make_attribute(a.name, 1)))
    elif t == onnx.AttributeProto.TENSOR:
        out.append(("int", helper.make_attribute(a.name, 1)))
    return out


def make_attr(name, value, attr_type):
    """An attribute of type `attr_type` (also for an empty list, whose type
    make_attribute cannot tell)."""
    if value == []:
        a = onnx.AttributeProto(name=name, type=attr_type)
        return a
    return helper.make_attribute(name, value)


def bad_values(a):
    """Out-of-range values of a well-typed attribute."""
    if a.type == onnx.AttributeProto.INTS:
        n = max(len(a.ints), 1)
        return [("zeros", [0] * n), ("negative", [-3] * n), ("huge", [HUGE] * n),
                ("empty", [])]
    if a.type == onnx.AttributeProto.INT:
        return [("zero", 0), ("negative", -7), ("huge", HUGE), ("min", -(1 << 63))]
    if a.type == onnx.AttributeProto.FLOAT:
        return [("nan", float("nan")), ("inf", float("inf")), ("negative", -1e30)]
    return []


class Mutants:
    """Builds the mutants of one model: (name, ModelProto) pairs."""

    def __init__(self, name, model):
        self.name = name
        self.model = model
        self.out = []

    def add(self, kind, what, model):
        self.out.append(("%s/%s/%s" % (self.name, kind, what), model))

    def copy(self):
        return copy.deepcopy(self.model)

    def build(self):
        g = self.model.graph
        for i in first_of_each_op(g):
            node = g.node[i]
            label = node_label(node, i)
            for a in node.attribute:
                for tname, attr in wrong_typed(a):
                    m = self.copy()
                    replace_attr(m.graph.node[i], attr)
                    self.add("attr-type", "%s.%s=%s" % (label, a.name, tname), m)
                for vname, value in bad_values(a):
                    if a.type == onnx.AttributeProto.INTS and not a.ints and vname != "empty":
                        continue
                    m = self.copy()
                    replace_attr(m.graph.node[i], make_attr(a.name, value, a.type))
                    self.add("attr-value", "%s.%s=%s" % (label, a.name, vname), m)
            # Attributes the node does not have: unknown, duplicated, window
            # attributes of the conv and pool family set to zero.
            m = self.copy()
            m.graph.node[i].attribute.append(helper.make_attribute("bogus", 1))
            self.add("attr-unknown", label, m)
            if node.attribute:
                m = self.copy()
                m.graph.node[i].attribute.append(copy.deepcopy(node.attribute[0]))
                self.add("attr-duplicate", "%s.%s" % (label, node.attribute[0].name), m)
                m = self.copy()
                del m.graph.node[i].attribute[:]
                self.add("attr-dropped", label, m)
            if node.op_type in ("Conv", "MaxPool", "AveragePool"):
                for attr in ("strides", "dilations", "kernel_shape"):
                    m = self.copy()
                    replace_attr(m.graph.node[i], helper.make_attribute(attr, [0, 0]))
                    self.add("window", "%s.%s=0" % (label, attr), m)
                for pads, pname in (([-1] * 4, "negative"), ([1 << 40] * 4, "huge"),
                                    ([1, 1], "short")):
                    m = self.copy()
                    replace_attr(m.graph.node[i], helper.make_attribute("pads", pads))
                    self.add("window", "%s.pads=%s" % (label, pname), m)
            # Inputs: the last one dropped, the first one emptied or renamed.
            if len(node.input) >= 1:
                m = self.copy()
                del m.graph.node[i].input[-1]
                self.add("input-dropped", label, m)
                m = self.copy()
                m.graph.node[i].input[0] = ""
                self.add("input-empty", label, m)
                m = self.copy()
                m.graph.node[i].input[0] = "undefined_value"
                self.add("input-undefined", label, m)
            m = self.copy()
            m.graph.node[i].input.append(node.input[0] if node.input else "x")
            self.add("input-extra", label, m)
            m = self.copy()
            m.graph.node[i].op_type = "NoSuchOp"
            self.add("op-unknown", label, m)
            m = self.copy()
            m.graph.node[i].domain = "com.example"
            self.add("op-domain", label, m)

        self.subgraphs()
        self.versions()
        self.shapes()
        self.tensors()
        self.structure()
        return self.out

    def loss_name(self):
        for o in self.model.graph.output:
            if o.name == "loss":
                return "loss"
        return self.model.graph.output[-1].name

    def add_to_loss(self, m, value):
        """Makes the scalar `value` part of the loss, so that no pass drops
        the mutant's nodes as dead code."""
        loss = self.loss_name()
        for n in m.graph.node:
            for k, out in enumerate(n.output):
                if out == loss:
                    n.output[k] = loss + "_before_mutant"
        m.graph.node.append(helper.make_node("Add", [loss + "_before_mutant", value],
                                             [loss], name="mutant_loss_add"))

    def subgraphs(self):
        x = self.model.graph.input[0].name
        body_out = helper.make_tensor_value_info("b_out", TensorProto.FLOAT, [])
        const_body = helper.make_graph(
            [helper.make_node("Constant", [], ["b_out"],
                              value=numpy_helper.from_array(np.array(1.0, np.float32)))],
            "body", [], [body_out])
        # If: a branch per condition, both constant.
        m = self.copy()
        m.graph.node.insert(0, helper.make_node(
            "Constant", [], ["mutant_cond"], value=numpy_helper.from_array(np.array(True))))
        m.graph.node.insert(1, helper.make_node(
            "If", ["mutant_cond"], ["mutant_if"], name="mutant_if",
            then_branch=const_body, else_branch=const_body))
        self.add_to_loss(m, "mutant_if")
        self.add("subgraph", "If", m)
        # Loop: three iterations of a body that carries a float.
        m = self.copy()
        loop_body = helper.make_graph(
            [helper.make_node("Identity", ["l_cond"], ["l_cond_out"]),
             helper.make_node("Identity", ["l_v"], ["l_v_out"])],
            "loop_body",
            [helper.make_tensor_value_info("l_i", TensorProto.INT64, []),
             helper.make_tensor_value_info("l_cond", TensorProto.BOOL, []),
             helper.make_tensor_value_info("l_v", TensorProto.FLOAT, [])],
            [helper.make_tensor_value_info("l_cond_out", TensorProto.BOOL, []),
             helper.make_tensor_value_info("l_v_out", TensorProto.FLOAT, [])])
        m.graph.node.insert(0, helper.make_node(
            "Constant", [], ["mutant_trip"], value=numpy_helper.from_array(np.array(3, np.int64))))
        m.graph.node.insert(1, helper.make_node(
            "Constant", [], ["mutant_v0"], value=numpy_helper.from_array(np.array(1.0, np.float32))))
        m.graph.node.insert(2, helper.make_node(
            "Loop", ["mutant_trip", "", "mutant_v0"], ["mutant_loop"], name="mutant_loop",
            body=loop_body))
        self.add_to_loss(m, "mutant_loop")
        self.add("subgraph", "Loop", m)
        # Scan over the first graph input, with a body that has no inputs:
        # the form that crashed ONNX's shape inference.
        m = self.copy()
        scan_body = helper.make_graph(
            [helper.make_node("Identity", ["s_x"], ["s_y"])], "scan_body",
            [helper.make_tensor_value_info("s_x", TensorProto.FLOAT, None)],
            [helper.make_tensor_value_info("s_y", TensorProto.FLOAT, None)])
        m.graph.node.insert(0, helper.make_node(
            "Scan", [x], ["mutant_scan"], name="mutant_scan", num_scan_inputs=1, body=scan_body))
        self.add("subgraph", "Scan", m)
        m = self.copy()
        m.graph.node.insert(0, helper.make_node(
            "Scan", [x], ["mutant_scan"], name="mutant_scan", num_scan_inputs=1,
            body=helper.make_graph([], "empty", [], [])))
        self.add("subgraph", "Scan-empty-body", m)
        # Without its required num_scan_inputs, ONNX's Scan inference
        # dereferences the missing attribute.
        m = self.copy()
        m.graph.node.insert(0, helper.make_node(
            "Scan", [x], ["mutant_scan"], name="mutant_scan", body=scan_body))
        self.add("subgraph", "Scan-no-num_scan_inputs", m)
        # A graph attribute on an operator without subgraphs.
        m = self.copy()
        m.graph.node[0].attribute.append(helper.make_attribute("body", const_body))
        self.add("subgraph", "graph-attribute", m)
        m = self.copy()
        m.graph.node[0].attribute.append(helper.make_attribute("bodies", [const_body, const_body]))
        self.add("subgraph", "graphs-attribute", m)

    def versions(self):
        for v in (0, -1, 1, 5, 6, 9, 12, 18, 20, 21, 22, 99, (1 << 31) - 1, 1 << 40):
            m = self.copy()
            default_opset(m).version = v
            self.add("opset", str(v), m)
        for v in (0, 1, 2, 3, 6, 9, 10, 11, 99, -1):
            m = self.copy()
            m.ir_version = v
            self.add("ir-version", str(v), m)
        m = self.copy()
        del m.opset_import[:]
        self.add("opset", "none", m)
        m = self.copy()
        m.opset_import.append(helper.make_opsetid("", 11))
        self.add("opset", "twice", m)
        m = self.copy()
        m.ir_version = 3
        default_opset(m).version = 7
        self.add("opset", "ir3-opset7", m)

    def shapes(self):
        g = self.model.graph
        inputs = [vi for vi in g.input if vi.type.tensor_type.HasField("shape")]
        for vi_index, vi in enumerate(g.input[:2]):
            dims = vi.type.tensor_type.shape.dim
            for value, vname in ((0, "zero"), (-5, "negative"), (1 << 40, "2^40"),
                                 (HUGE, "2^62")):
                m = self.copy()
                d = m.graph.input[vi_index].type.tensor_type.shape.dim
                if not d:
                    continue
                d[0].Clear()
                d[0].dim_value = value
                self.add("input-dim", "%s[0]=%s" % (vi.name, vname), m)
            m = self.copy()
            for d in m.graph.input[vi_index].type.tensor_type.shape.dim:
                d.Clear()
                d.dim_value = 1 << 32
            self.add("input-dim", "%s=all-2^32" % vi.name, m)
            m = self.copy()
            shape = m.graph.input[vi_index].type.tensor_type.shape
            for _ in range(100):
                shape.dim.add().dim_value = 2
            self.add("input-rank", "%s+100" % vi.name, m)
            m = self.copy()
            m.graph.input[vi_index].type.tensor_type.elem_type = 99
            self.add("input-type", "%s=99" % vi.name, m)
            m = self.copy()
            m.graph.input[vi_index].type.ClearField("tensor_type")
            self.add("input-type", "%s=none" % vi.name, m)
        del inputs
        # Constant chains: a huge ConstantOfShape reduced into the loss (the
        # allocation that folding aborted on), one whose element count
        # overflows 64 bits, and a huge Expand.
        for shape, sname in (([1 << 20, 1 << 20], "2^40"), ([1 << 32, 1 << 32, 16], "2^68"),
                             ([1 << 31, 1 << 31, 1 << 31], "2^93"), ([3, -1], "negative")):
            m = self.copy()
            m.graph.node.insert(0, helper.make_node(
                "Constant", [], ["mutant_shape"],
                value=numpy_helper.from_array(np.array(shape, np.int64))))
            m.graph.node.insert(1, helper.make_node(
                "ConstantOfShape", ["mutant_shape"], ["mutant_big"], name="mutant_cos",
                value=numpy_helper.from_array(np.array([1.0], np.float32))))
            m.graph.node.insert(2, helper.make_node(
                "ReduceSum", ["mutant_big"], ["mutant_sum"], name="mutant_sum", keepdims=0))
            self.add_to_loss(m, "mutant_sum")
            self.add("constant-of-shape", sname, m)
            m = self.copy()
            m.graph.node.insert(0, helper.make_node(
                "Constant", [], ["mutant_shape"],
                value=numpy_helper.from_array(np.array(shape, np.int64))))
            m.graph.node.insert(1, helper.make_node(
                "Constant", [], ["mutant_one"],
                value=numpy_helper.from_array(np.array(1.0, np.float32))))
            m.graph.node.insert(2, helper.make_node(
                "Expand", ["mutant_one", "mutant_shape"], ["mutant_big"], name="mutant_expand"))
            m.graph.node.insert(3, helper.make_node(
                "ReduceSum", ["mutant_big"], ["mutant_sum"], name="mutant_sum", keepdims=0))
            self.add_to_loss(m, "mutant_sum")
            self.add("expand", sname, m)

    def tensors(self):
        g = self.model.graph
        if not g.initializer:
            return
        # The largest float initializer and the first integer one.
        floats = [i for i, t in enumerate(g.initializer) if t.data_type == TensorProto.FLOAT]
        ints = [i for i, t in enumerate(g.initializer) if t.data_type == TensorProto.INT64]
        picks = floats[:1] + ints[:1]
        for i in picks:
            t = g.initializer[i]
            m = self.copy()
            mt = m.graph.initializer[i]
            if mt.raw_data:
                mt.raw_data = mt.raw_data[: len(mt.raw_data) // 2]
            else:
                del mt.float_data[len(mt.float_data) // 2:]
                del mt.int64_data[len(mt.int64_data) // 2:]
            self.add("tensor", "%s=truncated" % t.name, m)
            for dt, dname in ((TensorProto.STRING, "string"), (TensorProto.BFLOAT16, "bfloat16"),
                              (0, "undefined"), (99, "99")):
                m = self.copy()
                m.graph.initializer[i].data_type = dt
                self.add("tensor", "%s=%s" % (t.name, dname), m)
            for dims, dname in (([-1] + list(t.dims[1:]), "negative-dim"),
                                ([1 << 31] * 3, "dims-2^93"),
                                (list(t.dims) + [1 << 20], "extra-2^20")):
                m = self.copy()
                del m.graph.initializer[i].dims[:]
                m.graph.initializer[i].dims.extend(dims)
                self.add("tensor", "%s=%s" % (t.name, dname), m)
            m = self.copy()
            mt = m.graph.initializer[i]
            mt.ClearField("raw_data")
            mt.data_location = TensorProto.EXTERNAL
            mt.external_data.add(key="location", value="../../../../etc/passwd")
            self.add("tensor", "%s=external-outside" % t.name, m)
            m = self.copy()
            del m.graph.initializer[i]
            self.add("tensor", "%s=dropped" % t.name, m)
        # A Constant node holding a huge tensor header with no data.
        for i, n in enumerate(g.node):
            if n.op_type == "Constant":
                m = self.copy()
                t = onnx.TensorProto(data_type=TensorProto.FLOAT, dims=[1 << 20, 1 << 20])
                replace_attr(m.graph.node[i], helper.make_attribute("value", t))
                self.add("constant", "%s=no-data-2^40" % node_label(n, i), m)
                break

    def structure(self):
        g = self.model.graph
        m = self.copy()
        nodes = list(m.graph.node)
        del m.graph.node[:]
        m.graph.node.extend(reversed(nodes))
        self.add("graph", "reversed-nodes", m)
        if len(g.node) >= 2:
            m = self.copy()
            m.graph.node[1].output[0] = m.graph.node[0].output[0]
            self.add("graph", "duplicate-output", m)
        m = self.copy()
        del m.graph.output[:]
        self.add("graph", "no-outputs", m)
        m = self.copy()
        m.graph.output[0].name = "no_such_value"
        self.add("graph", "undefined-output", m)
        m = self.copy()
        m.graph.input.append(copy.deepcopy(m.graph.input[0]))
        self.add("graph", "duplicate-input", m)
        m = self.copy()
        del m.graph.node[:]
        self.add("graph", "no-nodes", m)


def all_mutants():
    out = []
    for name in EXAMPLES:
        model = onnx.load(example_path(name))
        out.extend(Mutants(name, model).build())
    return out


def dim_flags(model):
    """--dim NAME=2 for every named dimension of the graph inputs."""
    names = []
    for vi in model.graph.input:
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param not in names:
                names.append(d.dim_param)
    return [x for n in names for x in ("--dim", "%s=2" % n)]


def classify(returncode, stderr, timed_out):
    if timed_out:
        return "hang"
    if returncode < 0 or CRASH_MARKERS.search(stderr):
        return "crash"
    if returncode == 0:
        return "accepted"
    if returncode == 1 and ERROR_LINE.search(stderr):
        return "clean-error"
    return "unclear"


def run_one(shardc, path, extra, workdir, timeout, memory_mb):
    plan = path[:-len(".onnx")] + ".plan"
    cmd = [shardc, path, "-o", plan, "--optimizer", "sgd"] + extra

    def limit_memory():
        # A mutant that makes shardc allocate without bound fails here, as
        # a crash, instead of taking the machine's memory.
        limit = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    try:
        p = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                           timeout=timeout, cwd=workdir, preexec_fn=limit_memory)
        return cmd, p.returncode, p.stderr, False
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return cmd, None, err, True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--sample", type=int, default=1,
                    help="run every K-th mutant only (default 1: all)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="seconds before a run counts as a hang (default 30)")
    ap.add_argument("--memory-mb", type=int, default=4096,
                    help="address-space limit of each shardc run in MiB (default 4096)")
    ap.add_argument("--only", default=None, help="run the mutants whose names match REGEX")
    ap.add_argument("--always", default=None,
                    help="with --sample, also run every mutant whose name matches REGEX")
    ap.add_argument("--keep", default=None, help="write the mutant models to DIR and keep them")
    ap.add_argument("--list", action="store_true", help="list the mutants' names and exit")
    ap.add_argument("--verbose", action="store_true",
                    help="print every run's class and last stderr line")
    args = ap.parse_args()

    mutants = all_mutants()
    if args.only:
        mutants = [(n, m) for n, m in mutants if re.search(args.only, n)]
    step = max(args.sample, 1)
    mutants = [(n, m) for i, (n, m) in enumerate(mutants)
               if i % step == 0 or (args.always and re.search(args.always, n))]
    if args.list:
        for n, _ in mutants:
            print(n)
        return 0

    shardc = os.path.abspath(args.shardc)
    workdir = args.keep or tempfile.mkdtemp(prefix="shard-mutants-")
    os.makedirs(workdir, exist_ok=True)
    jobs = []
    for i, (name, model) in enumerate(mutants):
        path = os.path.join(workdir, "%04d-%s.onnx" % (i, re.sub(r"[^A-Za-z0-9_.=-]+", "_", name)))
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        jobs.append((name, path, dim_flags(model)))

    counts = {c: 0 for c in ("clean-error", "accepted", "crash", "hang", "unclear")}
    bad = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        futures = [pool.submit(run_one, shardc, path, extra, workdir, args.timeout,
                               args.memory_mb)
                   for _, path, extra in jobs]
        for (name, path, _), fut in zip(jobs, futures):
            cmd, code, stderr, timed_out = fut.result()
            cls = classify(code if code is not None else 0, stderr, timed_out)
            counts[cls] += 1
            lines = [l for l in stderr.strip().splitlines() if l.strip()]
            if args.verbose:
                print("%-12s %s: %s" % (cls, name, lines[0][:200] if lines else ""))
            if cls in ("crash", "hang", "unclear"):
                bad.append((cls, name, cmd, code, lines))

    for cls, name, cmd, code, lines in bad:
        print("%s: %s (exit %s)" % (cls.upper(), name, code))
        print("  $ " + " ".join(cmd))
        for l in lines[:6]:
            print("  | " + l[:300])
    print("%d mutants: %s" % (len(jobs), ", ".join("%s %d" % kv for kv in counts.items())))
    if not args.keep:
        subprocess.run(["rm", "-rf", workdir])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
