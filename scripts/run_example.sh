#!/usr/bin/env bash
# The main job on a fresh machine: installs dependencies, builds Shard,
# compiles a shipped example model (default: the GPT-style transformer) into
# a plan and runs it on the example micro-batch, printing the model's outputs.
#   scripts/run_example.sh [mlp|cnn|gpt]
set -euo pipefail
cd "$(dirname "$0")/.."
example="${1:-gpt}"
if [ ! -f "examples/$example/$example.onnx" ]; then
  echo "run_example: no example '$example' (choose mlp, cnn or gpt)" >&2
  exit 1
fi
bash scripts/setup.sh
bash scripts/build.sh
plan="build/examples/$example.plan"
echo "+ shardc examples/$example/$example.onnx -o $plan"
build/bin/shardc "examples/$example/$example.onnx" -o "$plan"
inputs=()
for f in examples/"$example"/input/*.npy; do
  inputs+=(--input "$(basename "$f" .npy)=$f")
done
echo "+ shardrun $plan ${inputs[*]} --output-dir build/examples/$example.out"
build/bin/shardrun "$plan" "${inputs[@]}" --output-dir "build/examples/$example.out"
