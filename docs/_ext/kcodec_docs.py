"""Sphinx directives that generate reference pages from the code, so they cannot drift.

``config-table``
    A table of a configuration class's settings: ``dataclass`` fields (the client's
    ``*Config``, the runtime's ``Settings``) or a callable's keyword parameters
    (``kcodec.broker.Cluster``), each with its type, its default and its description.
    Descriptions come from the class docstring's ``Settings:`` (or ``Args:``) section, or,
    with ``:cli: COMMAND``, from that ``kcodec`` command's ``--help`` text. A setting
    without a description, or a description of a setting that does not exist, fails the
    build, naming it.
``cli-options``
    The options of a ``kcodec`` command, from its argparse parser.
``error-tree``
    The exception hierarchy under ``kcodec.errors.KcodecError``, from the classes
    themselves.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import re
from collections.abc import Iterable
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

_SECTION = re.compile(r"^(\s*)(Settings|Args|Arguments|Parameters):\s*$")
_ENTRY = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_]*)(?:\s*\([^)]*\))?:\s*(.*)$")


def _resolve(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def docstring_settings(obj: Any) -> dict[str, str]:
    """The ``name: description`` entries of ``obj``'s Settings/Args section."""
    doc = inspect.cleandoc(obj.__doc__ or "")
    out: dict[str, str] = {}
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        m = _SECTION.match(lines[i])
        i += 1
        if not m:
            continue
        base = len(m.group(1))
        current = None
        while i < len(lines):
            line = lines[i]
            if line.strip() and len(line) - len(line.lstrip()) <= base:
                break
            e = _ENTRY.match(line)
            if e and current is not None and len(e.group(1)) > len(current[1]):
                out[current[0]] += " " + line.strip()
            elif e:
                current = (e.group(2), e.group(1))
                out[current[0]] = e.group(3).strip()
            elif current is not None and line.strip():
                out[current[0]] += " " + line.strip()
            i += 1
    return out


def _default(value: Any) -> str:
    if value is dataclasses.MISSING or value is inspect.Parameter.empty:
        return "(required)"
    if isinstance(value, str):
        return f'``"{value}"``' if value else '``""``'
    return f"``{value!r}``"


def _type(annotation: Any) -> str:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__",
                                                                  repr(annotation))
    return f"``{text.replace('typing.', '')}``"


def settings_of(obj: Any, own_only: bool) -> list[tuple[str, str, str]]:
    """(name, type, default) of a dataclass's fields or a callable's keyword parameters."""
    rows = []
    if dataclasses.is_dataclass(obj):
        base_fields: set[str] = set()
        if own_only:
            for base in obj.__mro__[1:]:
                if dataclasses.is_dataclass(base):
                    base_fields |= {f.name for f in dataclasses.fields(base)}
        for f in dataclasses.fields(obj):
            if f.name in base_fields or f.name.startswith("_"):
                continue
            if f.default is not dataclasses.MISSING:
                default = _default(f.default)
            elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
                made = f.default_factory()  # type: ignore[misc]
                default = _default(made) if made in ([], {}, ()) else "(from the environment)"
            else:
                default = _default(dataclasses.MISSING)
            rows.append((f.name, _type(f.type), default))
        return rows
    target = obj.__init__ if inspect.isclass(obj) else obj
    for p in inspect.signature(target).parameters.values():
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        rows.append((p.name, _type(p.annotation), _default(p.default)))
    return rows


def _parser_for(command: str) -> argparse.ArgumentParser:
    from kcodec.cli import build_parser

    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            if command in action.choices:
                return action.choices[command]
    raise ExtensionError(f"kcodec has no command {command!r}")


def cli_help(command: str) -> dict[str, tuple[str, str]]:
    """dest -> (the option's flags, its help) for one ``kcodec`` command."""
    out = {}
    for action in _parser_for(command)._actions:
        if action.help in (None, argparse.SUPPRESS) or isinstance(action, argparse._HelpAction):
            continue
        flags = ", ".join(action.option_strings) or (action.metavar or action.dest)
        out[action.dest] = (str(flags), str(action.help))
    return out


