"""The export's error, importable without tf2onnx."""


class ExportError(ValueError):
    """A graph that cannot become a valid ONNX model: an op without a handler,
    a gradient op, an attribute or dtype the target cannot express."""
