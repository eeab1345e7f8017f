#!/usr/bin/env bash
# Makes bench/.peers, the virtual environment of bench/step_time.py's peer columns: PyTorch 2.x
# (FSDP FULL_SHARD and SHARD_GRAD_OP) and FairScale (FullyShardedDataParallel), from PyPI, on the
# system python3. Idempotent: a bench/.peers that already imports the pinned versions is kept.
set -euo pipefail

TORCH_VERSION=2.5.1       # wheels for CPython 3.9-3.13
FAIRSCALE_VERSION=0.4.13  # the last release (2022-12); sdist, pure Python
NUMPY_VERSION=1.26.4
CPU_INDEX=https://download.pytorch.org/whl/cpu
PYTHON=/usr/bin/python3

usage() {
  cat <<EOF
Usage: bash bench/setup_peers.sh [--force] [--help]

Creates the virtual environment bench/.peers from PyPI on $PYTHON with
  torch==$TORCH_VERSION (the CPU build from $CPU_INDEX;
                if that index cannot be reached, PyPI's build, which also runs on the CPU),
  fairscale==$FAIRSCALE_VERSION, numpy==$NUMPY_VERSION,
so that bench/step_time.py adds its PyTorch FSDP and FairScale columns. Several GB are
downloaded when the CPU index cannot be reached (PyPI's torch brings CUDA libraries).

If bench/.peers/bin/python3 already imports these versions, nothing is done. The environment
is built in bench/.peers.new and renamed to bench/.peers only once it imports them, so a failed
or interrupted run leaves no half-made bench/.peers.

  --force   rebuild even if bench/.peers is complete
  --help    print this and exit
EOF
}

force=0
for a in "$@"; do
  case "$a" in
    -h|--help) usage; exit 0 ;;
    --force) force=1 ;;
    *) echo "setup_peers: unknown argument '$a'" >&2; usage >&2; exit 2 ;;
  esac
done

say() { echo "setup_peers: $*"; }
die() { echo "setup_peers: error: $*" >&2; exit 1; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DEST="$HERE/.peers"
TMP="$HERE/.peers.new"

# Prints nothing and succeeds when $1/bin/python3 imports the pinned torch and fairscale.
check_env() {
  [ -x "$1/bin/python3" ] || return 1
  "$1/bin/python3" - "$TORCH_VERSION" "$FAIRSCALE_VERSION" <<'EOF' 2>/dev/null
import sys
import warnings
warnings.simplefilter("ignore")
import fairscale
import numpy
import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy  # noqa: F401
from fairscale.nn import FullyShardedDataParallel as FairScaleFSDP  # noqa: F401
ok = (torch.__version__.split("+")[0] == sys.argv[1] and fairscale.__version__ == sys.argv[2]
      and dist.is_available() and dist.is_gloo_available())
sys.exit(0 if ok else 1)
EOF
}

# Prints the versions $1/bin/python3 imports, or its import error.
versions() {
  "$1/bin/python3" -W ignore -c 'import torch, fairscale, numpy
print("torch", torch.__version__, "| fairscale", fairscale.__version__,
      "| numpy", numpy.__version__)'
}

if [ "$force" = 0 ] && check_env "$DEST"; then
  say "$DEST is complete ($(versions "$DEST")); nothing to do"
  exit 0
fi
if [ "$force" = 1 ]; then
  say "--force: building a new environment"
elif [ -e "$DEST" ]; then
  say "$DEST does not import torch $TORCH_VERSION and fairscale $FAIRSCALE_VERSION;" \
    "building a new one to replace it"
else
  say "$DEST not found; building it"
fi

[ -x "$PYTHON" ] || die "$PYTHON not found (Debian: apt-get install python3)"
say "$PYTHON is Python $("$PYTHON" -c 'import platform; print(platform.python_version())')"
"$PYTHON" -c 'import sys; sys.exit(0 if (3, 9) <= sys.version_info[:2] <= (3, 13) else 1)' ||
  die "torch $TORCH_VERSION has wheels for Python 3.9-3.13 only; change TORCH_VERSION in $0"

# Debian's python3 has the venv module but not ensurepip without python3-venv.
if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
  if [ "$(id -u)" -eq 0 ]; then
    say "the venv module is missing; installing Debian's python3-venv"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q || die "apt-get update failed"
    apt-get install -y -q --no-install-recommends python3-venv ||
      die "apt-get install python3-venv failed"
    "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null ||
      die "the venv module is still missing after installing python3-venv"
  else
    die "the venv module of $PYTHON is missing: run 'sudo apt-get install python3-venv'" \
      "(Debian), then this script again"
  fi
fi

# On failure, remove the half-made environment, and a bench/.peers that does not work either
# (step_time.py would take it for a working one).
cleanup() {
  local rc=$?
  if [ -e "$TMP" ]; then rm -rf "$TMP"; fi
  if [ "$rc" -ne 0 ] && [ -e "$DEST" ] && ! check_env "$DEST"; then
    echo "setup_peers: removing the incomplete $DEST" >&2
    rm -rf "$DEST"
  fi
}
trap 'cleanup' EXIT
trap 'echo "setup_peers: interrupted" >&2; exit 130' INT TERM

if [ -e "$TMP" ]; then
  say "removing $TMP left by an earlier run"
  rm -rf "$TMP"
fi
say "creating the virtual environment in $TMP"
"$PYTHON" -m venv "$TMP" || die "'$PYTHON -m venv $TMP' failed"
PIP=("$TMP/bin/python3" -m pip --disable-pip-version-check)

say "installing torch==$TORCH_VERSION from $CPU_INDEX"
if ! "${PIP[@]}" install --retries 1 --timeout 30 --index-url "$CPU_INDEX" \
    "torch==$TORCH_VERSION"; then
  say "the CPU index failed; installing torch==$TORCH_VERSION from PyPI instead (its Linux" \
    "build brings CUDA libraries: several GB; it runs on the CPU all the same)"
  "${PIP[@]}" install "torch==$TORCH_VERSION" ||
    die "could not install torch==$TORCH_VERSION from PyPI"
fi

say "installing fairscale==$FAIRSCALE_VERSION and numpy==$NUMPY_VERSION from PyPI"
"${PIP[@]}" install "fairscale==$FAIRSCALE_VERSION" "numpy==$NUMPY_VERSION" ||
  die "could not install fairscale==$FAIRSCALE_VERSION numpy==$NUMPY_VERSION"

say "checking that the new environment imports them"
if ! check_env "$TMP"; then
  versions "$TMP" >&2 || true
  die "the new environment does not import torch $TORCH_VERSION and fairscale" \
    "$FAIRSCALE_VERSION with gloo"
fi

# A virtual environment records its own path in bin/activate* and the scripts' #! lines;
# point them at the final path before the rename.
grep -rlF "$TMP" "$TMP/bin" "$TMP/pyvenv.cfg" | while read -r f; do
  sed -i "s|$TMP|$DEST|g" "$f"
done
if [ -e "$DEST" ]; then
  say "replacing the old $DEST"
  rm -rf "$DEST"
fi
mv "$TMP" "$DEST"
check_env "$DEST" || die "$DEST does not import torch and fairscale after the rename"
say "done: $DEST ($(versions "$DEST"))"
