#!/usr/bin/env bash
# Builds the wheel into dist/ and smoke-tests it: set-up, `bazel build
# //:build_pip_pkg` (with --config=cuda, so with the GPU kernels, wherever
# nvcc is installed), then a new virtualenv (reusing the installed
# TensorFlow, no network) that runs ZeroOut from outside the repository.
# Extra arguments go to `bazel build`.
set -euo pipefail
cd "$(dirname "$0")/.."
root="${PWD}"
PYTHON="${PYTHON:-python3}"
tools/setup.sh
config=()
command -v nvcc >/dev/null && config=(--config=cuda)
bazel build "${config[@]}" "$@" //:build_pip_pkg
wheel="$(bazel-bin/build_pip_pkg "${root}/dist" | tail -n 1)"

smoke="$(mktemp -d)"
trap 'rm -rf "${smoke}"' EXIT
"${PYTHON}" -m venv --system-site-packages "${smoke}/venv"
"${smoke}/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  --no-index --no-deps "${wheel}"
(cd "${smoke}" && TF_CPP_MIN_LOG_LEVEL=2 "${smoke}/venv/bin/python" -c \
  "import tensorflow_customops as tfco; print(tfco.zero_out([[1, 2], [3, 4]]))")
echo "built ${wheel}"
