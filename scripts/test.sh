#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs dependencies (Debian
# packages), configures, builds and runs ctest (unit tests, lit tests, ONNX
# conformance). Output ends with ctest's summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j"${SHARD_TEST_JOBS:-2}"
