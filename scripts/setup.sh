#!/usr/bin/env bash
# Installs every dependency of Shard from Debian (bookworm) packages. Idempotent: packages that
# are already installed are skipped, so running it twice costs one `dpkg-query`.
set -euo pipefail

PKGS=(
  # toolchain
  build-essential cmake ninja-build git clang-format
  # MLIR / LLVM 19 (lit and FileCheck come with llvm-19-tools)
  libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools
  # ONNX and Protobuf
  libonnx-dev libprotobuf-dev protobuf-compiler
  # tests
  googletest libgtest-dev libgmock-dev
  libonnx-testdata
  # fuzzing (libFuzzer targets, built with clang in build/fuzz)
  clang-19 libclang-rt-19-dev
  # distributed runtime
  libopenmpi-dev openmpi-bin
  # CPU kernels: OpenBLAS, and oneDNN for large float32 products
  libopenblas-dev libdnnl-dev
  # scripts that export examples / make reference curves (not needed by the tests)
  python3-numpy python3-onnx python3-torch python3-torchvision
  zlib1g-dev libzstd-dev libedit-dev libxml2-dev libcurl4-openssl-dev
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "setup: done"
