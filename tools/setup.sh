#!/usr/bin/env bash
# Prepares a fresh Debian machine to build and test tensorflow_customops, and
# is safe to run again: Debian's Bazel and clang-format, the pinned Python
# packages (TensorFlow only if none is installed), then tools/configure.py.
# Set PYTHON to use another interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"

missing=()
command -v bazel >/dev/null || missing+=(bazel-bootstrap)
command -v clang-format >/dev/null || missing+=(clang-format)
command -v readelf >/dev/null || missing+=(binutils)
if ((${#missing[@]})); then
  sudo=()
  [[ "$(id -u)" == 0 ]] || sudo=(sudo)
  echo "setup: installing ${missing[*]} with apt-get" >&2
  "${sudo[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q \
    --no-install-recommends "${missing[@]}"
fi

# TensorFlow: the pinned release only where none is installed. An installed
# one (another supported release, tensorflow-cpu) is what the library is then
# built for, and stays.
pip_install=("${PYTHON}" -m pip install --quiet --disable-pip-version-check)
if ! "${PYTHON}" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('tensorflow') is None)"; then
  "${pip_install[@]}" "$(grep '^tensorflow==' tools/requirements.txt)"
fi
"${pip_install[@]}" -r <(grep -v '^tensorflow==' tools/requirements.txt)
"${PYTHON}" tools/configure.py
