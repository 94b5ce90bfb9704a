"""Packages tensorflow_customops as a platform wheel. Run by build_pip_pkg."""

import ast
import os
import re

import setuptools
from setuptools.dist import Distribution
from wheel.bdist_wheel import bdist_wheel

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


class PlatformWheel(bdist_wheel):
    """Tagged py3-none-<platform>: no library of the package links libpython
    or uses Python's C API, so one wheel serves every Python 3 that
    TensorFlow does."""

    def get_tag(self):
        return ("py3", "none", super().get_tag()[2])


def _summary(path):
    """The first paragraph of a module's docstring, on one line."""
    with open(os.path.join(_HERE, path)) as f:
        docstring = ast.get_docstring(ast.parse(f.read()))
    return " ".join(docstring.split("\n\n")[0].split())


_version = _read_module("tensorflow_customops/version.py")["__version__"]
_onnx = _read_module("tensorflow_customops/python/onnx/requirements.py")


def _without_relative_links(markdown):
    """The README for a package index, where its links into the repository
    (docs/<page>.md, #sections) would be dead: each becomes its text and the path
    of the page it names."""

    def replace(match):
        text, target = match.groups()
        path = target.split("#")[0]
        if not path:  # a section of the README itself, named by the text
            return text
        return f"`{path}`" if text == path else f"{text} (`{path}`)"

    return re.sub(r"\[([^\]]+)\]\((?!https?://)([^)]+)\)", replace, markdown)


with open(os.path.join(_HERE, "README.md")) as f:
    _long_description = (
        "Paths such as `docs/<page>.md` name pages of the documentation in the "
        "project's source repository.\n\n" + _without_relative_links(f.read())
    )

setuptools.setup(
    name="tensorflow_customops",
    version=_version,
    description=_summary("tensorflow_customops/__init__.py"),
    long_description=_long_description,
    long_description_content_type="text/markdown",
    packages=setuptools.find_packages(exclude=["*.kernel_tests", "*.kernel_tests.*"]),
    package_data={
        # The portable kernels, and a folder of op libraries per TensorFlow
        # release.
        "tensorflow_customops.python.ops": [
            "_tensorflow_customops_portable_kernels.so",
            "tf*/*.so",
        ]
    },
    # No requirement on TensorFlow: it comes as tensorflow, tensorflow-cpu or
    # a build of one's own, and pip must never replace the one installed.
    # The loader checks at import that it is a release this copy supports.
    python_requires=">=3.9",
    # tfco.onnx: pip install tensorflow-customops[onnx] (Python 3.10 or newer).
    extras_require={"onnx": list(_onnx["REQUIREMENTS"])},
    distclass=BinaryDistribution,
    cmdclass={"bdist_wheel": PlatformWheel},
    zip_safe=False,
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: C++",
        "Operating System :: POSIX :: Linux",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