def _list_table(header: list[str], rows: Iterable[list[str]], widths: str) -> list[str]:
    """A Markdown (MyST) table: the directives run inside MyST pages."""
    del widths
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        out.append("| " + " | ".join(cell.replace("\n", " ").replace("|", r"\|") or " "
                                     for cell in row) + " |")
    return out


def _escape(text: str) -> str:
    """Docstring text (reStructuredText inline markup) as Markdown for a table cell."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)     # :class:`X` -> `X`
    text = re.sub(r"``([^`]+)``", r"`\1`", text)
    return text.replace("*", r"\*")


class ConfigTable(SphinxDirective):
    required_arguments = 1
    option_spec = {"own": lambda arg: True, "cli": str, "aliases": lambda arg: True}

    def run(self) -> list[nodes.Node]:
        path = self.arguments[0]
        obj = _resolve(path)
        own = "own" in self.options
        rows = settings_of(obj, own)
        documented = docstring_settings(obj)
        flags: dict[str, tuple[str, str]] = {}
        if "cli" in self.options:
            flags = cli_help(self.options["cli"])
        names = {r[0] for r in rows}
        stale = sorted(set(documented) - names)
        if stale:
            raise self.error(f"{path}'s docstring describes {', '.join(stale)}, which it "
                             "does not have: remove them from its Settings section")
        missing = [n for n, _, _ in rows if n not in documented and n not in flags]
        if missing:
            raise self.error(f"{path}: no description for {', '.join(missing)}: add them to "
                             "the Settings section of its docstring")
        aliases: dict[str, list[str]] = {}
        if "aliases" in self.options:
            from kcodec.client.config_names import ALIASES

            for other, ours in ALIASES.items():
                aliases.setdefault(ours, []).append(other)
        table = []
        for name, kind, default in rows:
            text = documented.get(name) or flags[name][1]
            first = f"`{name}`"
            if name in flags:
                first += f" (`{flags[name][0]}`)"
            cells = [first, kind, default, _escape(text)]
            if "aliases" in self.options:
                java = name.replace("_", ".")
                cells.append(", ".join(f"`{a}`" for a in sorted(aliases.get(name, []))
                                       if a != java) or "")
            table.append(cells)
        header = ["setting", "type", "default", "meaning"]
        widths = "22 14 14 50"
        if "aliases" in self.options:
            header.append("also accepted as")
            widths = "20 12 12 40 16"
        return self._parse(_list_table(header, table, widths))

    def _parse(self, lines: list[str]) -> list[nodes.Node]:
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source="generated"), self.content_offset,
                                container)
        return container.children


class CliOptions(ConfigTable):
    required_arguments = 1
    option_spec: dict[str, Any] = {}

    def run(self) -> list[nodes.Node]:
        command = self.arguments[0]
        rows = []
        for action in _parser_for(command)._actions:
            if action.help in (None, argparse.SUPPRESS) or isinstance(action,
                                                                      argparse._HelpAction):
                continue
            flags = ", ".join(f"`{o}`" for o in action.option_strings)
            if not flags:
                flags = f"`{action.metavar or action.dest}`"
            rows.append([flags, _escape(str(action.help))])
        return self._parse(_list_table(["option", "meaning"], rows, "30 70"))


def error_classes() -> list[type]:
    from kcodec.errors import KcodecError

    for module in ("kcodec.errors", "kcodec.client.errors", "kcodec.client"):
        importlib.import_module(module)
    return [KcodecError]


class ErrorTree(ConfigTable):
    required_arguments = 0
    option_spec = {}

    def run(self) -> list[nodes.Node]:
        (root,) = error_classes()
        lines: list[str] = []

        def walk(cls: type, depth: int) -> None:
            public = _public_path(cls)
            if public is None:      # internal (the broker's own log errors, ...)
                return
            also = [b.__name__ for b in cls.__bases__ if b.__module__ == "builtins"
                    and b is not Exception]
            doc = inspect.getdoc(cls) or ""
            summary = doc.split("\n\n")[0].replace("\n", " ")
            extra = f" (also {', '.join(also)})" if also else ""
            lines.append("  " * depth + f"- `{cls.__name__}`{extra}, `{public}`: "
                         + _escape(summary))
            for sub in sorted(cls.__subclasses__(), key=lambda c: (c.__module__, c.__name__)):
                walk(sub, depth + 1)

        walk(root, 0)
        return self._parse(lines)


PUBLIC_ERROR_MODULES = ("kcodec.errors", "kcodec.client")


def _public_path(cls: type) -> str | None:
    """Where users import ``cls`` from (None: it is internal)."""
    for module in PUBLIC_ERROR_MODULES:
        mod = importlib.import_module(module)
        if cls.__name__ in getattr(mod, "__all__", ()) and getattr(mod, cls.__name__) is cls:
            return f"{module}.{cls.__name__}"
    return None


class ProtocolMessages(ConfigTable):
    required_arguments = 0
    option_spec = {}

    def run(self) -> list[nodes.Node]:
        from kcodec.protocol import REQUESTS, RESPONSES, ApiKey

        rows = []
        for key, req in REQUESTS.items():
            resp = RESPONSES.get(key)
            try:
                api = ApiKey(key).name
            except ValueError:
                api = str(key)
            versions = f"{req.MIN_VERSION}-{req.MAX_VERSION}"
            rows.append([str(key), f"`{api}`", f"`{req.__name__}`",
                         f"`{resp.__name__}`" if resp else "", versions])
        return self._parse(_list_table(["key", "ApiKey", "request", "response", "versions"],
                                       rows, "6 30 26 26 12"))


# What each floor of tests/house/test_layers.py holds, for the picture (the modules come from the
# test's FLOORS, so a module moved between floors moves in the picture too).
FLOOR_NAMES = {
    4: "the leaves: built on everything below, imported only by users",
    3: "the client",
    2: "the faces: primitives, records, protocol",
    1: "the twins: compiled (_cy) and pure Python (_py)",
    0: "the floor: errors, limits, the twin choice",
}


def layer_floors() -> dict[str, int]:
    """The FLOORS table of tests/house/test_layers.py, read from its source: importing the
    test would need pytest, and the docs build must not need the test extra."""
    import ast
    import os

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(root, "tests", "house", "test_layers.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "FLOORS" for t in node.targets):
            floors: dict[str, int] = ast.literal_eval(node.value)
            return floors
    raise ExtensionError(f"{path} has no FLOORS table for the layers picture")


def layers_svg() -> str:
    """The layers of tests/house/test_layers.py as an SVG picture: one band per floor, top down,
    each with its modules; imports point down."""
    from html import escape

    floors: dict[int, list[str]] = {}
    for module, floor in layer_floors().items():
        short = "kcodec (root)" if module == "kcodec" else module.split(".", 1)[1]
        floors.setdefault(floor, []).append(short)
    width, band, gap, left = 760, 58, 14, 12
    height = len(floors) * (band + gap) + gap
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="#ffffff"/>']
    colours = {4: "#e8f1fb", 3: "#e9f7ec", 2: "#fff6e0", 1: "#f7eaf4", 0: "#eeeeee"}
    for i, floor in enumerate(sorted(floors, reverse=True)):
        y = gap + i * (band + gap)
        out.append(f'<rect x="{left}" y="{y}" width="{width - 2 * left - 40}" height="{band}" '
                   f'rx="6" fill="{colours.get(floor, "#eeeeee")}" stroke="#666666"/>')
        out.append(f'<text x="{left + 10}" y="{y + 20}" font-weight="bold">floor {floor}: '
                   f'{escape(FLOOR_NAMES.get(floor, ""))}</text>')
        names = "  ".join(sorted(floors[floor]))
        out.append(f'<text x="{left + 10}" y="{y + 42}" font-family="monospace">'
                   f'{escape(names)}</text>')
        if i:
            ax = width - 34
            out.append(f'<line x1="{ax}" y1="{y - band - gap + 10}" x2="{ax}" y2="{y + 8}" '
                       'stroke="#333333" stroke-width="2"/>')
            out.append(f'<polygon points="{ax - 5},{y + 2} {ax + 5},{y + 2} {ax},{y + 10}" '
                       'fill="#333333"/>')
    out.append(f'<text x="{width - 8}" y="{height // 2}" text-anchor="middle" '
               f'transform="rotate(90 {width - 8} {height // 2})">imports point down</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


class LayersDiagram(ConfigTable):
    required_arguments = 0
    option_spec = {}

    def run(self) -> list[nodes.Node]:
        return [nodes.raw("", layers_svg(), format="html")]


# Napoleon's section headers: the indented block after one of these is napoleon's to read.
_NAPOLEON = {"args", "arguments", "parameters", "params", "returns", "return", "yields",
             "yield", "raises", "raise", "attributes", "example", "examples", "note",
             "notes", "warning", "warnings", "see also", "keyword args", "keyword arguments",
             "other parameters", "methods", "references", "todo"}


def _dedent_as_written(obj: Any, lines: list[str]) -> list[str]:
    """The docstring's lines dedented by the indentation of its closing quotes, not by the
    smallest indentation after the first line as autodoc does: a docstring of one summary
    line and an indented example would otherwise lose the example's indentation."""
    raw = getattr(obj, "__doc__", None)
    if not isinstance(raw, str) or "\n" not in raw:
        return lines
    last = raw.rsplit("\n", 1)[1]
    if last.strip():
        return lines
    from sphinx.util.docstrings import prepare_docstring

    if [x.rstrip() for x in prepare_docstring(raw)] != [x.rstrip() for x in lines]:
        return lines      # not the object's own docstring as autodoc prepared it
    body = raw.expandtabs(8).split("\n")
    width = len(last.expandtabs(8))
    mine = [body[0].strip()] + [ln[width:] if ln[:width].strip() == "" else ln.lstrip()
                                for ln in body[1:]]
    while mine and not mine[-1].strip():
        mine.pop()
    return mine + [""]


