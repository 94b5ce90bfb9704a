"""The TensorFlow release a target is built for.

`//third_party/tf:release` is "" (the installed TensorFlow, @local_config_tf)
unless a transition sets it to a release of TF_RELEASES (@tf_2_NN, headers
from tools/fetch_tf_headers.py's cache). The aliases here pick that
release's headers and libraries; the glue (tfco_cc_library and the op
libraries) depends on them, the portable kernels do not.
"""

load("@local_config_tf//:build_defs.bzl", "TF_CC_LIBRARY_NAME", "TF_SHARED_LIBRARY_NAME")

def _string_setting_impl(ctx):
    return []

string_setting = rule(
    implementation = _string_setting_impl,
    build_setting = config.string(flag = True),
)

def release_repository(release):
    return "tf_" + release.replace(".", "_")

def release_select(installed, per_release, releases):
    """select() over the release: `installed` for "" (or any value that is
    not a release), and for a release
    per_release with every "{repo}" replaced by its repository's name (a
    string, or a list of strings)."""
    branches = {"//conditions:default": installed}
    for release in releases:
        repo = release_repository(release)
        if type(per_release) == "list":
            value = [item.replace("{repo}", repo) for item in per_release]
        else:
            value = per_release.replace("{repo}", repo)
        branches["//third_party/tf:release_" + repo[3:]] = value
    return select(branches)

def tf_release_targets(releases):
    """The release flags, one config_setting per release, and the aliases."""
    string_setting(name = "release", build_setting_default = "")

    # Comma-separated releases the wheel carries a glue for, besides the
    # installed TensorFlow's.
    string_setting(name = "wheel_releases", build_setting_default = "")
    for release in releases:
        native.config_setting(
            name = "release_" + release_repository(release)[3:],
            flag_values = {":release": release},
        )

    # The installed TensorFlow's libraries are real; a release's are empty
    # stand-ins with their SONAME.
    cc_library = TF_CC_LIBRARY_NAME or TF_SHARED_LIBRARY_NAME
    for name, installed, per_release in [
        ("tf_header_lib", "@local_config_tf//:tf_header_lib", "@{repo}//:tf_header_lib"),
        ("tf_cuda_header_lib", "@local_config_tf//:tf_cuda_header_lib", "@{repo}//:tf_cuda_header_lib"),
        ("libtensorflow_framework", "@local_config_tf//:lib/" + TF_SHARED_LIBRARY_NAME,
         "@{repo}//:lib/libtensorflow_framework.so.2"),
        ("libtensorflow_cc", "@local_config_tf//:lib/" + cc_library, "@{repo}//:lib/libtensorflow_cc.so.2"),
        # What the glue may import: the libraries themselves, or the names
        # they export.
        ("tf_exports", "@local_config_tf//:tf_libraries", "@{repo}//:symbols"),
    ]:
        native.alias(
            name = name,
            actual = release_select(installed, per_release, releases),
        )
