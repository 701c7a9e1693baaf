#!/usr/bin/env bash
# Builds llama-cpp-python's wheel for this CPU from its source release, with this project's patches
# (patches/llama.cpp/*.patch, applied in name order to the llama.cpp it vendors), into OUT_DIR.
#
#   scripts/build-llama-cpp-wheel.sh PYTHON SPEC OUT_DIR
#
# SPEC is a pip requirement (llama-cpp-python==0.3.36); CMAKE_ARGS from the environment go to its build.
# The Makefile calls this once per CPU flag set and patch set (the folder it gives is named for both)
# and installs from OUT_DIR; deploy/docker/Dockerfile.cpu calls it for the image.
set -euo pipefail

python=${1:?usage: build-llama-cpp-wheel.sh PYTHON SPEC OUT_DIR}
spec=${2:?usage: build-llama-cpp-wheel.sh PYTHON SPEC OUT_DIR}
out=${3:?usage: build-llama-cpp-wheel.sh PYTHON SPEC OUT_DIR}
patches=$(cd "$(dirname "$0")/../patches/llama.cpp" && pwd)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m pip download -q --no-deps --no-binary :all: -d "$work" "$spec"
tar xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
source=$(echo "$work"/llama_cpp_python-*/)
for patch in "$patches"/*.patch; do
    echo "applying $(basename "$patch") to the vendored llama.cpp"
    patch --batch --forward --silent -p1 -d "$source/vendor/llama.cpp" < "$patch"
done
mkdir -p "$out"
CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_OPENMP=OFF ${CMAKE_ARGS:-}" \
    "$python" -m pip wheel -q --no-cache-dir --no-deps -w "$out" "$source"
