#!/usr/bin/env python3
"""Runs one of Shard's libFuzzer targets for a fixed time (the ctests
fuzz.npy, fuzz.plan and fuzz.import, on every CI run; longer by hand).

The fuzzer starts from three corpus directories:
  BUILD/fuzz-work/TARGET/corpus   where it writes what it finds (kept between
                                  runs of the same build directory)
  BUILD/fuzz-work/TARGET/seeds    made here from the shipped examples: their
                                  .npy files, their ONNX models (and the ONNX
                                  node-test models of libonnx-testdata), or
                                  plans that shardc compiles from them
  test/fuzz/corpus/TARGET         the committed regression corpus: every input
                                  that ever crashed a fuzzer, and the seeds
                                  worth keeping
Every input of the three runs first, then new ones for --seconds. A crash,
an out-of-memory, a leak or a timeout fails the test; the input is written to
BUILD/fuzz-work/TARGET/artifacts/ and the message says how to reproduce it
and where to commit it once fixed.

  run_fuzzer.py --target plan --fuzzer build/fuzz/bin/shard-fuzz-plan \\
      --build-dir build --seconds 3600
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(SOURCE, "examples")
ONNX_NODE_TESTS = "/usr/share/libonnx-testdata/data/node"

# Plans for the plan fuzzer's seeds: (example, shardc flags). World size 1
# plans run in the fuzzer (one rank); the others exercise validation of
# collectives and shards.
PLAN_SEEDS = [
    ("mlp", ["--optimizer", "sgd"]),
    ("mlp", ["--optimizer", "adamw", "--world-size", "2", "--zero-stage", "3"]),
    ("cnn", ["--optimizer", "adam"]),
    ("cnn", ["--optimizer", "sgd", "--momentum", "0.9", "--world-size", "2",
             "--zero-stage", "1"]),
    ("cnn", []),  # forward only
    ("gpt", ["--optimizer", "adamw", "--world-size", "2", "--zero-stage", "2"]),
]


def copy_seed(src, seeds, name):
    dst = os.path.join(seeds, name)
    if not os.path.exists(dst):
        shutil.copyfile(src, dst)


def make_seeds(target, seeds, build_dir):
    os.makedirs(seeds, exist_ok=True)
    if target == "npy":
        for path in sorted(glob.glob(os.path.join(EXAMPLES, "*", "*", "*.npy"))):
            rel = os.path.relpath(path, EXAMPLES).replace(os.sep, "_")
            copy_seed(path, seeds, rel)
    elif target == "import":
        for path in sorted(glob.glob(os.path.join(EXAMPLES, "*", "*.onnx"))):
            copy_seed(path, seeds, os.path.basename(path))
        for path in sorted(glob.glob(os.path.join(ONNX_NODE_TESTS, "*", "model.onnx"))):
            copy_seed(path, seeds, os.path.basename(os.path.dirname(path)) + ".onnx")
    elif target == "plan":
        shardc = os.path.join(build_dir, "bin", "shardc")
        plans = os.path.join(os.path.dirname(seeds), "plans")
        for i, (example, flags) in enumerate(PLAN_SEEDS):
            name = "%s-%d" % (example, i)
            if os.path.exists(os.path.join(seeds, name + ".pb")) and \
                    os.path.exists(os.path.join(seeds, name + ".manifest")):
                continue
            out = os.path.join(plans, name)
            shutil.rmtree(out, ignore_errors=True)
            cmd = [shardc, os.path.join(EXAMPLES, example, example + ".onnx"),
                   "-o", out] + flags
            proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
            if proc.returncode != 0:
                sys.exit("run_fuzzer: cannot make a seed plan: %s\n%s"
                         % (" ".join(cmd), proc.stdout))
            copy_seed(os.path.join(out, "plan.pb"), seeds, name + ".pb")
            copy_seed(os.path.join(out, "manifest"), seeds,
                      name + ".manifest")
    else:
        sys.exit("run_fuzzer: unknown target '%s' (npy, plan or import)" % target)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True, choices=["npy", "plan", "import"])
    ap.add_argument("--fuzzer", required=True, help="the fuzzer executable")
    ap.add_argument("--build-dir", required=True,
                    help="the main build directory (its bin/shardc makes plan seeds)")
    ap.add_argument("--seconds", type=int, default=30,
                    help="how long to fuzz after the corpus has run (default 30)")
    ap.add_argument("--work-dir",
                    help="where the corpus, seeds and crash inputs go "
                         "(default BUILD/fuzz-work/TARGET)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="fuzzing processes (libFuzzer -fork; default 1)")
    args = ap.parse_args()
    if args.seconds < 1:
        sys.exit("run_fuzzer: --seconds must be at least 1")
    if not os.access(args.fuzzer, os.X_OK):
        sys.exit("run_fuzzer: no fuzzer at %s; build it (ninja -C %s shard-fuzzers)"
                 % (args.fuzzer, args.build_dir))

    work = os.path.abspath(args.work_dir) if args.work_dir else os.path.join(
        os.path.abspath(args.build_dir), "fuzz-work", args.target)
    corpus = os.path.join(work, "corpus")
    seeds = os.path.join(work, "seeds")
    artifacts = os.path.join(work, "artifacts")
    regression = os.path.join(SOURCE, "test", "fuzz", "corpus", args.target)
    for d in (corpus, artifacts):
        os.makedirs(d, exist_ok=True)
    make_seeds(args.target, seeds, args.build_dir)
    dictionary = os.path.join(SOURCE, "test", "fuzz", args.target + ".dict")

    cmd = [args.fuzzer,
           "-max_total_time=%d" % args.seconds,
           "-timeout=30",
           "-rss_limit_mb=2048",
           "-print_final_stats=1",
           "-artifact_prefix=" + artifacts + "/"]
    if os.path.exists(dictionary):
        cmd.append("-dict=" + dictionary)
    if args.jobs > 1:
        cmd += ["-fork=%d" % args.jobs, "-ignore_crashes=0"]
    cmd += [corpus, seeds]
    if os.path.isdir(regression):
        cmd.append(regression)
    print("run_fuzzer:", " ".join(cmd), flush=True)
    env = dict(os.environ)
    # Leaks are findings; so is an allocation larger than the RSS limit.
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:allocator_may_return_null=0")
    before = set(os.listdir(artifacts))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          env=env, errors="replace")
    out = proc.stdout
    lines = out.splitlines()
    stats = {m.group(1): m.group(2)
             for m in re.finditer(r"^stat::(\w+):\s+(\d+)", out, re.M)}
    new = sorted(set(os.listdir(artifacts)) - before)
    if proc.returncode != 0 or new:
        sys.stdout.write("\n".join(lines[-120:]) + "\n")
        print("\nrun_fuzzer: the %s fuzzer failed (exit %d)." % (args.target, proc.returncode))
        for name in new:
            path = os.path.join(artifacts, name)
            print("  input: %s\n  reproduce: %s %s" % (path, args.fuzzer, path))
        print("Fix the bug, then commit the input to test/fuzz/corpus/%s/ "
              "so that every later run tries it again." % args.target)
        return 1
    print("run_fuzzer: %s: %s executions (%s per second), peak RSS %s MB, "
          "corpus %d inputs; no crash, leak, timeout or out-of-memory"
          % (args.target, stats.get("number_of_executed_units", "?"),
             stats.get("average_exec_per_sec", "?"),
             stats.get("peak_rss_mb", "?"), len(os.listdir(corpus))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
