"""The glue of every TensorFlow release the wheel carries, built with that
release's headers through a configuration transition."""

load("//third_party/tf:releases.bzl", "TF_RELEASES")
load("@local_config_tf//:build_defs.bzl", "PYTHON_BIN_PATH")
load(
    "//tensorflow_customops/build_defs:flags.bzl",
    "INSTALLED_RELEASE",
    "RELEASE",
    "TF_EXPORTS",
    "WHEEL_RELEASES",
)

def _release_split_impl(settings, attr):
    wanted = [r for r in settings[WHEEL_RELEASES].split(",") if r]
    wrong = [r for r in wanted if r not in TF_RELEASES or r == INSTALLED_RELEASE]
    if wrong:
        fail("--%s=%s: it lists releases besides the installed TensorFlow (%s), from %s" % (
            WHEEL_RELEASES,
            ",".join(wanted),
            INSTALLED_RELEASE,
            ", ".join(TF_RELEASES),
        ))

    # A split needs a branch even without other releases: one whose targets
    # are analysed (like the installed TensorFlow's, in an output directory
    # of their own) but never built.
    return {r: {RELEASE: r} for r in wanted} or {"": {RELEASE: "unused"}}

_release_split = transition(
    implementation = _release_split_impl,
    inputs = [WHEEL_RELEASES],
    outputs = [RELEASE],
)

def _release_glues_impl(ctx):
    outs = []
    releases = {INSTALLED_RELEASE: (ctx.attr.installed_libs, ctx.attr.installed_exports)}
    for release, libs in ctx.split_attr.libs.items():
        if release:
            releases[release] = (libs, ctx.split_attr.exports[release])
    for release, (libs, exports) in releases.items():
        export_files = [f for target in exports for f in target.files.to_list()]
        for lib in [f for target in libs for f in target.files.to_list()]:
            out = ctx.actions.declare_file("tf%s/%s" % (release.replace(".", "_"), lib.basename))
            ctx.actions.run(
                executable = PYTHON_BIN_PATH,
                arguments = [ctx.file._check.path, lib.path, out.path] + [f.path for f in export_files],
                inputs = [ctx.file._check, lib] + export_files,
                outputs = [out],
                mnemonic = "TfcoCheckGlue",
                progress_message = "Checking the TensorFlow %s glue %s" % (release, lib.basename),
            )
            outs.append(out)
    return [DefaultInfo(files = depset(outs), runfiles = ctx.runfiles(outs))]

_release_glues = rule(
    implementation = _release_glues_impl,
    attrs = {
        "libs": attr.label_list(cfg = _release_split),
        "exports": attr.label_list(cfg = _release_split),
        "installed_libs": attr.label_list(),
        "installed_exports": attr.label_list(),
        "_check": attr.label(
            default = "//tools/pip_package:check_glue_imports.py",
            allow_single_file = True,
        ),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
)

def tfco_release_glues(name, libs):
    """The glue libraries `libs` for every TensorFlow release the wheel
    carries, each in a folder tfM_N beside the portable kernels: the installed
    TensorFlow's, and those of the releases named by
    --//third_party/tf:wheel_releases=2.12,2.13,... (built with their cached
    headers). Every glue's TensorFlow imports are checked against what its
    release exports.

    Args:
      name: target name.
      libs: the tfco_custom_op_library and tfco_xla_op_library targets.
    """
    _release_glues(
        name = name,
        libs = libs,
        exports = [TF_EXPORTS],
        installed_libs = libs,
        installed_exports = [TF_EXPORTS],
    )
