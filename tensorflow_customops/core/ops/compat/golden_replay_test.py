"""Replays every golden GraphDef under the current build.

Goldens (testdata/) were recorded from historical specs; each must import,
get its missing attrs filled with their defaults, and reproduce its recorded
outputs in tf.compat.v1 (gradients through SymbolicGradient, the C++
gradient) and in TF2 (wrap_function; gradients through the Python gradient).
"""

import json
import os

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.core.framework import graph_pb2

from tensorflow_customops.core.ops.compat import goldens
from tensorflow_customops.python.ops import load_library

# Half-precision outputs may differ in the last bit between kernels.
_TOLERANCE = {"float16": 1e-3, "bfloat16": 1e-2}


def _redefined(op_name, fetch, gradients):
    """Whether `fetch` is a recorded gradient that the op's registry entry
    says was defined anew since (goldens.redefined_gradients)."""
    redefined = goldens.redefined_gradients(op_name)
    return any(
        fetch in g["dxs"] and g["dxs"].index(fetch) in redefined for g in gradients
    )


def _load(op_name, version):
    graph_path, data_path = goldens.golden_paths(op_name, version)
    with open(graph_path) as f:
        graph_def = text_format.Parse(f.read(), graph_pb2.GraphDef())
    with open(data_path) as f:
        data = json.load(f)
    feeds = {name: goldens.decode(entry) for name, entry in data["feeds"].items()}
    return graph_def, feeds, data


def _without_gradients(graph_def):
    # SymbolicGradient cannot run inside TF2 functions.
    forward = graph_pb2.GraphDef(versions=graph_def.versions)
    forward.node.extend(n for n in graph_def.node if n.op != "SymbolicGradient")
    return forward


class GoldenReplayTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.history = goldens.read_history()
        cls.current = {op.name: op for op in load_library.op_list().op}
        cls.goldens = [
            (name, version)
            for name, versions in sorted(cls.history.items())
            for version in range(1, len(versions) + 1)
        ]

    def assertMatches(self, actual, entry, what, values=True):
        tol = _TOLERANCE.get(entry["dtype"], 1e-6)
        expected = goldens.decode(entry)
        self.assertEqual(np.asarray(actual).dtype, expected.dtype, what)
        if not values:
            self.assertEqual(np.shape(actual), expected.shape, what)
            return
        self.assertAllClose(actual, expected, rtol=tol, atol=tol, msg=what)

    def test_every_history_version_has_a_golden(self):
        for name, version in self.goldens:
            for path in goldens.golden_paths(name, version):
                self.assertTrue(
                    os.path.exists(path),
                    f"no golden for {name} version {version} ({path}); run "
                    f"{goldens.RECORD_COMMAND}",
                )

    def test_goldens_never_change(self):
        manifest = goldens.read_manifest()
        expected = set()
        for name, version in self.goldens:
            for path in goldens.golden_paths(name, version):
                relative = os.path.relpath(path, goldens.TESTDATA_DIR)
                expected.add(relative)
                self.assertEqual(
                    goldens.file_digest(path),
                    manifest.get(relative),
                    f"golden {relative} of {name} version {version} changed since "
                    f"it was recorded; goldens are immutable: restore it, and record "
                    f"changed behaviour as a new spec version "
                    f"({goldens.UPDATE_COMMAND}, then {goldens.RECORD_COMMAND})",
                )
        self.assertEqual(set(manifest), expected, "goldens without a history version")

    def test_golden_was_recorded_from_its_history_version(self):
        for name, version in self.goldens:
            _, _, data = _load(name, version)
            self.assertEqual(
                data["spec_sha256"],
                goldens.spec_digest(self.history[name][version - 1]),
                f"{name} version {version}: golden recorded from another spec",
            )

    def test_replay_in_tf1_session(self):
        for name, version in self.goldens:
            with self.subTest(op=name, version=version):
                graph_def, feeds, data = _load(name, version)
                self.assertGreater(graph_def.versions.producer, 0)
                outputs, graph = goldens.run_v1(graph_def, feeds, list(data["fetches"]))
                for fetch, entry in data["fetches"].items():
                    self.assertMatches(
                        outputs[fetch],
                        entry,
                        f"{name} v{version} {fetch}",
                        values=not _redefined(name, fetch, data["gradients"]),
                    )
                # Import filled in the attrs added after this version.
                current_attrs = {a.name for a in self.current[name].attr}
                for op in graph.get_operations():
                    if op.type == name:
                        self.assertEqual(set(op.node_def.attr), current_attrs)

    def test_replay_in_tf2(self):
        for name, version in self.goldens:
            with self.subTest(op=name, version=version):
                graph_def, feeds, data = _load(name, version)
                forward = _without_gradients(graph_def)
                dxs = {dx for g in data["gradients"] for dx in g["dxs"]}
                fetches = [f for f in data["fetches"] if f not in dxs]
                wrapped = tf.compat.v1.wrap_function(
                    lambda graph_def=forward: tf.graph_util.import_graph_def(
                        graph_def, name=""
                    ),
                    [],
                )
                run = wrapped.prune(
                    feeds=[wrapped.graph.get_tensor_by_name(n) for n in feeds],
                    fetches=[wrapped.graph.get_tensor_by_name(n) for n in fetches],
                )
                values = run(*[tf.constant(v) for v in feeds.values()])
                for fetch, value in zip(fetches, values):
                    self.assertMatches(
                        value.numpy(),
                        data["fetches"][fetch],
                        f"{name} v{version} {fetch}",
                    )
                for g in data["gradients"]:
                    self._check_tf2_gradient(forward, feeds, data, g)

    def _check_tf2_gradient(self, forward, feeds, data, g):
        @tf.function
        def gradient(xs, dys):
            ys = tf.graph_util.import_graph_def(
                forward,
                input_map=dict(zip(g["xs"] + g["dys"], xs + dys)),
                return_elements=g["ys"],
            )
            # A Python gradient may return None (no gradient) where a C++
            # one recorded zeros.
            return tf.gradients(
                ys,
                xs,
                grad_ys=dys,
                unconnected_gradients=tf.UnconnectedGradients.ZERO,
            )

        dxs = gradient(
            [tf.constant(feeds[n]) for n in g["xs"]],
            [tf.constant(feeds[n]) for n in g["dys"]],
        )
        for index, (name, value) in enumerate(zip(g["dxs"], dxs)):
            self.assertMatches(
                value.numpy(),
                data["fetches"][name],
                f"{data['op']} {name}",
                values=index not in goldens.redefined_gradients(data["op"]),
            )


if __name__ == "__main__":
    tf.test.main()
