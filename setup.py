"""Build script: only the extension list and one cythonize() call.

Every ``kcodec/_cy/*.pyx`` becomes an extension module ``kcodec._cy.<name>``.
``KCODEC_NO_EXTENSIONS=1`` (any value but "", "0", "false", "no") skips them all and
gives a pure-Python build: the same switch that selects the pure twins at run time.
"""

import os
import sys
from glob import glob

from setuptools import setup


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


# Plain C helpers (no Python API) that an extension links, by module name.
C_SOURCES = {
    "crc": ["src_c/crc32c.c"],
}

# Compiler directives live here, not in per-file headers.
DIRECTIVES = {
    "language_level": "3",
    "boundscheck": False,
    "wraparound": False,
    "cdivision": True,
    "initializedcheck": False,
    "embedsignature": True,
    "binding": True,
    "freethreading_compatible": True,
}


def extensions():
    if _truthy("KCODEC_NO_EXTENSIONS"):
        return []
    from Cython.Build import cythonize
    from setuptools import Extension

    compile_args = []
    if sys.platform != "win32":
        compile_args = ["-O3"]
    exts = []
    for pyx in sorted(glob("kcodec/_cy/*.pyx")):
        name = os.path.splitext(os.path.basename(pyx))[0]
        exts.append(
            Extension(
                f"kcodec._cy.{name}",
                [pyx] + C_SOURCES.get(name, []),
                include_dirs=["src_c"],
                extra_compile_args=compile_args,
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            )
        )
    return cythonize(
        exts,
        compiler_directives=DIRECTIVES,
        nthreads=int(os.environ.get("KCODEC_BUILD_JOBS", "0")) or None,
    )


setup(ext_modules=extensions())
