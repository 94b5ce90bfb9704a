#!/usr/bin/env bash
# Runs the GPU check on a machine with an NVIDIA GPU and no TensorFlow.
#
# Here (with TensorFlow, nvcc and Bazel):
#   tools/gpu_check/run_on_gpu_machine.sh prepare [DIR [CONFIG]]
# builds gpu_check under --config=CONFIG (cuda, the default: nvcc; cuda12:
# clang 16 and the CUDA 12.9 runtime, docs/gpu.md), writes the cases from the
# CPU kernels, and puts both, with this script and the comparisons
# (compare_on_gpu.py, compare/), in DIR (default .gpu_check, ignored by git;
# about 48 MB with nvcc). Carry DIR to the GPU machine (scp, or a device
# tool's carried paths), then there:
#   DIR/run_on_gpu_machine.sh run [OUT]
# runs every case (one line each, then "N passed, N failed"), the check of
# TfcoWhenStreamDone (gpu_check --stream-done, then with a device fault, in a
# process of its own), then the families' comparisons with other libraries' CUDA ops (compare/, each
# skipped where what it imports is missing), which compare results and time
# both. Logs and JSON go to OUT (default DIR/results). The exit status is
# gpu_check's on the cases, else 1 if the stream check failed.
set -uo pipefail

case "${1:-}" in
  prepare)
    set -e
    cd "$(dirname "$0")/../.."
    dir="${2:-.gpu_check}"
    config="${3:-cuda}"
    mkdir -p "${dir}"
    bazel build "--config=${config}" //tools/gpu_check:gpu_check
    bazel run "--config=${config}" //tools/gpu_check:make_cases -- "$(realpath "${dir}")/cases.bin"
    cp -f bazel-bin/tools/gpu_check/gpu_check tools/gpu_check/run_on_gpu_machine.sh \
      tools/gpu_check/case_file.py tools/gpu_check/compare_on_gpu.py "${dir}/"
    rm -rf "${dir}/compare"
    mkdir "${dir}/compare"
    cp tools/gpu_check/compare/*.py "${dir}/compare/"
    chmod -R u+w "${dir}"
    du -sh "${dir}"
    ;;
  run)
    dir="$(cd "$(dirname "$0")" && pwd)"
    out="${2:-${dir}/results}"
    mkdir -p "${out}"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
      | tee "${out}/device.txt"
    "${dir}/gpu_check" "${dir}/cases.bin" --outputs "${out}/gpu_outputs.bin" \
      2>&1 | tee "${out}/gpu_check.log"
    status=${PIPESTATUS[0]}
    for mode in "" fault; do
      # shellcheck disable=SC2086  # no argument when mode is empty
      "${dir}/gpu_check" --stream-done ${mode} 2>&1 | tee -a "${out}/stream_done.log"
      [[ ${PIPESTATUS[0]} == 0 || ${status} != 0 ]] || status=1
    done
    PYTHONUNBUFFERED=1 python3 "${dir}/compare_on_gpu.py" --dir "${dir}" --out "${out}" \
      2>&1 | tee "${out}/compare.log"
    exit "${status}"
    ;;
  *)
    echo "usage: $0 prepare [DIR [CONFIG]] | run [OUT]" >&2
    exit 2
    ;;
esac
