"""ONNX export of TensorFlow functions, Keras models and SavedModels that use
the custom ops (docs/onnx.md). Needs tf2onnx and onnx, imported only when an
export runs: pip install tensorflow-customops[onnx].

    import tensorflow_customops as tfco
    model = tfco.onnx.export(fn, input_signature, path="model.onnx")

The command line exports a SavedModel:

    python -m tensorflow_customops.onnx SAVED_MODEL OUTPUT.onnx [--opset N]
        [--target tensorrt] [--signature NAME]
"""

import argparse
import sys

from tensorflow_customops.python.onnx.errors import ExportError
from tensorflow_customops.python.onnx.export import export

__all__ = ["ExportError", "export"]


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m tensorflow_customops.onnx",
        description="Exports a SavedModel that uses tensorflow_customops ops to ONNX.",
    )
    parser.add_argument("saved_model", help="the SavedModel directory")
    parser.add_argument("output", help="the .onnx file to write")
    parser.add_argument(
        "--opset",
        type=int,
        help="the ONNX opset (default: the lowest that holds every op)",
    )
    parser.add_argument(
        "--target", choices=["onnxruntime", "tensorrt"], default="onnxruntime"
    )
    parser.add_argument(
        "--signature", help="the signature to export (default: serving_default)"
    )
    args = parser.parse_args(argv)
    try:
        model = export(
            args.saved_model,
            path=args.output,
            opset=args.opset,
            target=args.target,
            signature=args.signature,
        )
    except (ExportError, ImportError, OSError) as e:
        print(f"{parser.prog}: error: {_one_line(e)}", file=sys.stderr)
        return 1
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    print(f"wrote {args.output} (opset {opset}, target {args.target})")
    return 0


def _one_line(error):
    return " | ".join(line.strip() for line in str(error).splitlines() if line.strip())


if __name__ == "__main__":
    sys.exit(main())
