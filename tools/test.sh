#!/usr/bin/env bash
# Runs the whole test suite from a fresh machine: set-up, then `bazel test //...`.
# Extra arguments go to `bazel test` (e.g. --config=asan, a target pattern).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
targets=()
[[ " $* " == *" //"* ]] || targets=(//...)
bazel test "$@" "${targets[@]}"
