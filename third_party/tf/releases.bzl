"""The TensorFlow releases (major.minor) the wheel carries a glue for.

Read by Bazel and by tools/fetch_tf_headers.py (as Python), so it holds
literals only. 2.19 is left out: its pip headers cannot compile an XLA
lowering (xla/stream_executor/gpu/tma_metadata.h includes LLVM headers the
wheel does not ship).
"""

TF_RELEASES = ["2.12", "2.13", "2.14", "2.15", "2.16", "2.17", "2.18", "2.20", "2.21"]
