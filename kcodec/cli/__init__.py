"""The ``kcodec`` command line.

Each sub-command is one small module of this package that defines::

    NAME = "dump-log"                      # the sub-command
    HELP = "one line for --help"
    def add_arguments(parser): ...         # argparse arguments
    def run(args) -> int: ...              # the exit code

Modules are discovered, so adding a command is adding a file. Exit codes: 0 success,
1 the work failed (bad data, broker error), 2 bad usage (argparse; also a command, or a
command of sub-commands, given without one: what there is is listed), 130 SIGINT, 143
SIGTERM.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from kcodec._version import __version__
from kcodec.errors import KcodecError

__all__ = ["main", "build_parser"]


def _commands() -> list:
    mods = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(mod, "NAME") and hasattr(mod, "run"):
            mods.append(mod)
    return sorted(mods, key=lambda m: m.NAME)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kcodec", description="Apache Kafka wire codec tools")
    parser.add_argument("--version", action="version", version=f"kcodec {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in _commands():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP))
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:   # Ctrl-C while starting (importing the commands takes a while): no traceback
        parser = build_parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        return 130
    if args.command is None:         # plain `kcodec`: what there is, not only a usage error
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except (KcodecError, OSError) as exc:
        print(f"kcodec {args.command}: error: {exc}", file=sys.stderr)
        return 1
