"""Writes the GPU check's cases (cases/, one module per op family): inputs,
and the outputs the CPU kernels give.

    bazel run //tools/gpu_check:make_cases -- OUT_FILE [--shards N]

With --shards, the cases are dealt to OUT_FILE.0 to OUT_FILE.N-1 back and
forth (0 to N-1, then N-1 to 0), so that a family's alternating light and
heavy cases spread over every shard: gpu_check runs the shards in processes
side by side.
"""

import argparse
import sys

from tools.gpu_check import case_file
from tools.gpu_check.cases import all_cases, modules, no_gpu_code

__all__ = ["all_cases", "modules", "no_gpu_code"]


def shard_of(cases, shard, shards):
    """The cases of `shard` of `shards`, dealt back and forth."""
    return [
        c
        for i, c in enumerate(cases)
        if (i % shards if (i // shards) % 2 == 0 else shards - 1 - i % shards) == shard
    ]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the case file to write")
    parser.add_argument(
        "--shards", type=int, default=1, help="split the cases over N files"
    )
    args = parser.parse_args(argv)
    if args.shards < 1:
        parser.error("--shards must be at least 1")
    cases = all_cases()
    if args.shards == 1:
        case_file.write(args.out, cases)
        print(f"wrote {len(cases)} cases to {args.out}")
        return
    for shard in range(args.shards):
        case_file.write(f"{args.out}.{shard}", shard_of(cases, shard, args.shards))
    print(f"wrote {len(cases)} cases to {args.out}.0 to .{args.shards - 1}")


if __name__ == "__main__":
    main(sys.argv[1:])
