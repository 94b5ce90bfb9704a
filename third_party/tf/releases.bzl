"""The TensorFlow releases (major.minor) the wheel carries a glue for.

Read by Bazel and by tools/fetch_tf_headers.py (as Python), so it holds
literals only.
"""

TF_RELEASES = ["2.12", "2.13", "2.14", "2.15", "2.16", "2.17", "2.18", "2.19", "2.20", "2.21"]
