"""The TensorFlow releases this copy has op libraries for, found without
importing TensorFlow, so that a missing TensorFlow gets an error that says
which release to install.
"""

import os

from tensorflow_customops.python.platform import build_info as _build_info

LIBRARY_NAME = "_custom_ops.so"
_HERE = os.path.dirname(os.path.abspath(__file__))


def major_minor(version):
    return ".".join(version.split(".")[:2])


def _release_key(release):
    return tuple(int(part) for part in release.split("."))


def glue_folders(here=_HERE):
    """TensorFlow release (major.minor) -> the folder of its op libraries.

    A wheel has one folder tfM_N per release (tfco_release_glues); a Bazel
    build also has, beside this file, the one for the TensorFlow it was
    configured with.
    """
    folders = {}
    if os.path.exists(os.path.join(here, LIBRARY_NAME)):
        folders[major_minor(_build_info.TF_VERSION)] = here
    for entry in os.listdir(here):
        path = os.path.join(here, entry, LIBRARY_NAME)
        if entry.startswith("tf") and os.path.exists(path):
            folders[entry[2:].replace("_", ".")] = os.path.dirname(path)
    return dict(sorted(folders.items(), key=lambda item: _release_key(item[0])))


def supported_releases():
    """The TensorFlow releases (major.minor) this copy has an op library for."""
    return list(glue_folders())


def describe(supported):
    """`supported` as a message names them: "2.12, 2.13, 2.21"."""
    return ", ".join(supported) or "none (no op library was found)"


def install_command(supported):
    """The pip command that installs the newest of the `supported` releases."""
    newest = supported[-1] if supported else major_minor(_build_info.TF_VERSION)
    return f"`pip install 'tensorflow=={newest}.*'`"


def missing_tensorflow_error():
    """The ImportError for an environment without TensorFlow: it names the
    releases to install (the wheel requires no TensorFlow distribution, so a
    fresh install meets this)."""
    supported = supported_releases()
    return ImportError(
        "tensorflow_customops needs TensorFlow, which is not installed (the "
        "package requires none, so that pip never replaces the one you have). "
        "Install one of the releases it has op libraries for, TensorFlow "
        f"{describe(supported)}: for example {install_command(supported)} (or "
        "tensorflow-cpu).",
        name="tensorflow",
    )
