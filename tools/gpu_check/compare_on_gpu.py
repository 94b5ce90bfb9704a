"""Runs the comparisons of compare/ (one module per op family that has one)
on a GPU machine with no TensorFlow, from the folder that
run_on_gpu_machine.sh prepared (run by its `run`):

1. Parity: each module's parity() on the cases and the outputs gpu_check
   wrote (--outputs).
2. Speed: each module's bench_cases(), timed by gpu_check --bench in one
   run, and its speed() rows, printed as a table with the ratio of the other
   library's time to ours (NHWC) and written to OUT/speed.json.
3. Variants (DIR/variants/NAME/gpu_check, other builds of the kernels that
   `run_on_gpu_machine.sh prepare` was given): the same cases timed by each
   variant's gpu_check and by this one's, twice, the second time in reverse
   order, so that a GPU warming or cooling favours neither; the means are
   printed beside the other library's times and written to
   OUT/variant_speed.json. With variants, the speed table's times are these
   means too.

    python3 compare_on_gpu.py --dir DIR --out OUT [--repeats N]

The exit status is 1 if a parity check failed or could not run.
"""

import argparse
import importlib
import json
import os
import pkgutil
import subprocess
import sys


def _modules(directory):
    """(name, module or the reason it is skipped) of each compare/ module."""
    found = []
    for info in sorted(
        pkgutil.iter_modules([os.path.join(directory, "compare")]),
        key=lambda m: m.name,
    ):
        try:
            found.append((info.name, importlib.import_module(f"compare.{info.name}")))
        except ImportError as e:
            found.append((info.name, f"skipped: {e}"))
    return found


def _variants(directory):
    """(name, gpu_check) of each variant build in DIR/variants, by name."""
    root = os.path.join(directory, "variants")
    if not os.path.isdir(root):
        return []
    return [
        (name, os.path.join(root, name, "gpu_check"))
        for name in sorted(os.listdir(root))
        if os.path.isfile(os.path.join(root, name, "gpu_check"))
    ]


def _bench_once(gpu_check, path, repeats):
    result = subprocess.run(
        [gpu_check, "--bench", path, "--repeats", str(repeats)],
        capture_output=True,
        text=True,
        check=True,
    )
    return {r["case"]: r for r in map(json.loads, result.stdout.splitlines())}


def _mean(runs):
    """Each case's times averaged over the runs (dicts of gpu_check --bench)."""
    return {
        case: {
            key: (
                sum(run[case][key] for run in runs) / len(runs)
                if key.endswith("_ms")
                else value
            )
            for key, value in record.items()
        }
        for case, record in runs[0].items()
    }


def _bench(directory, out, cases, repeats, variants):
    """{build: {case: times}} for this gpu_check ("main") and the variants:
    one run each without variants, else two, the second in reverse order. A
    variant whose run fails is reported and left out."""
    import case_file

    path = os.path.join(out, "bench_cases.bin")
    case_file.write(path, cases)
    builds = [("main", os.path.join(directory, "gpu_check"))] + variants
    runs = {name: [] for name, _ in builds}
    for order in [builds, builds[::-1]] if variants else [builds]:
        for name, gpu_check in order:
            if name not in runs:
                continue
            try:
                runs[name].append(_bench_once(gpu_check, path, repeats))
            except subprocess.CalledProcessError as e:
                if name == "main":
                    raise
                print(f"variant {name}: gpu_check --bench failed: {e.stderr.strip()}")
                del runs[name]
    return {name: _mean(r) for name, r in runs.items()}


def _print_speed(other, rows):
    print(f"\nmedian ms; ratio = {other} / tfco NHWC (above 1: tfco faster)")
    print(f"| case | pass | tfco NHWC | tfco NCHW | {other} | ratio |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        for p, key in (("fwd", "fwd"), ("fwd+bwd", "fwd_bwd")):
            ours_ms, other_ms = r[f"tfco_nhwc_{key}"], r[f"other_{key}"]
            print(
                f"| {r['case']} | {p} | {ours_ms:.3f} | {r[f'tfco_nchw_{key}']:.3f} | "
                f"{other_ms:.3f} | {other_ms / ours_ms:.2f}x |"
            )


def _print_variants(other, rows, times):
    """The bench cases' times of each build, both layouts, beside `other`'s
    (its one layout); (x) is main's time over the variant's."""
    builds = list(times)
    print(
        "\nvariants: median ms, mean of two runs; (x) = main / variant, above 1:"
        " the variant faster"
    )
    print(f"| case | pass | {' | '.join(builds)} | {other} |")
    print("|" + "---|" * (len(builds) + 3))
    for r in rows:
        for layout in ("NHWC", "NCHW"):
            case = f"{r['case']}/{layout}"
            for p, key in (("fwd", "fwd"), ("fwd+bwd", "fwd_bwd")):
                base = times["main"][case][f"{key}_ms"]
                cells = [f"{base:.3f}"] + [
                    f"{t[case][f'{key}_ms']:.3f} ({base / t[case][f'{key}_ms']:.2f}x)"
                    for name, t in times.items()
                    if name != "main"
                ]
                print(
                    f"| {case} | {p} | {' | '.join(cells)} | {r[f'other_{key}']:.3f} |"
                )


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dir", required=True, help="folder with gpu_check, cases.bin, compare/"
    )
    parser.add_argument(
        "--out", required=True, help="folder with gpu_outputs.bin; results go here"
    )
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args(argv)
    sys.path.insert(0, args.dir)
    import case_file

    modules = _modules(args.dir)
    for name, module in modules:
        if isinstance(module, str):
            print(f"{name}: {module}")
    modules = [(n, m) for n, m in modules if not isinstance(m, str)]
    cases = case_file.read(os.path.join(args.dir, "cases.bin"))
    outputs = os.path.join(args.out, "gpu_outputs.bin")
    ours = (
        {c.name: c for c in case_file.read(outputs)}
        if os.path.exists(outputs)
        else None
    )
    failures = 0
    for name, module in modules:
        if not hasattr(module, "parity"):
            continue
        if ours is None:
            print(f"{name} vs {module.OTHER}: not run, gpu_check wrote no {outputs}")
            failures += 1
            continue
        rows, failed = module.parity(cases, ours)
        print("\n".join(rows))
        print(
            f"{name} vs {module.OTHER} parity: {len(rows) - failed} passed, "
            f"{failed} failed"
        )
        failures += failed

    timed = [(n, m) for n, m in modules if hasattr(m, "bench_cases")]
    table = {}
    if not timed:
        return 1 if failures else 0
    variants = _variants(args.dir)
    times = _bench(
        args.dir,
        args.out,
        [c for _, m in timed for c in m.bench_cases()],
        args.repeats,
        variants,
    )
    for name, module in timed:
        table[name] = module.speed(times["main"], args.repeats)
        _print_speed(module.OTHER, table[name])
        if variants:
            _print_variants(module.OTHER, table[name], times)
    with open(os.path.join(args.out, "speed.json"), "w") as f:
        json.dump(table, f, indent=1)
    if variants:
        with open(os.path.join(args.out, "variant_speed.json"), "w") as f:
            json.dump(times, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