def literal_examples(app: Sphinx, what: str, name: str, obj: Any, options: Any,
                     lines: list[str]) -> None:
    """kcodec's docstrings show examples as indented blocks after a paragraph (the house
    style, readable in help()); make each such block a literal block for Sphinx, as help()
    shows it, unless its paragraph already ends with ``::`` or is a napoleon section."""
    lines[:] = _dedent_as_written(obj, lines)
    out: list[str] = []
    prev_text = ""
    blank_before = True
    i = 0
    while i < len(lines):
        line = lines[i]
        indented = line.startswith((" ", "\t")) and line.strip()
        if indented and blank_before and prev_text and not prev_text.rstrip().endswith("::"):
            header = prev_text.strip().rstrip(":").lower()
            if not (prev_text.strip().endswith(":") and header in _NAPOLEON) \
                    and not prev_text.lstrip().startswith(("* ", "- ", ".. ")):
                out += ["::", ""]
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
                out.append(lines[i])
                i += 1
            prev_text = ""
            blank_before = bool(out) and not out[-1].strip()
            continue
        out.append(line)
        if line.strip():
            if not line.startswith((" ", "\t")):
                prev_text = line
            blank_before = False
        else:
            blank_before = True
        i += 1
    lines[:] = out


class KafkaConfigs(ConfigTable):
    """A table of configs by Kafka's names from a ``doc_rows()`` function (its path) that
    returns the header and the rows."""

    required_arguments = 1
    option_spec: dict[str, Any] = {}

    def run(self) -> list[nodes.Node]:
        header, rows = _resolve(self.arguments[0])()
        return self._parse(_list_table(header, rows, ""))


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("autodoc-process-docstring", literal_examples, priority=400)
    app.add_directive("config-table", ConfigTable)
    app.add_directive("cli-options", CliOptions)
    app.add_directive("error-tree", ErrorTree)
    app.add_directive("protocol-messages", ProtocolMessages)
    app.add_directive("layers-diagram", LayersDiagram)
    app.add_directive("kafka-configs", KafkaConfigs)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":    # python docs/_ext/kcodec_docs.py: rewrite the committed picture
    import pathlib

    target = pathlib.Path(__file__).resolve().parent.parent / "_static" / "layers.svg"
    target.write_text(layers_svg())
    print(f"wrote {target}")
