"""The packages the ONNX export needs, pinned to the releases it is tested
with: the wheel's `onnx` extra (tools/pip_package/setup.py reads this file)
and tools/requirements.txt, which must list the same."""

REQUIREMENTS = ("tf2onnx==1.17.0", "onnx==1.23.2", "onnxruntime==1.31.1")
