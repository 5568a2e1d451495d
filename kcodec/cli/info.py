"""``kcodec info``: what this installation runs.

The version, the implementation (compiled twins or pure Python), the CRC-32C code actually
used, and each compression codec with its library, version and Kafka default level. A plain
table for people; ``--json`` prints one JSON object for machines.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

NAME = "info"
HELP = "show the version, implementation, CRC-32C backend and compression libraries"


EXAMPLES = [
    "kcodec info",
    "kcodec info --json",
]
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def collect() -> dict[str, Any]:
    """Everything ``kcodec info`` reports, as plain data."""
    import platform

    import kcodec
    from kcodec import _impl
    from kcodec.compression import codec_info
    from kcodec.crc import CRC32C_BACKEND

    return {
        "version": kcodec.__version__,
        "implementation": kcodec.IMPLEMENTATION,
        "extension_error": _impl.EXTENSION_ERROR,
        "crc32c_backend": CRC32C_BACKEND,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": f"{sys.platform} {platform.machine()}",
        "codecs": codec_info(),
    }


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in rows]


def render(info: dict[str, Any]) -> str:
    impl = info["implementation"]
    if info["extension_error"] and impl == "python":
        impl += f" ({info['extension_error']})"
    lines = _table(
        [
            ["kcodec", info["version"]],
            ["implementation", impl],
            ["crc32c backend", info["crc32c_backend"]],
            ["python", info["python"]],
            ["platform", info["platform"]],
        ]
    )
    rows = [["codec", "id", "library", "version", "default level", "available"]]
    for c in info["codecs"]:
        missing = f"no: pip install {c['package']}" if c["package"] else "no"
        rows.append(
            [
                c["name"],
                str(c["id"]),
                c["library"] or "-",
                c["version"] or "-",
                "-" if c["default_level"] is None else str(c["default_level"]),
                "yes" if c["available"] else missing,
            ]
        )
    return "\n".join(lines + [""] + _table(rows))


def run(args: argparse.Namespace) -> int:
    info = collect()
    if args.json:
        print(json.dumps(info, sort_keys=True))
    else:
        print(render(info))
    return 0
