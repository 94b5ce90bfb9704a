#!/usr/bin/env python3
"""Binds a static archive's glibc calls to versions an older glibc has.

Linking on a glibc of 2.34 or newer binds pthread_*, dl*, sem_* and shm_*
to their GLIBC_2.34 versions (they moved from libpthread, libdl and librt
into libc), so a library that links the CUDA runtime statically would need
glibc 2.34. Those functions keep their old versions in libc as well. For
each function ARCHIVE calls whose default version in LIBC is newer than
FLOOR but which has a version no newer than FLOOR, this renames the
archive's references to tfco_glibc_NAME (OUT_ARCHIVE, by objcopy) and writes
a hidden trampoline of that name that jumps to NAME at the old version
(OUT_ASM).

  glibc_compat.py ARCHIVE LIBC FLOOR OUT_ARCHIVE OUT_ASM   (FLOOR e.g. 2.17)
"""

import os
import re
import subprocess
import sys


def _version(text):
    return tuple(int(part) for part in text.split("."))


def undefined_names(archive):
    listed = subprocess.run(
        ["nm", "--undefined-only", "--format=posix", archive],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # Lines ending in ":" name the archive's members.
    lines = [line for line in listed.splitlines() if line and not line.endswith(":")]
    return {line.split()[0] for line in lines}


def libc_versions(libc):
    """Function name -> [(version, is_default)] of `libc`'s dynamic symbols."""
    table = subprocess.run(
        ["objdump", "-T", libc], capture_output=True, text=True, check=True
    ).stdout
    versions = {}
    # A version in parentheses is not the default one.
    pattern = r" DF \.text\s+\S+\s+(\(?)GLIBC_([0-9.]+)\)?\s+(\S+)$"
    for match in re.finditer(pattern, table, re.M):
        hidden, version, name = match.groups()
        versions.setdefault(name, []).append((_version(version), not hidden))
    return versions


def rebinds(names, versions, floor):
    """Name -> the version to bind, for names whose default is above floor."""
    chosen = {}
    for name in sorted(names):
        entries = versions.get(name, [])
        default = [v for v, is_default in entries if is_default]
        older = [v for v, _ in entries if v <= floor]
        if default and max(default) > floor and older:
            chosen[name] = ".".join(str(part) for part in max(older))
    return chosen


def main():
    archive, libc, floor, out_archive, out_asm = sys.argv[1:]
    chosen = rebinds(undefined_names(archive), libc_versions(libc), _version(floor))
    lines = [".text"]
    for name, version in chosen.items():
        lines += [
            f".globl tfco_glibc_{name}",
            f".hidden tfco_glibc_{name}",
            f".type tfco_glibc_{name}, @function",
            f"tfco_glibc_{name}:",
            f"  jmp {name}_tfco_old@PLT",
            f".symver {name}_tfco_old, {name}@GLIBC_{version}",
        ]
    lines.append('.section .note.GNU-stack,"",@progbits')
    with open(out_asm, "w") as f:
        f.write("\n".join(lines) + "\n")
    renames = out_archive + ".renames"
    with open(renames, "w") as f:
        f.write("".join(f"{name} tfco_glibc_{name}\n" for name in chosen))
    subprocess.run(
        ["objcopy", f"--redefine-syms={renames}", archive, out_archive], check=True
    )
    os.remove(renames)


if __name__ == "__main__":
    main()
