"""ONNX export of models that use the custom ops (needs tf2onnx, onnx);
public as tensorflow_customops.onnx."""
