"""Packages tensorflow_customops as a platform wheel. Run by build_pip_pkg."""

import os

import setuptools
from setuptools.dist import Distribution

_HERE = os.path.dirname(os.path.abspath(__file__))


def _read_module(path):
    namespace = {}
    with open(os.path.join(_HERE, path)) as f:
        exec(f.read(), namespace)
    return namespace


class BinaryDistribution(Distribution):
    """The package ships a compiled library, so the wheel is platform-specific."""

    def has_ext_modules(self):
        return True


def _tensorflow_requirement(built_against):
    # TensorFlow's C++ ABI holds within a minor release only.
    major, minor = (int(v) for v in built_against.split(".")[:2])
    return f"tensorflow>={major}.{minor}.0,<{major}.{minor + 1}"


_build_info = _read_module("tensorflow_customops/python/platform/build_info.py")
_version = _read_module("tensorflow_customops/version.py")["__version__"]

with open(os.path.join(_HERE, "README.md")) as f:
    _long_description = f.read()

setuptools.setup(
    name="tensorflow_customops",
    version=_version,
    description=(
        "TensorFlow custom ops: RoI pooling and align for detection, fused ops, "
        "with CPU and GPU kernels and gradients."
    ),
    long_description=_long_description,
    long_description_content_type="text/markdown",
    packages=setuptools.find_packages(exclude=["*.kernel_tests", "*.kernel_tests.*"]),
    package_data={
        "tensorflow_customops.python.ops": [
            "_custom_ops.so",
            "_custom_ops_core.so",
            "_custom_ops_xla.so",
        ]
    },
    install_requires=[_tensorflow_requirement(_build_info["TF_VERSION"])],
    python_requires=">=3.9",
    distclass=BinaryDistribution,
    zip_safe=False,
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: C++",
        "Operating System :: POSIX :: Linux",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
