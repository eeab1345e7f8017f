#!/usr/bin/env bash
# The main job on a fresh machine: installs dependencies, builds Shard,
# compiles a shipped example model (default: the GPT-style transformer) into a
# sharded training step and trains it across MPI ranks on its data set, then
# exports the trained ONNX model and runs it forward once.
#   scripts/run_example.sh [mlp|cnn|gpt] [STEPS] [RANKS] [ZERO_STAGE]
set -euo pipefail
cd "$(dirname "$0")/.."
example="${1:-gpt}"
steps="${2:-300}"
ranks="${3:-2}"
stage="${4:-3}"
if [ ! -f "examples/$example/$example.onnx" ]; then
  echo "run_example: no example '$example' (choose mlp, cnn or gpt)" >&2
  exit 1
fi
bash scripts/setup.sh
bash scripts/build.sh
out="build/examples/$example"
rm -rf "$out" && mkdir -p "$out"
set -x
build/bin/shardc "examples/$example/$example.onnx" -o "$out/train.plan" \
  --optimizer adamw --lr 3e-3 --world-size "$ranks" --zero-stage "$stage" \
  --print-memory
build/bin/shardrun "$out/train.plan" --data "examples/$example/data" \
  --steps "$steps" --log "$out/run.jsonl" --export "$out/trained.onnx" \
  --report-memory
{ set +x; } 2>/dev/null
echo "loss (mean over ranks) at step 1 and step $steps:"
sed -n "1p;\$p" "$out/run.jsonl"
inputs=()
for f in examples/"$example"/input/*.npy; do
  inputs+=(--input "$(basename "$f" .npy)=$f")
done
set -x
build/bin/shardc "$out/trained.onnx" -o "$out/trained.plan"
build/bin/shardrun "$out/trained.plan" "${inputs[@]}" --output-dir "$out/outputs"
