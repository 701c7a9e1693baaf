#!/usr/bin/env bash
# GPU check: the server on one NVIDIA GPU with nothing downloaded. The bundle (`make gpu-bundle`: wheels for what the
# server needs beyond the GPU image's packages) is installed with no index into a folder of its own, then
# benchmarks/gpu_check.py builds random-weight models of the catalog's main shapes and checks precision, residency,
# memory accounting, LRU eviction and speed (docs/deploy/gpu.md, "GPU check"). Results (JSON + a Markdown table) go
# to the folder given as the last argument, else $OUT, else ./gpu-check-results; the table is printed last.
#
#   scripts/gpu-check.sh [--cpu] [OUT_DIR]
#
#   --cpu           every step on the CPU at small sizes (the dry run: tests/deploy/test_gpu_dry_run.py)
#
# Environment:
#   SIE_GPU_PYTHON  the Python with torch and transformers (default: python3, the GPU image's own)
#   SIE_GPU_BUNDLE  the folder of wheels (default: .gpu-bundle beside this script's repository)
#   SIE_GPU_SITE    where the wheels are installed (default: a new temporary folder)
#   SIE_GPU_LIMIT_S the check's own time limit in seconds (default 330: it ends inside the device's 6 minutes)
#
# Without --cpu, on a machine with no NVIDIA GPU it says so in one line and exits 2, before installing anything.
#
# On the lent GPU machine (the device tool's `run`; docs/deploy/gpu.md, "GPU check"), after `make gpu-bundle` here:
#   command:   set -o pipefail; scripts/gpu-check.sh "$OUT" 2>&1 | tee $OUT/console.log; s=$?; python3 -m benchmarks.gpu_launch 2>&1 | tee $OUT/launch.md; exit $s
#   carry:     [".gpu-bundle"]
#   timeout_s: 420
# then read gpu-check.md (the table for benchmarks/RESULTS.md), gpu-check.json, server.log, console.log and
# launch.md (benchmarks.gpu_launch: the host's costs, and the decode step with cuDNN attention on and off) back.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STARTED=$(date +%s)
CPU=0
if [[ "${1:-}" == "--cpu" ]]; then
    CPU=1
    shift
fi
OUT_DIR=${1:-${OUT:-./gpu-check-results}}
PY=${SIE_GPU_PYTHON:-python3}
BUNDLE=${SIE_GPU_BUNDLE:-$ROOT/.gpu-bundle}
LIMIT_S=${SIE_GPU_LIMIT_S:-330}

step() {  # step NAME: print the time since the start, then the step's name
    echo "[gpu-check +$(( $(date +%s) - STARTED ))s] $1"
}

# 1. the GPU, before anything else
if (( ! CPU )); then
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! timeout 20 nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
        echo "no NVIDIA GPU found (nvidia-smi missing or no device): this check needs one (or --cpu)" >&2
        exit 2
    fi
    step "1/3 GPU"
    timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
fi

# 2. the bundle, with no index and no dependencies resolved: the image provides the rest
step "2/3 install the bundle from $BUNDLE"
if ! compgen -G "$BUNDLE/*.whl" >/dev/null; then
    echo "no wheels in $BUNDLE: run \`make gpu-bundle\` on a machine with network first" >&2
    exit 2
fi
SITE=${SIE_GPU_SITE:-$(mktemp -d /tmp/sie-gpu-site.XXXXXX)}
"$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target "$SITE" "$BUNDLE"/*.whl
"$PY" -c 'import sys, torch, transformers; print(f"python {sys.version.split()[0]}, torch {torch.__version__} (CUDA {torch.version.cuda}), transformers {transformers.__version__}")'

# 3. the check (it stops starting steps before its limit, and writes its results either way)
step "3/3 check"
mkdir -p "$OUT_DIR"
export PYTHONPATH="$SITE:$ROOT/server:$ROOT/sdk:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error HF_HUB_DISABLE_PROGRESS_BARS=1 TOKENIZERS_PARALLELISM=false
ARGS=(--out "$OUT_DIR")
(( CPU )) && ARGS+=(--cpu)
status=0
(cd "$ROOT" && PYTHONUNBUFFERED=1 timeout "$LIMIT_S" "$PY" -m benchmarks.gpu_check "${ARGS[@]}") || status=$?
step "done (exit $status): results in $OUT_DIR" >&2  # stdout ends with the table
exit "$status"
