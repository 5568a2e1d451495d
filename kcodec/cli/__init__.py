"""The ``kcodec`` command line.

Each sub-command is one small module of this package that defines::

    NAME = "dump-log"                      # the sub-command (the module's name, - for _)
    HELP = "one line for --help"
    EXAMPLES = ["kcodec dump-log 00000000000000000000.log"]   # shown under its --help
    def add_arguments(parser): ...         # argparse arguments
    def run(args) -> int: ...              # the exit code

Modules are discovered, so adding a command is adding a file (and its line in the map
below). A module imports only the
standard library and ``kcodec.cli`` at its top: the client, the broker and the protocol
tables are imported where a command runs, and only the chosen command's options are built,
so ``kcodec --version`` and ``kcodec --help`` start in a few tens of milliseconds.

Exit codes: 0 success, 1 the work failed (bad data, broker error), 2 bad usage (argparse,
with a suggestion for a misspelt option or command; also a command, or a command of
sub-commands, given without one: what there is is listed), 130 SIGINT, 143 SIGTERM.

    acls.py             ``kcodec acls list|add|remove``: ACLs, as kafka-acls.sh has them
    broker.py           ``kcodec broker``: run a broker node (or a small cluster) until Ctrl-C
    configs.py          ``kcodec configs describe|alter``: topic, broker and group configs
    consume.py          ``kcodec consume``: print the records of topics
    ctl.py              ``kcodec ctl``: ask a running ``kcodec run`` about itself, or steer it
    demo.py             ``kcodec demo``: a local broker, records round-tripped with every codec
    describe_groups.py  ``kcodec describe-groups``: state, protocol and members of groups
    dump_log.py         ``kcodec dump-log``: the batches (and records) of log segments
    groups.py           ``kcodec groups list|delete|reset-offsets``
    info.py             ``kcodec info``: what this installation runs
    lag.py              ``kcodec lag``: the records a group has still to consume, in total
    metadata.py         ``kcodec metadata brokers|topics``: the cluster, as the brokers see it
    offsets.py          ``kcodec offsets``: committed and end offsets of a group's partitions
    pipeline.py         ``kcodec pipeline``: the whole data path on Spark, proved by its numbers
    produce.py          ``kcodec produce``: send messages (arguments, or stdin) to a topic
    quotas.py           ``kcodec quotas describe|alter``: client quotas (KIP-546)
    run.py              ``kcodec run``: a handler over topics, with pullers and sinkers
    topics.py           ``kcodec topics list|describe|create|delete``
    transactions.py     ``kcodec transactions list|describe|abort|commit``, from outside
    users.py            ``kcodec users list|set|delete``: SCRAM users (KIP-554)
    _acls.py            the options and the work of ``kcodec acls``
    _client.py          what the client commands share: connection options, tables, JSON lines
    _format.py          kcat's ``-f`` format strings, for ``kcodec consume -f``
    _groups.py          what describe-groups, offsets and lag share: groups and their offsets
    _io.py              bytes in and out of the command line
    _positions.py       where ``kcodec consume`` starts and stops in each partition
    _security.py        the TLS and SASL options of the client commands
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from kcodec._version import __version__

__all__ = ["main", "build_parser", "Parser"]

FULL_HELP = "--help-all"   # --help with the TLS and SASL options described one by one


def _command_names() -> list[str]:
    """The public modules of this package (a directory listing: pkgutil.iter_modules imports
    inspect, a tenth of ``--help``'s start; a package in a zip file is listed by it)."""
    names: set[str] = set()
    for where in __path__:
        try:
            files = os.listdir(where)
        except OSError:
            names.update(m.name for m in pkgutil.iter_modules([where]))
            continue
        names.update(f[:-3] for f in files if f.endswith(".py") and f[:-3].isidentifier())
    return sorted(n for n in names if not n.startswith("_"))


def _commands() -> list:
    mods = []
    for name in _command_names():
        mod = importlib.import_module(f"{__name__}.{name}")
        if hasattr(mod, "NAME") and hasattr(mod, "run"):
            mods.append(mod)
    return sorted(mods, key=lambda m: m.NAME)


class Formatter(argparse.HelpFormatter):
    """argparse's formatter, wider, and with an ``examples:`` epilog kept as written."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 30,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return text
        import textwrap

        text = " ".join(text.split())
        return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False, break_long_words=False)

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False,
                             break_long_words=False)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are its own (a sub-command's misspelt option is shown
    with that sub-command's usage, not the top level's) and suggest the option or command
    meant."""

    leaf = False    # no sub-commands: an argument it does not know is its error (mark_leaves)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        ns, extras = super().parse_known_args(args, namespace)
        if extras and self.leaf:
            self.error(_unrecognized(self, extras))
        return ns, extras

    def error(self, message: str) -> NoReturn:
        message = message + _suggest(self, message)
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [o for a in parser._actions for o in a.option_strings if o.startswith("--")]


def _unrecognized(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    return "unrecognized arguments: " + " ".join(extras)


def _suggest(parser: argparse.ArgumentParser, message: str) -> str:
    """`` (did you mean ...?)`` for the first misspelt option or command of ``message``."""
    import difflib
    import re

    if message.startswith("unrecognized arguments: "):
        for word in message.split(": ", 1)[1].split():
            name = word.split("=", 1)[0]
            if not name.startswith("--"):
                continue
            close = difflib.get_close_matches(name, _options(parser), n=1, cutoff=0.6)
            if close:
                return f" (did you mean {close[0]}?)"
        return ""
    m = re.match(r"argument \S+: invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if m:
        choices = re.findall(r"'([^']*)'", m.group(2)) or [c.strip() for c in m.group(2).split(",")]
        close = difflib.get_close_matches(m.group(1), choices, n=1, cutoff=0.6)
        if close:
            return f" (did you mean {close[0]!r}?)"
    return ""


def mark_leaves(parser: argparse.ArgumentParser) -> None:
    """A parser without sub-commands reports arguments it does not know itself."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs and isinstance(parser, Parser):
        parser.leaf = True
    for a in subs:
        for child in a.choices.values():
            mark_leaves(child)


def examples(lines: Sequence[str]) -> str:
    """An ``examples:`` epilog (kept as written by the formatter)."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def build_parser(command: str | None = None, full_help: bool = False) -> argparse.ArgumentParser:
    """The whole command line, or (``command``; "": none) the top level with only that sub-command's
    options built: what ``main`` parses, so that a command costs only its own imports."""
    from kcodec.cli import _client

    _client.FULL_HELP = full_help
    parser = Parser(prog="kcodec", description="Apache Kafka wire codec tools",
                    epilog=examples(["kcodec produce -t events < lines.txt",
                                     "kcodec consume -t events -o beginning -e",
                                     "kcodec topics describe events",
                                     "kcodec COMMAND --help   (its options and examples)"]))
    parser.add_argument("--version", action="version", version=f"kcodec {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for mod in _commands():
        ex = getattr(mod, "EXAMPLES", None)
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP),
                           epilog=examples(ex) if ex else None)
        if command is None or command == mod.NAME:
            mod.add_arguments(p)
        p.set_defaults(run_command=mod.run)
    mark_leaves(parser)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    for a in argv:
        if not a.startswith("-"):
            return a
        if a in ("-h", "--help", "--version"):
            return None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--version"]:        # no parser to build for it
        print(f"kcodec {__version__}")
        return 0
    full = FULL_HELP in argv
    if full:
        argv = [("--help" if a == FULL_HELP else a) for a in argv]
    try:   # Ctrl-C while starting: no traceback
        parser = build_parser(_command_of(argv) or "", full)
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        return 130
    if args.command is None:         # plain `kcodec`: what there is, not only a usage error
        parser.print_help(sys.stderr)
        return 2
    from kcodec.errors import KcodecError

    try:
        return int(args.run_command(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except (KcodecError, OSError) as exc:
        print(f"kcodec {args.command}: error: {exc}", file=sys.stderr)
        return 1
