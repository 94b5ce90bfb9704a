#!/usr/bin/env bash
# Builds the wheel into dist/ for the installed TensorFlow and smoke-tests it:
# set-up (which keeps an installed TensorFlow), `bazel build //:build_pip_pkg`
# (with --config=cuda, so with the GPU kernels, wherever nvcc is installed),
# then tools/pip_package/wheel_smoke.py on the installed wheel, from outside
# the repository. Set PYTHON to build for another environment's TensorFlow;
# extra arguments go to `bazel build`.
set -euo pipefail
cd "$(dirname "$0")/.."
root="${PWD}"
PYTHON="${PYTHON:-python3}"
tools/setup.sh
config=()
command -v nvcc >/dev/null && config=(--config=cuda)
bazel build "${config[@]}" "$@" //:build_pip_pkg
wheel="$(bazel-bin/build_pip_pkg "${root}/dist" | tail -n 1)"

# The smoke runs with the same Python and TensorFlow the wheel was built for:
# the wheel goes into a scratch folder put first on that Python's path.
smoke="$(mktemp -d)"
trap 'rm -rf "${smoke}"' EXIT
"${PYTHON}" -m pip install --quiet --disable-pip-version-check --no-index \
  --no-deps --target "${smoke}/site" "${wheel}"
(cd "${smoke}" && PYTHONPATH="${smoke}/site" TF_CPP_MIN_LOG_LEVEL=2 \
  "${PYTHON}" "${root}/tools/pip_package/wheel_smoke.py")
echo "built ${wheel}"
