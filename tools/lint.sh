#!/usr/bin/env bash
# Checks style without changing files: ruff (lint and format) for Python,
# clang-format (Google style) for C++ and CUDA. `tools/lint.sh --fix` rewrites.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
mapfile -t cc_files < <(git ls-files '*.cc' '*.h')
if [[ "${1:-}" == "--fix" ]]; then
  "${PYTHON}" -m ruff format .
  "${PYTHON}" -m ruff check --fix .
  clang-format -i "${cc_files[@]}"
else
  "${PYTHON}" -m ruff check .
  "${PYTHON}" -m ruff format --check .
  clang-format --dry-run --Werror "${cc_files[@]}"
fi
# OpKernels register through TFCO_REGISTER_KERNEL_BUILDER (register_kernel.h),
# which leaves out GPU kernels the machine cannot run (docs/gpu.md).
if git grep -nE '(^|[^_])REGISTER_KERNEL_BUILDER\(' -- '*.cc' '*.h' '*.tmpl' \
  ':!tensorflow_customops/core/kernels/glue/register_kernel.h'; then
  echo "lint: register OpKernels with TFCO_REGISTER_KERNEL_BUILDER" >&2
  exit 1
fi
echo "lint: clean"
