"""Build script: only the extension list and one cythonize() call.

Every ``kcodec/_cy/*.pyx`` becomes an extension module ``kcodec._cy.<name>``.
``KCODEC_NO_EXTENSIONS=1`` (any value but "", "0", "false", "no", "off") skips them all and
gives a pure-Python ``py3-none-any`` wheel: the same switch, read the same way, that selects
the pure twins at run time (kcodec/_impl.py).

Other build-time environment variables:
  KCODEC_BUILD_JOBS=N   compile N extensions at once (cythonize and build_ext)
  KCODEC_DEBUG=1        keep debug symbols and turn off optimisation (-O0 -g / /Od /Zi)
  KCODEC_WERROR=1       compiler warnings are errors (-Werror / /WX); CI sets it, users'
                        builds do not, so a new compiler's new warning cannot break them
"""

import os
from glob import glob

from setuptools import setup
from setuptools.command.build_ext import build_ext


def _truthy(name: str) -> bool:
    # Keep in step with kcodec._impl._truthy (tests/packaging/test_packaging.py checks they agree).
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


# Plain C helpers (no Python API) that an extension links, by module name.
C_SOURCES = {
    "crc": ["src_c/crc32c.c"],
    "_record": ["src_c/crc32ieee.c", "src_c/kcbuf.c"],
    "_colbuf": ["src_c/kcbuf.c"],
}

# C macros for one extension's copy of those helpers. Each extension linking kcbuf.c has a
# cache of its own: the builders' (_record) keeps at most 64 MiB of released buffers, about
# what Java's producer pools (buffer.memory, 32 MiB by default, of batch.size buffers); the
# columns' (_colbuf) keeps kcbuf.c's default 256 MiB.
C_MACROS = {
    "_record": [("KCBUF_CACHE_BYTES", "67108864")],   # 64 MiB
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

# Flags by compiler family: (release, debug). Only the whole-module optimisation level lives
# here; CPU-specific code (SSE4.2, ARMv8 CRC) uses function-level target attributes and runtime
# dispatch in src_c/, never a module-wide -msse4.2. gcc and clang (Linux, macOS, MinGW) take
# -O3 and no debug info (-g0 overrides the interpreter's -g and keeps wheels small); MSVC takes
# /O2, which is also what setuptools passes it by default.
GCC_FLAGS = (["-O3", "-g0"], ["-O0", "-g"])
MSVC_FLAGS = (["/O2"], ["/Od", "/Zi"])


class BuildExt(build_ext):
    """build_ext with per-compiler flags and parallel compilation."""

    def finalize_options(self) -> None:
        super().finalize_options()
        jobs = int(os.environ.get("KCODEC_BUILD_JOBS", "0") or 0)
        if jobs > 1 and not self.parallel:
            self.parallel = jobs

    def build_extensions(self) -> None:
        msvc = self.compiler.compiler_type == "msvc"
        release, debug = MSVC_FLAGS if msvc else GCC_FLAGS
        flags = debug if _truthy("KCODEC_DEBUG") else release
        if _truthy("KCODEC_WERROR"):
            flags = flags + (["/WX"] if msvc else ["-Werror"])
        for ext in self.extensions:
            ext.extra_compile_args = flags + list(ext.extra_compile_args or [])
        super().build_extensions()


def extensions():
    if _truthy("KCODEC_NO_EXTENSIONS"):
        return []
    from Cython.Build import cythonize
    from setuptools import Extension

    exts = []
    for pyx in sorted(glob("kcodec/_cy/*.pyx")):
        name = os.path.splitext(os.path.basename(pyx))[0]
        exts.append(
            Extension(
                f"kcodec._cy.{name}",
                [pyx] + C_SOURCES.get(name, []),
                include_dirs=["src_c"],
                depends=sorted(glob("src_c/*.h")),
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
                + C_MACROS.get(name, []),
            )
        )
    return cythonize(
        exts,
        compiler_directives=DIRECTIVES,
        nthreads=int(os.environ.get("KCODEC_BUILD_JOBS", "0") or 0),
    )


ext_modules = extensions()
# With no extension modules setuptools already writes a pure wheel (Root-Is-Purelib, tag
# py3-none-any); keeping ext_modules empty (never a placeholder) is what keeps it so.
setup(ext_modules=ext_modules, cmdclass={"build_ext": BuildExt} if ext_modules else {})
