#!/usr/bin/env bash
# The GPU check on the CPU with ThreadSanitizer watching the GPU kernels
# (--config=cuda_emulation_racecheck; docs/gpu.md, "Races"):
#   tools/gpu_check/racecheck.sh
# runs the emulation's own checks, then every case of the GPU check, in one
# process per core, each stopping at its first race (an access by one thread
# of a block that no barrier orders against another's) with ThreadSanitizer's
# report of both. The cases come from the plain emulation's op library:
# Python cannot load one built with ThreadSanitizer's code. Needs what
# --config=cuda needs (nvcc).
set -euo pipefail
cd "$(dirname "$0")/../.."
shards="$(nproc)"
cases="$(mktemp -d)"
trap 'rm -rf "${cases}"' EXIT
bazel run --config=cuda_emulation //tools/gpu_check:make_cases -- \
  "${cases}/cases.bin" --shards "${shards}"
bazel test --config=cuda_emulation_racecheck //tools/gpu_check/emulation:emulation_test
bazel build --config=cuda_emulation_racecheck //tools/gpu_check:gpu_check
for ((k = 0; k < shards; ++k)); do
  TSAN_OPTIONS=halt_on_error=1 bazel-bin/tools/gpu_check/gpu_check \
    "${cases}/cases.bin.${k}" >"${cases}/out.${k}" 2>&1 &
done
status=0
for ((k = 0; k < shards; ++k)); do
  wait -n || status=1
done
for ((k = 0; k < shards; ++k)); do
  echo "--- shard ${k} of ${shards}"
  grep -v '^PASS ' "${cases}/out.${k}"
done
exit "${status}"
