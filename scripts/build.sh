#!/usr/bin/env bash
# Configures (once) and builds Shard into ./build with Ninja.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release
fi
ninja -C build -j"${SHARD_BUILD_JOBS:-2}"
