#!/usr/bin/env bash
# Runs the whole test suite from a fresh machine: set-up, then `bazel test //...`.
# Extra arguments go to `bazel test` (e.g. --config=asan, a target pattern).
# Where nvcc is installed and no --config is given, the tests run on the
# --config=cuda build, the library tools/build_wheel.sh ships: GPU kernels
# compiled, and registered only where a GPU and its driver can run them.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
config=()
[[ " $* " != *" --config"* ]] && command -v nvcc >/dev/null && config=(--config=cuda)
targets=()
[[ " $* " == *" //"* ]] || targets=(//...)
bazel test "${config[@]}" "$@" "${targets[@]}"
