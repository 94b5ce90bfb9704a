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
echo "lint: clean"
