"""No op waits for the GPU (docs/gpu.md, "Checks without waiting").

Every C++ source that an op's kernel or lowering runs, the glue and the
portable kernels (tensorflow_customops/core) and the XLA lowerings and their
custom-call handlers (tensorflow_customops/compiler), is searched, comments
left out, for calls that block the calling thread on a CUDA stream or device
(a stream or device synchronisation, a synchronous copy or memset, CUDA's
allocation and release, which synchronise, StreamExecutor's waits, the
library's former waiting helpers), and any one found fails the test unless
ALLOWED names the file and the call with the reason it is off every op's
path. tools/ (gpu_check, a program of its own) is not searched.
"""

import os
import re
import unittest

# Pattern -> what the call does. The asynchronous forms (cudaMemcpyAsync,
# cudaMemsetAsync, cudaStreamAddCallback, ...) do not match.
BLOCKING = {
    r"\bcu(da)?(Stream|Device|Ctx|Event|Thread)Synchronize\b": "waits for the GPU",
    r"\bcudaMemcpy(2D|3D|Peer|ToSymbol|FromSymbol)?\s*\(": "a synchronous copy",
    r"\bcuMemcpy(HtoD|DtoH|DtoD)?(_v2)?\s*\(": "a synchronous copy",
    r"\bcudaMemset(2D|3D)?\s*\(": "a memset on the legacy default stream",
    r"\bcu(da)?(Malloc|MallocHost|MallocManaged|HostAlloc|MemAlloc)\s*\(": (
        "allocates device or pinned memory, which may synchronise; "
        "TensorFlow's allocators own the op's memory"
    ),
    r"\bcu(da)?(Free|FreeHost|MemFree)\s*\(": "frees, which synchronises",
    r"\bBlockHostUntilDone\b": "StreamExecutor's wait for a stream",
    r"\bSynchronizeAllActivity\b": "StreamExecutor's wait for a device",
    r"\bSynchronousMemcpy\w*\b": "StreamExecutor's synchronous copy",
    r"\.\s*synchronize\s*\(": "Eigen's GpuDevice wait for its stream",
    r"\bWaitForNotification\b": "waits for a callback",
    r"\b\w+AndWait\b": "a helper that waits (CopyToHostAndWait)",
    r"\bTfcoCopyToGpu\b": "the former copy that waited for the stream",
}

SEARCHED = ("tensorflow_customops/core", "tensorflow_customops/compiler")
EXTENSIONS = (".cc", ".h")

# (path, pattern) -> why that call is on no op's path. Empty: every wait is
# gone from the op library.
ALLOWED = {}


def _repository():
    """The repository this test's file comes from (runfiles are symlinks)."""
    return os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def strip_comments(text):
    """C++ source without its comments (string literals are not parsed: no
    source here puts a comment marker in one)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def blocking_calls(text):
    """(pattern, line number, line) of every blocking call in C++ `text`."""
    found = []
    code = strip_comments(text)
    for number, line in enumerate(code.splitlines(), 1):
        for pattern in BLOCKING:
            if re.search(pattern, line):
                found.append((pattern, number, line.strip()))
    return found


def sources(root):
    for top in SEARCHED:
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if name.endswith(EXTENSIONS):
                    path = os.path.join(folder, name)
                    yield os.path.relpath(path, root), path


class NoBlockingCallsTest(unittest.TestCase):
    def test_patterns_catch_waits_and_pass_async_calls(self):
        waits = """
            cudaStreamSynchronize(stream);
            cudaDeviceSynchronize();
            cudaMemcpy(host, gpu, n, cudaMemcpyDeviceToHost);
            cudaMemset(gpu, 0, n);
            cudaMalloc(&p, n); cudaFree(p);
            stream->BlockHostUntilDone();
            d.synchronize();
            CopyToHostAndWait(d, host, gpu, n);
            TfcoCopyToGpu(device, host, gpu, n);
        """
        patterns = {pattern for pattern, _, _ in blocking_calls(waits)}
        self.assertEqual(len(blocking_calls(waits)), 10)
        self.assertGreaterEqual(len(patterns), 8)
        asynchronous = """
            cudaMemcpyAsync(host, gpu, n, cudaMemcpyDeviceToHost, stream);
            cudaMemsetAsync(gpu, 0, n, stream);
            cudaStreamAddCallback(stream, OnStreamDone, callback, 0);
            TfcoCopyToHost(device, gpu, host, n);
            // cudaStreamSynchronize in a comment
            /* cudaMemcpy(a, b, n, kind) */
        """
        self.assertEqual(blocking_calls(asynchronous), [])

    def test_no_op_source_blocks(self):
        root = _repository()
        searched = []
        unexplained = []
        used = set()
        for relative, path in sources(root):
            searched.append(relative)
            with open(path, encoding="utf-8") as f:
                for pattern, number, line in blocking_calls(f.read()):
                    if (relative, pattern) in ALLOWED:
                        used.add((relative, pattern))
                        continue
                    unexplained.append(
                        f"{relative}:{number}: {line}  ({BLOCKING[pattern]})"
                    )
        # Both trees were found, and the portable device's GPU code, where the
        # asynchronous copies live, among them.
        for top in SEARCHED:
            self.assertTrue([p for p in searched if p.startswith(top + "/")], top)
        self.assertIn(
            "tensorflow_customops/core/kernels/portable/device_gpu.cu.cc", searched
        )
        self.assertEqual(
            unexplained,
            [],
            "a call that waits for the GPU is reachable from an op; make it "
            "asynchronous (docs/gpu.md, 'Checks without waiting') or, if no op "
            "can reach it, add it to ALLOWED with the reason",
        )
        self.assertEqual(set(ALLOWED) - used, set(), "stale ALLOWED entries")


if __name__ == "__main__":
    unittest.main()
