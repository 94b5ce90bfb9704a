#!/usr/bin/env bash
# Runs the GPU check on a machine with an NVIDIA GPU and no TensorFlow.
#
# Here (with TensorFlow, nvcc and Bazel):
#   tools/gpu_check/run_on_gpu_machine.sh prepare [DIR [CONFIG [NAME=REF[,CONFIG] ...]]]
# builds gpu_check under --config=CONFIG (cuda, the default: nvcc; cuda12:
# clang 16 and the CUDA 12.9 runtime, docs/gpu.md), writes the cases from the
# CPU kernels, and puts both, xz-compressed, with this script and the
# comparisons (compare_on_gpu.py, compare/), in DIR (default .gpu_check,
# ignored by git). Each NAME=REF is a variant to time beside it: gpu_check
# built from git revision REF, under CONFIG or the variant's own
# (HEAD,cuda12: clang's code against nvcc's), in a worktree and a Bazel
# output base of its own, both removed after (a disk cache in ~/.bazelrc
# saves compiling what the revisions share), put in DIR/variants/NAME (a few
# MB). Carry DIR to the GPU machine (scp, or a device tool's carried paths,
# at most 64 MiB there), then there:
#   DIR/run_on_gpu_machine.sh run [OUT]
# unpacks DIR and runs every case (one line each, then "N passed, N
# failed"), the check of TfcoWhenStreamDone (gpu_check --stream-done, then
# with a device fault, in a process of its own), every case again with each
# variant's gpu_check, then the families' comparisons with other libraries'
# CUDA ops (compare/, each skipped where what it imports is missing), which
# compare results and time both, and the variants beside this build, and,
# where Nsight Compute is installed, each build's kernel times on the
# benchmark cases (OUT/kernels). Logs and JSON go to OUT (default
# DIR/results). The exit status is gpu_check's on the cases, else 1 if the
# stream check failed; a variant's failures are in its log and the summary.
set -uo pipefail

case "${1:-}" in
  prepare)
    set -e
    cd "$(dirname "$0")/../.."
    dir="${2:-.gpu_check}"
    config="${3:-cuda}"
    variants=()
    for variant in "${@:4}"; do
      name="${variant%%=*}"
      ref="${variant#*=}"
      variant_config="${config}"
      if [[ "${ref}" == *,* ]]; then
        variant_config="${ref##*,}"
        ref="${ref%,*}"
      fi
      if [[ "${variant}" != *=* || ! "${name}" =~ ^[A-Za-z0-9._-]+$ || -z "${ref}" ]] ||
        ! git rev-parse --verify --quiet "${ref}^{commit}" >/dev/null; then
        echo "prepare: a variant is NAME=REF[,CONFIG], NAME of letters, digits, . _ -" \
          "and REF a git revision: ${variant}" >&2
        exit 2
      fi
      variants+=("${name} ${ref} ${variant_config}")
    done
    mkdir -p "${dir}"
    bazel build "--config=${config}" //tools/gpu_check:gpu_check
    rm -f "${dir}/cases.bin" "${dir}/gpu_check"
    bazel run "--config=${config}" //tools/gpu_check:make_cases -- "$(realpath "${dir}")/cases.bin"
    xz -T0 -f "${dir}/cases.bin"
    xz -T0 -c bazel-bin/tools/gpu_check/gpu_check >"${dir}/gpu_check.xz"
    cp -f tools/gpu_check/run_on_gpu_machine.sh tools/gpu_check/case_file.py \
      tools/gpu_check/compare_on_gpu.py "${dir}/"
    rm -rf "${dir}/compare"
    mkdir "${dir}/compare"
    cp tools/gpu_check/compare/*.py "${dir}/compare/"
    chmod -R u+w "${dir}"
    rm -rf "${dir}/variants"
    remove_tree() {
      (cd "${tree}/src" && bazel --output_base="${tree}/bazel" shutdown) || true
      git worktree remove --force "${tree}/src" || true
      chmod -R u+w "${tree}" && rm -rf "${tree}"
    }
    for variant in "${variants[@]}"; do
      IFS=' ' read -r name ref variant_config <<<"${variant}"
      tree="$(mktemp -d)"
      trap remove_tree EXIT
      git worktree add --detach "${tree}/src" "${ref}"
      cp .tf_configure.bazelrc "${tree}/src/"
      (cd "${tree}/src" &&
        bazel --output_base="${tree}/bazel" build "--config=${variant_config}" \
          //tools/gpu_check:gpu_check)
      mkdir -p "${dir}/variants/${name}"
      xz -T0 -c "${tree}/src/bazel-bin/tools/gpu_check/gpu_check" >"${dir}/variants/${name}/gpu_check.xz"
      remove_tree
      trap - EXIT
    done
    du -sh "${dir}"
    ;;
  run)
    dir="$(cd "$(dirname "$0")" && pwd)"
    out="${2:-${dir}/results}"
    mkdir -p "${out}"
    # What prepare compressed, unpacked with Python's lzma: the GPU machine
    # may have no xz.
    for packed in "${dir}"/*.xz "${dir}"/variants/*/gpu_check.xz; do
      [[ -f "${packed}" ]] || continue
      python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
        "${packed}" "${packed%.xz}"
      [[ "${packed}" != *.bin.xz ]] && chmod +x "${packed%.xz}"
    done
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
    for variant in "${dir}"/variants/*/; do
      [[ -f "${variant}gpu_check" ]] || continue
      name="$(basename "${variant}")"
      mkdir -p "${out}/variants/${name}"
      "${variant}gpu_check" "${dir}/cases.bin" >"${out}/variants/${name}/gpu_check.log" 2>&1
      echo "variant ${name}: $(tail -n 1 "${out}/variants/${name}/gpu_check.log")" \
        | tee -a "${out}/variants.txt"
    done
    PYTHONUNBUFFERED=1 python3 "${dir}/compare_on_gpu.py" --dir "${dir}" --out "${out}" \
      2>&1 | tee "${out}/compare.log"
    # Each kernel's time on the benchmark cases, by build, where Nsight
    # Compute is installed (each kernel run alone; one forward and one
    # forward+backward per case after the warm-up calls): which kernel of a
    # pass to work on next.
    ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
    if [[ ! -x "${ncu}" || ! -f "${out}/bench_cases.bin" ]]; then
      echo "kernel times: skipped (no ncu, or no benchmark cases)"
    else
      mkdir -p "${out}/kernels"
      for build in "${dir}/gpu_check" "${dir}"/variants/*/gpu_check; do
        [[ -x "${build}" ]] || continue
        name="$(basename "$(dirname "${build}")")"
        [[ "${build}" == "${dir}/gpu_check" ]] && name=main
        # Bounded, so that a slow profile cannot use up a lent machine's time.
        timeout 120 "${ncu}" --metrics=gpu__time_duration.sum --clock-control=none \
          --cache-control=none --print-summary=per-kernel "${build}" \
          --bench "${out}/bench_cases.bin" --repeats 1 >"${out}/kernels/${name}.txt" 2>&1
        echo "kernel times of ${name}: exit $? (124: over 120 s), ${out}/kernels/${name}.txt"
      done
    fi
    exit "${status}"
    ;;
  *)
    echo "usage: $0 prepare [DIR [CONFIG [NAME=REF[,CONFIG] ...]]] | run [OUT]" >&2
    exit 2
    ;;
esac
