"""Writes the GPU check's cases (cases/, one module per op family): inputs,
and the outputs the CPU kernels give.

    bazel run //tools/gpu_check:make_cases -- OUT_FILE
"""

import argparse
import sys

from tools.gpu_check import case_file
from tools.gpu_check.cases import all_cases, modules, no_gpu_code

__all__ = ["all_cases", "modules", "no_gpu_code"]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the case file to write")
    args = parser.parse_args(argv)
    cases = all_cases()
    case_file.write(args.out, cases)
    print(f"wrote {len(cases)} cases to {args.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
