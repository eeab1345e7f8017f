#!/usr/bin/env bash
# The GPU checks of the CUDA backend, on a machine with an NVIDIA GPU,
# PyTorch (with its NVIDIA libraries), numpy and onnx, but no LLVM, MPI or
# compiler: run from the repository root after scripts/gpu_bundle.sh made
# .gpu/shard-gpu.tar.xz here and the two travelled.
#   1. the CUDA unit tests (every kernel against the CPU kernel, the NCCL
#      communicator at one rank), then again under compute-sanitizer memcheck;
#   2. the parity matrix at world size 1 with --device cuda: every example
#      and optimizer, and the training-loop configs, of
#      scripts/gpu_parity_cases.txt (offload to pinned host memory among
#      them) against the committed PyTorch references,
#      at the fp32 tolerances of the CPU runs (test/parity/check_parity.py); the CNN
#      once more with --cudnn=false (its Conv and BatchNorm on Shard's own
#      kernels instead of cuDNN's);
#   3. the GPT step time against PyTorch on the same GPU
#      (bench/gpu_step_time.py).
# Everything is printed and also written to $OUT (default /tmp/shard-gpu)
# as summary.txt. Exit status: the number of failed parts.
#
#   scripts/gpu_check.sh [BUNDLE_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=${1:-.gpu}
out=${OUT:-/tmp/shard-gpu}
root=$(mktemp -d)
mkdir -p "$out"
tar -C "$root" -xJf "$bundle/shard-gpu.tar.xz" || { echo "no bundle in $bundle: run scripts/gpu_bundle.sh" >&2; exit 1; }

# cuBLAS and NCCL from PyTorch's NVIDIA packages (or the system's).
nvlibs=$(python3 - <<'PY'
import glob, os
dirs = set()
try:
    import nvidia
    for base in nvidia.__path__:
        for lib in glob.glob(os.path.join(base, "**", "lib*.so*"), recursive=True):
            dirs.add(os.path.dirname(lib))
except ImportError:
    pass
print(":".join(sorted(dirs)))
PY
)
export LD_LIBRARY_PATH="$root/lib${nvlibs:+:$nvlibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
python=python3
summary="$out/summary.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
failed=0

say "date: $(date -u +%Y-%m-%dT%H:%MZ)"
say "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"

# 1. Unit tests, plain and under compute-sanitizer.
if "$root/bin/shard-cuda-tests" >"$out/unit.txt" 2>&1; then
  say "unit: $(grep -E '^\[  PASSED  \]' "$out/unit.txt")"
else
  failed=$((failed + 1)); say "unit: FAILED"; grep -E 'FAILED|Failure|error' "$out/unit.txt" | head -40 | tee -a "$summary"
fi
if command -v compute-sanitizer >/dev/null; then
  if compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 \
      "$root/bin/shard-cuda-tests" >"$out/sanitizer.txt" 2>&1; then
    say "compute-sanitizer memcheck: $(grep -E 'ERROR SUMMARY' "$out/sanitizer.txt" | tail -1)"
  else
    failed=$((failed + 1)); say "compute-sanitizer memcheck: FAILED"
    grep -E 'ERROR SUMMARY|Invalid|Error' "$out/sanitizer.txt" | head -20 | tee -a "$summary"
  fi
else
  failed=$((failed + 1)); say "compute-sanitizer: not found"
fi

# 2. Parity at world size 1 on the GPU.
parity_failed=0
while read -r ex opt extra; do
  flags=()
  for f in $extra; do flags+=("--shardc-stage-arg=$f"); done
  what="$ex $opt${extra:+ $extra}"
  log="$out/parity-$(echo "$what" | tr -c 'A-Za-z0-9_\n' '-').txt"
  if $python test/parity/check_parity.py --compiled "$root/plans" \
      --shardrun "$root/bin/shardrun" --shardrun-arg=--device=cuda \
      --example "examples/$ex" --optimizer "$opt" "${flags[@]}" >"$log" 2>&1; then
    say "parity $what: ok ($(grep -o 'loss-rel-err=[^ ]*' "$log"))"
  else
    parity_failed=$((parity_failed + 1))
    say "parity $what: FAILED"; tail -15 "$log" | tee -a "$summary"
  fi
done < <(grep -v '^#' scripts/gpu_parity_cases.txt)
for opt in sgd adam adamw; do
  log="$out/parity-cnn-$opt-own-kernels.txt"
  if $python test/parity/check_parity.py --compiled "$root/plans" \
      --shardrun "$root/bin/shardrun" --shardrun-arg=--device=cuda \
      --shardrun-arg=--cudnn=false \
      --example examples/cnn --optimizer "$opt" >"$log" 2>&1; then
    say "parity cnn $opt --cudnn=false: ok ($(grep -o 'loss-rel-err=[^ ]*' "$log"))"
  else
    parity_failed=$((parity_failed + 1))
    say "parity cnn $opt --cudnn=false: FAILED"; tail -15 "$log" | tee -a "$summary"
  fi
done
[ "$parity_failed" -eq 0 ] || failed=$((failed + 1))

# 3. GPT step time against PyTorch.
if $python bench/gpu_step_time.py --shardrun "$root/bin/shardrun" \
    --plan "$root/plans/gpt-adamw" --example examples/gpt --optimizer adamw \
    >"$out/step_time.json" 2>"$out/step_time.err"; then
  say "step time: $(cat "$out/step_time.json")"
else
  failed=$((failed + 1)); say "step time: FAILED"; tail -15 "$out/step_time.err" | tee -a "$summary"
fi

say "failed parts: $failed"
rm -rf "$root"
exit "$failed"
