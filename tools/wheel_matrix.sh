#!/usr/bin/env bash
# Runs the built wheel's smoke (python -m tensorflow_customops.smoke) and the
# GraphDef compatibility tests (core/ops/compat: the spec history check and
# the golden replay) against each TensorFlow release, each in a virtualenv of
# its own with the newest Python that release supports and nothing but
# `pip install tensorflow==M.N.*`, the wheel, and hypothesis (which the
# compat tests' op registry uses); prints one table row per release.
#
#   tools/wheel_matrix.sh [WHEEL] [RELEASE[@PYTHON]...]
#
# (default: dist/'s newest wheel, every release; RELEASE@3.10 picks another
# Python than the newest). With BENCHMARKS="MODULE..." (modules of the
# repository, each by dotted path or by its file's name where that is unique)
# it also runs those benchmarks in each virtualenv and prints their tables.
#
# The virtualenvs are kept in ~/.cache/tensorflow_customops/venvs (or
# $TFCO_VENV_CACHE) and reused. An interpreter is found as pythonX.Y on PATH
# or under pyenv; a release whose Python is missing is reported, not run.
set -uo pipefail
cd "$(dirname "$0")/.."
root="${PWD}"
wheel="${1:-$(ls -t dist/tensorflow_customops-*.whl 2>/dev/null | head -n 1)}"
[[ $# -gt 0 ]] && shift
if [[ ! -f "${wheel}" ]]; then
  echo "usage: $0 [WHEEL] [RELEASE...]; build the wheel with tools/build_wheel.sh" >&2
  exit 2
fi
wheel="$(realpath "${wheel}")"
releases=("$@")
if ((${#releases[@]} == 0)); then
  read -ra releases <<<"$(python3 -c \
    "exec(open('third_party/tf/releases.bzl').read()); print(' '.join(TF_RELEASES))")"
fi
cache="${TFCO_VENV_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/tensorflow_customops/venvs}"
mkdir -p "${cache}"

# The newest CPython each release has wheels for.
newest_python() {
  case "$1" in
    2.12 | 2.13 | 2.14 | 2.15) echo 3.11 ;;
    2.16 | 2.17 | 2.18 | 2.19) echo 3.12 ;;
    *) echo 3.13 ;;
  esac
}

find_python() {
  local found
  # pyenv's shims are on PATH for every version, and fail for one that is not
  # selected: take a command only if it runs.
  found="$(command -v "python$1" 2>/dev/null)" && "${found}" -c "" 2>/dev/null &&
    echo "${found}" && return
  local pyenv
  for pyenv in "${PYENV_ROOT:-${HOME}/.pyenv}"/versions/"$1".*/bin/python"$1"; do
    [[ -x "${pyenv}" ]] && echo "${pyenv}" && return
  done
  return 1
}

# The compat tests and benchmarks import the installed package plus the
# repository's modules the wheel leaves out (every one that is not a test);
# the compat tests read the history and goldens from the repository.
compat_path() {
  local site="$1" overlay="$2"
  rm -rf "${overlay}" && mkdir -p "${overlay}"
  cp -r "${site}/tensorflow_customops" "${overlay}/"
  (cd "${root}" && git ls-files 'tensorflow_customops/*.py' | grep -v '_test.py$' |
    while read -r module; do
      [[ -e "${overlay}/${module}" ]] || cp --parents -t "${overlay}" "${module}"
    done)
}

# A BENCHMARKS word as a dotted module path: as given, or the one module of
# the repository with that file name.
benchmark_module() {
  [[ "$1" == *.* ]] && echo "$1" && return
  local paths
  mapfile -t paths < <(cd "${root}" && git ls-files "*/$1.py")
  if ((${#paths[@]} != 1)); then
    echo "BENCHMARKS: $1 names ${#paths[@]} modules of the repository, not one;" \
      "give its dotted path" >&2
    return 1
  fi
  local module="${paths[0]%.py}"
  echo "${module//\//.}"
}

failed=0
rows=()
for release in "${releases[@]}"; do
  version="${release#*@}"
  release="${release%@*}"
  [[ "${version}" == "${release}" ]] && version="$(newest_python "${release}")"
  if ! python="$(find_python "${version}")"; then
    rows+=("| ${release} | ${version} | - | Python ${version} not found | |")
    failed=$((failed + 1))
    continue
  fi
  venv="${cache}/tf${release}-py${version}"
  if [[ ! -x "${venv}/bin/python" ]] || ! "${venv}/bin/python" -c "import tensorflow" 2>/dev/null; then
    rm -rf "${venv}"
    "${python}" -m venv "${venv}" &&
      "${venv}/bin/pip" install --quiet --disable-pip-version-check "tensorflow==${release}.*" ||
      { rows+=("| ${release} | ${version} | - | pip install tensorflow failed | |"); failed=$((failed + 1)); continue; }
  fi
  "${venv}/bin/pip" install --quiet --disable-pip-version-check \
    "$(grep '^hypothesis==' tools/requirements.txt)"
  # The op registry the compat tests read imports ml_dtypes, which TensorFlow
  # depends on only from 2.14; installed beside 2.12 and 2.13 with their numpy
  # pinned, so that TensorFlow keeps the numpy it was installed with.
  if ! "${venv}/bin/python" -c "import ml_dtypes" 2>/dev/null; then
    "${venv}/bin/pip" install --quiet --disable-pip-version-check ml_dtypes \
      "numpy==$("${venv}/bin/python" -c 'import numpy; print(numpy.__version__)')"
  fi
  "${venv}/bin/pip" install --quiet --disable-pip-version-check --no-deps --force-reinstall "${wheel}"
  tf_version="$("${venv}/bin/python" -c "import tensorflow as tf; print(tf.__version__)" 2>/dev/null)"
  log="${cache}/tf${release}-py${version}.log"
  (cd "${cache}" && TF_CPP_MIN_LOG_LEVEL=2 "${venv}/bin/python" \
    -m tensorflow_customops.smoke) >"${log}" 2>&1
  status=$?
  summary="$(tail -n 1 "${log}")"
  echo "=== TensorFlow ${tf_version} on Python ${version}: ${summary} (log: ${log})"
  ((status == 0)) || { failed=$((failed + 1)); grep -E "^FAIL" "${log}" | head -n 20; }
  site="$("${venv}/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")"
  compat_path "${site}" "${cache}/compat-tf${release}"
  compat="passed"
  for test in old_spec_test golden_replay_test; do
    if ! PYTHONPATH="${cache}/compat-tf${release}" TF_CPP_MIN_LOG_LEVEL=2 "${venv}/bin/python" \
      "tensorflow_customops/core/ops/compat/${test}.py" >>"${log}" 2>&1; then
      compat="${test} failed"
      failed=$((failed + 1))
      echo "=== ${test} failed on TensorFlow ${tf_version} (log: ${log})"
    fi
  done
  if [[ -n "${BENCHMARKS:-}" ]]; then
    for benchmark in ${BENCHMARKS}; do
      if ! module="$(benchmark_module "${benchmark}")"; then
        failed=$((failed + 1))
        continue
      fi
      out="${cache}/tf${release}-py${version}-${module##*.}.txt"
      echo "=== ${module} on TensorFlow ${tf_version} (log: ${out})"
      (cd "${cache}" && PYTHONPATH="${cache}/compat-tf${release}" TF_CPP_MIN_LOG_LEVEL=2 \
        "${venv}/bin/python" -m "${module}") \
        >"${out}" 2>&1 || failed=$((failed + 1))
      grep -v "^losses" "${out}" | tail -n 12
    done
  fi
  rows+=("| ${release} | $("${venv}/bin/python" -c 'import platform; print(platform.python_version())') | ${tf_version} | ${summary} | ${compat} |")
done
echo
echo "| release | Python | TensorFlow | smoke | compat tests |"
echo "| --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
((failed == 0))
