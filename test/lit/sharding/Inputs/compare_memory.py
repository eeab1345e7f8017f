"""Compares the per-rank peak memory that `shardc --print-memory` predicts.

    compare_memory.py NAME=FILE... -- 'NAME.category OP NAME.category'...

Each FILE holds the output of one `shardc --print-memory` run; the line
"predicted per-rank peak memory (bytes): activations=N params=N ..." is
parsed into NAME.activations, NAME.params, ... Every comparison (OP one of
<, <=, ==) must hold; otherwise the failing ones are printed and the exit
code is 1.
"""
import operator
import re
import sys

OPS = {"<": operator.lt, "<=": operator.le, "==": operator.eq}


def read(path):
    with open(path) as f:
        for line in f:
            if line.startswith("predicted per-rank peak memory (bytes):"):
                return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
    sys.exit(f"{path}: no predicted memory line")


def main(argv):
    sep = argv.index("--")
    runs = {}
    for spec in argv[:sep]:
        name, path = spec.split("=", 1)
        runs[name] = read(path)
    failed = []
    for cmp in argv[sep + 1:]:
        lhs, op, rhs = cmp.split()
        values = []
        for side in (lhs, rhs):
            run, category = side.split(".")
            values.append(runs[run][category])
        if not OPS[op](*values):
            failed.append(f"{cmp}: {values[0]} {op} {values[1]} does not hold")
    for f in failed:
        print(f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
