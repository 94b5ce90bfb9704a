"""tf2onnx handlers of the custom ops, one module per op family; importing
this package imports them all, which registers them."""

import importlib
import pkgutil

for _module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    importlib.import_module(f"{__name__}.{_module.name}")
