#!/usr/bin/env bash
# Prepares a fresh Debian machine to build and test tensorflow_customops, and
# is safe to run again: Debian's Bazel and clang-format, the pinned Python
# packages (TensorFlow only if none is installed), where nvcc is installed the
# CUDA 12 route's clang 16 and CUDA 12 wheels (docs/gpu.md; TFCO_CUDA12=0
# leaves them out), then tools/configure.py, which records the interpreter
# for Bazel and the other scripts.
# Set PYTHON to use another interpreter. Without it, python3 is used unless
# it is a distribution's Python that refuses pip installs (PEP 668, as on
# Debian 12): then a virtualenv, .venv in the repository, is made and used.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${PYTHON:-}" ]]; then
  PYTHON=python3
  if [[ -x .venv/bin/python ]]; then
    PYTHON="${PWD}/.venv/bin/python"
  elif python3 -c "import os, sys, sysconfig; sys.exit(not (sys.prefix == sys.base_prefix and
      os.path.exists(os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED'))))"; then
    python3 -m venv .venv 2>/dev/null || {
      echo "setup: python3 is externally managed and cannot make a virtualenv:" \
        "install python3-venv (apt-get install python3-venv), or set PYTHON" >&2
      exit 1
    }
    PYTHON="${PWD}/.venv/bin/python"
  fi
fi

missing=()
command -v bazel >/dev/null || missing+=(bazel-bootstrap)
command -v clang-format >/dev/null || missing+=(clang-format)
command -v readelf >/dev/null || missing+=(binutils)
# The CUDA 12 route compiles with clang 16 and packs with the nvcc toolkit's
# fatbinary, so it is set up only beside nvcc.
cuda12=0
[[ "${TFCO_CUDA12:-1}" != 0 ]] && command -v nvcc >/dev/null && cuda12=1
sudo=()
[[ "$(id -u)" == 0 ]] || sudo=(sudo)
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]} with apt-get" >&2
  "${sudo[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q \
    --no-install-recommends "${missing[@]}"
fi

# clang-16 is Debian 12's; elsewhere the CUDA 12 route is left out
# (tools/configure.py then records none, and --config=cuda12 says so).
if ((cuda12)) && ! command -v clang-16 >/dev/null; then
  if ! command -v apt-get >/dev/null ||
    ! { "${sudo[@]}" apt-get update -q &&
      DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q \
        --no-install-recommends clang-16; }; then
    echo "setup: clang-16 could not be installed: the CUDA 12 route is left out" >&2
    cuda12=0
  fi
fi

# TensorFlow: the pinned release only where none is installed. An installed
# one (another supported release, tensorflow-cpu) is what the library is then
# built for, and stays.
pip_install=("${PYTHON}" -m pip install --quiet --disable-pip-version-check)
if ! "${PYTHON}" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('tensorflow') is None)"; then
  "${pip_install[@]}" "$(grep '^tensorflow==' tools/requirements.txt)"
fi
"${pip_install[@]}" -r <(grep -v '^tensorflow==' tools/requirements.txt)
# The CUDA 12 wheels go into a folder of their own, not the environment
# (tools/configure.py finds them there); they are installed again only when a
# pin changes.
if ((cuda12)); then
  cuda12_site="${TFCO_CUDA12_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/tensorflow_customops/cuda12}/site"
  stale=0
  while read -r pin; do
    name="${pin%%==*}"
    [[ -d "${cuda12_site}/${name//-/_}-${pin#*==}.dist-info" ]] || stale=1
  done < <(grep '==' tools/requirements-cuda12.txt)
  if ((stale)); then
    rm -rf "${cuda12_site}"
    "${pip_install[@]}" --no-deps --target "${cuda12_site}" -r tools/requirements-cuda12.txt
  fi
fi
"${PYTHON}" tools/configure.py
