"""Declaration records used by the generated modules in ``kcodec.protocol.messages``.

The generated code calls :func:`F` (a field), and :func:`M` (a message, header or data
struct with its nested structs). They only record facts: names, types, version ranges,
tags, defaults. Version ranges stay in the specs' own notation ("3+", "0-7", "none") and
are parsed here into inclusive ``(low, high)`` tuples (``None`` for "none").
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["Field", "MessageDecl", "F", "M", "parse_range", "in_range", "MAX_VERSION"]

MAX_VERSION = 0x7FFF

Range = tuple[int, int] | None


def parse_range(text: str | None) -> Range:
    """``"3+"`` -> (3, 32767); ``"0-7"`` -> (0, 7); ``"5"`` -> (5, 5); ``"none"``/None -> None."""
    if text is None:
        return None
    text = text.strip()
    if text == "none" or text == "":
        return None
    if text.endswith("+"):
        return (int(text[:-1]), MAX_VERSION)
    if "-" in text:
        lo, hi = text.split("-", 1)
        return (int(lo), int(hi))
    return (int(text), int(text))


def in_range(version: int, rng: Range) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


class Field(NamedTuple):
    """One field: ``name`` is the snake_case attribute, ``type`` the spec type string."""

    name: str
    type: str
    versions: str
    nullable: str | None = None
    tag: int | None = None
    tagged: str | None = None
    default: Any = None
    has_default: bool = False
    flexible: str | None = None
    ignorable: bool = False


class MessageDecl(NamedTuple):
    """A top-level spec: a request, response, header or data struct."""

    name: str
    kind: str
    api_key: int | None
    valid: str
    flexible: str
    fields: tuple[Field, ...]
    structs: dict[str, tuple[Field, ...]]
    latest_unstable: bool = False
    # versions taken from an older copy of the specs (KIP-896 removed them), and that copy
    legacy: str | None = None
    legacy_source: str | None = None
    # the spec's headerVersions map (version range -> header version), when it has one
    headers: dict[str, int] | None = None


_NO_DEFAULT = object()


def F(
    name: str,
    type: str,
    versions: str,
    *,
    nullable: str | None = None,
    tag: int | None = None,
    tagged: str | None = None,
    default: Any = _NO_DEFAULT,
    flexible: str | None = None,
    ignorable: bool = False,
) -> Field:
    has = default is not _NO_DEFAULT
    return Field(name, type, versions, nullable, tag, tagged, default if has else None, has,
                 flexible, ignorable)


def M(
    name: str,
    kind: str,
    *,
    valid: str,
    flexible: str,
    fields: list[Field],
    api_key: int | None = None,
    structs: dict[str, list[Field]] | None = None,
    latest_unstable: bool = False,
    legacy: str | None = None,
    legacy_source: str | None = None,
    headers: dict[str, int] | None = None,
) -> MessageDecl:
    return MessageDecl(
        name, kind, api_key, valid, flexible, tuple(fields),
        {k: tuple(v) for k, v in (structs or {}).items()}, latest_unstable, legacy, legacy_source,
        headers,
    )
