"""What the cross-op tests and tools need to know about each op of the
library: one Entry per registered op (registry/entry.py), kept with its
family in the module of this package named for it (its key in TFCO_OPS,
<family>.py), which defines ENTRIES; every module that does is read. A
family's input helpers live beside it (CONTRIBUTING.md, "The op registry").

Consumers: determinism_test and concurrency_test (property_cases,
thread_count_dependent), large_shapes_test (large_shapes), cpp_gradients_test
(gradient_cases), the fuzzer (fuzz_hint) and the golden recorder (golden).
`entries()` fails for a registered op without an entry, naming the file to
add it to, so a new op is covered or fails loudly.
"""

import importlib
import pkgutil

import tensorflow as tf

from tensorflow_customops.python.ops import load_library

_PACKAGE = "tensorflow_customops/python/registry"


def _families():
    """The modules of this package that define ENTRIES, by name."""
    modules = (
        importlib.import_module(f"{__name__}.{info.name}")
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name)
    )
    return [module for module in modules if hasattr(module, "ENTRIES")]


def registered_ops():
    """The ops the library registers (its OpList), sorted."""
    return sorted(op.name for op in load_library.op_list().op)


def entries():
    """Op name -> Entry for every registered op, in family order.

    Raises:
      LookupError: a registered op has no entry, or an entry names an op the
        library does not register.
    """
    table = {}
    for family in _families():
        for entry in family.ENTRIES:
            if entry.op in table:
                raise LookupError(f"{entry.op} has two registry entries")
            table[entry.op] = entry
    registered = registered_ops()
    missing = [op for op in registered if op not in table]
    if missing:
        raise LookupError(
            f"registered ops without a registry entry: {missing}. Add an "
            f"Entry for each to the ENTRIES of its family's module in {_PACKAGE}/ "
            "(a new family: a new module defining ENTRIES; tools/new_op.py "
            "writes one); registry/entry.py says what each field is for"
        )
    unknown = sorted(set(table) - set(registered))
    if unknown:
        raise LookupError(f"registry entries for ops the library lacks: {unknown}")
    return table


def a_case():
    """The first property case of the first op that has one: for tests that
    need some op of the library to run, whichever ops it has."""
    for entry in entries().values():
        for case in entry.property_cases():
            return case
    raise LookupError("no registry entry has a property case")


def run_a_case():
    """Runs a_case() eagerly in float32; returns its outputs as arrays."""
    case = a_case()
    tensors, _ = case.tensors(tf.float32)
    return [t.numpy() for t in tf.nest.flatten(case.forward(*tensors))]


def fuzz_hints():
    """Op name -> fuzz hint, for the ops that have one."""
    return {op: e.fuzz_hint for op, e in entries().items() if e.fuzz_hint}
