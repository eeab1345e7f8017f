#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh needs on a bare GPU machine (CUDA driver,
# PyTorch with its NVIDIA libraries, no LLVM, no MPI, no compiler) into one
# archive, DIR/shard-gpu.tar.xz (default DIR: .gpu, which git ignores):
#   bin/shardrun, bin/shard-cuda-tests  the portable runtime: LLVM Support
#                                       linked in (build/portable,
#                                       SHARD_STATIC_LLVM_SUPPORT=ON)
#   lib/libshard-cuda.so                the CUDA plugin
#   lib/*.so*                           the libraries those link that such a
#                                       machine lacks (OpenBLAS, protobuf,
#                                       ONNX's proto, Open MPI, which a world
#                                       size 1 run loads but never starts)
#   plans/NAME-OPT                      every parity example compiled for one
#                                       rank by build/bin/shardc
# cuBLAS and NCCL come from the GPU machine's PyTorch packages.
#
#   scripts/gpu_bundle.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.gpu}
python=/usr/bin/python3
jobs=${SHARD_BUILD_JOBS:-2}

[ -x build/bin/shardc ] || { echo "gpu_bundle: build the compiler first (scripts/build.sh)" >&2; exit 1; }
if [ ! -f build/portable/build.ninja ]; then
  cmake -G Ninja -S . -B build/portable -DCMAKE_BUILD_TYPE=Release \
    -DSHARD_BUILD_COMPILER=OFF -DSHARD_STATIC_LLVM_SUPPORT=ON -DSHARD_CUDA=ON \
    -DSHARD_FUZZERS=OFF >/dev/null
fi
ninja -C build/portable -j"$jobs" shardrun shard-cuda shard-cuda-tests

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/plans"
cp build/portable/bin/shardrun build/portable/bin/shard-cuda-tests "$stage/bin/"
cp build/portable/lib/libshard-cuda.so "$stage/lib/"

# Every library the binaries load, except the C and C++ runtimes every Linux
# has and the CUDA libraries PyTorch brings.
for bin in "$stage/bin/shardrun" "$stage/bin/shard-cuda-tests" \
           "$stage/lib/libshard-cuda.so"; do
  ldd "$bin" | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|\
    libstdc++.so*|libgcc_s.so*|libcublas*|libcudnn*|libnccl*|libcuda.so*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done

while read -r ex opt extra; do
  flags=()
  for f in $extra; do flags+=("--shardc-stage-arg=$f"); done
  "$python" test/parity/check_parity.py --shardc build/bin/shardc \
    --example "examples/$ex" --optimizer "$opt" --compile-to "$stage/plans" \
    "${flags[@]}" >/dev/null
done < <(grep -v '^#' scripts/gpu_parity_cases.txt)

mkdir -p "$out"
tar -C "$stage" -cJf "$out/shard-gpu.tar.xz" bin lib plans
echo "gpu_bundle: $out/shard-gpu.tar.xz ($(du -h "$out/shard-gpu.tar.xz" | cut -f1))"
