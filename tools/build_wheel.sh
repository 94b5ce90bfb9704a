#!/usr/bin/env bash
# Builds the wheel into dist/ and smoke-tests it with the installed
# TensorFlow.
#
#   tools/build_wheel.sh [--installed-only | --releases 2.12,2.16,...] [--cuda 12]
#                        [BAZEL_ARGS...]
#
# By default the wheel carries a glue for every release in
# third_party/tf/releases.bzl: set-up (which keeps an installed TensorFlow),
# tools/fetch_tf_headers.py (downloads each release's headers once, into a
# cache), `bazel build //:build_pip_pkg` (with --config=cuda, so with the GPU
# kernels, wherever nvcc is installed), then the wheel's own smoke,
# `python -m tensorflow_customops.smoke`, on the installed wheel, from outside
# the repository. --installed-only builds for the installed TensorFlow alone
# (the fast developer loop, and the way to build for a TensorFlow no wheel
# supports); --releases picks the other releases. Set PYTHON to build for
# another environment's TensorFlow (tools/setup.sh says which interpreter is
# used otherwise). --cuda 12 builds the GPU kernels by the CUDA 12 route
# instead of nvcc (--config=cuda12: clang 16 and the CUDA 12.9 runtime, for
# drivers from 525.60.13; docs/gpu.md).
set -euo pipefail
cd "$(dirname "$0")/.."
root="${PWD}"
releases=all
cuda=nvcc
while (($#)); do
  case "$1" in
    --installed-only) releases=""; shift ;;
    --releases) releases="$2"; shift 2 ;;
    --cuda)
      [[ "${2:-}" == 12 ]] || { echo "build_wheel: --cuda takes 12" >&2; exit 2; }
      cuda=12
      shift 2
      ;;
    *) break ;;
  esac
done
tools/setup.sh
# The interpreter set-up chose (PYTHON, python3, or the virtualenv it made).
PYTHON="$(sed -n 's/^build --action_env=PYTHON_BIN_PATH=//p' .tf_configure.bazelrc)"
installed="$(sed -n 's/^build --repo_env=TF_VERSION=\([0-9]*\.[0-9]*\).*/\1/p' .tf_configure.bazelrc)"
others=()
if [[ -n "${releases}" ]]; then
  "${PYTHON}" tools/fetch_tf_headers.py ${releases//,/ }
  [[ "${releases}" == all ]] && releases="$("${PYTHON}" -c \
    "exec(open('third_party/tf/releases.bzl').read()); print(','.join(TF_RELEASES))")"
  for release in ${releases//,/ }; do
    [[ "${release}" == "${installed}" ]] || others+=("${release}")
  done
fi
config=()
command -v nvcc >/dev/null && config=(--config=cuda)
if [[ "${cuda}" == 12 ]]; then
  grep -q '^build --repo_env=CLANG_CUDA_PATH=' .tf_configure.bazelrc || {
    echo "build_wheel: --cuda 12 needs clang 16 and the CUDA 12 wheels, which" \
      "tools/setup.sh installs beside nvcc (docs/gpu.md)" >&2
    exit 1
  }
  config=(--config=cuda12)
fi
wheel_releases="$(IFS=,; echo "${others[*]}")"
bazel build "${config[@]}" "--//third_party/tf:wheel_releases=${wheel_releases}" "$@" \
  //:build_pip_pkg
wheel="$(bazel-bin/build_pip_pkg "${root}/dist" | tail -n 1)"

# The smoke runs with the same Python and TensorFlow the wheel was built for:
# the wheel goes into a scratch folder put first on that Python's path.
smoke="$(mktemp -d)"
trap 'rm -rf "${smoke}"' EXIT
"${PYTHON}" -m pip install --quiet --disable-pip-version-check --no-index \
  --no-deps --target "${smoke}/site" "${wheel}"
(cd "${smoke}" && PYTHONPATH="${smoke}/site" TF_CPP_MIN_LOG_LEVEL=2 \
  "${PYTHON}" -m tensorflow_customops.smoke)
echo "built ${wheel} (TensorFlow ${installed}${wheel_releases:+,${wheel_releases}})"
