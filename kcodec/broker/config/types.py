"""Kafka's config types and validators, with Kafka's messages (``ConfigDef`` in Kafka).

    type      text                         value
    INT       "-2147483648".."2147483647"  int
    LONG      64-bit signed                int
    SHORT     16-bit signed                int
    DOUBLE    a decimal number             float
    BOOLEAN   "true" / "false" (any case)  bool
    STRING    any text                     str
    LIST      "a,b,c" (trimmed, "" = [])   list[str]
    CLASS     a Java class name            str
    PASSWORD  any text (shown as null)     str

A refused value raises :class:`ConfigError` whose text is Kafka's ``ConfigException``
message (``Invalid value X for configuration NAME: REASON``); the broker answers it as
INVALID_CONFIG with that message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ConfigDef", "ConfigError", "at_least", "between", "one_of", "list_of",
           "INT_MAX", "LONG_MAX"]

INT_MAX = (1 << 31) - 1
LONG_MAX = (1 << 63) - 1
_RANGES = {"INT": (-(1 << 31), INT_MAX), "LONG": (-(1 << 63), LONG_MAX),
           "SHORT": (-(1 << 15), (1 << 15) - 1)}


class ConfigError(ValueError):
    """A config name or value refused (Kafka's ConfigException); the text is Kafka's."""


def invalid(name: str, value: Any, reason: str) -> ConfigError:
    return ConfigError(f"Invalid value {value} for configuration {name}: {reason}")


Validator = Callable[[str, Any], None]


def at_least(lo: float) -> Validator:
    def check(name: str, v: Any) -> None:
        if v is not None and v < lo:
            raise invalid(name, v, f"Value must be at least {lo}")
    check.__doc__ = f"[{lo},...]"
    return check


def between(lo: float, hi: float) -> Validator:
    def check(name: str, v: Any) -> None:
        if v is not None and v < lo:
            raise invalid(name, v, f"Value must be at least {lo}")
        if v is not None and v > hi:
            raise invalid(name, v, f"Value must be no more than {hi}")
    check.__doc__ = f"[{lo},...,{hi}]"
    return check


def one_of(*choices: str, case_sensitive: bool = True) -> Validator:
    def check(name: str, v: Any) -> None:
        ok = v in choices if case_sensitive else str(v).lower() in {c.lower() for c in choices}
        if not ok:
            raise invalid(name, v, f"String must be one of: {', '.join(choices)}")
    check.__doc__ = f"[{', '.join(choices)}]"
    return check


def list_of(*choices: str) -> Validator:
    """Every item of a LIST among ``choices`` (no duplicates)."""
    def check(name: str, v: Any) -> None:
        for item in v:
            if item not in choices:
                raise invalid(name, item, f"String must be one of: {', '.join(choices)}")
        if len(set(v)) != len(v):
            raise invalid(name, ",".join(v), f"Configuration '{name}' values must not be "
                                             f"duplicated.")
    check.__doc__ = f"[{', '.join(choices)}]"
    return check


@dataclass(frozen=True)
class ConfigDef:
    """One config: Kafka's name, type and default (as Kafka shows it), its validator and a
    one-line documentation."""

    name: str
    type: str
    default: Any
    doc: str = ""
    validator: Validator | None = None

    def parse(self, value: Any) -> Any:
        """The typed value of ``value`` (text as given on a command line or in a request, or
        an already typed Python value); raises ConfigError with Kafka's message."""
        v = _parse(self.name, self.type, value)
        if self.validator is not None:
            self.validator(self.name, v)
        return v

    def text(self, value: Any) -> str | None:
        """``value`` as DescribeConfigs shows it."""
        return to_text(self.type, value)

    @property
    def default_text(self) -> str | None:
        return to_text(self.type, self.default)

    @property
    def valid_values(self) -> str:
        return "" if self.validator is None else (self.validator.__doc__ or "")


def to_text(type_: str, value: Any) -> str | None:
    if value is None:
        return None
    if type_ == "BOOLEAN":
        return "true" if value else "false"
    if type_ == "LIST":
        return ",".join(value)
    return str(value)


def _parse(name: str, type_: str, value: Any) -> Any:
    if value is None:
        return None
    if type_ in _RANGES:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise invalid(name, value, f"Expected value to be a {_bits(type_)} integer, but "
                                       f"it was a {type(value).__name__}")
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise invalid(name, value, f"Not a number of type {type_}") from None
        lo, hi = _RANGES[type_]
        if not lo <= value <= hi:
            raise invalid(name, value, f"Not a number of type {type_}")
        return value
    if type_ == "DOUBLE":
        try:
            return float(str(value).strip()) if not isinstance(value, bool) else _bad(name, value)
        except ValueError:
            raise invalid(name, value, "Not a number of type DOUBLE") from None
    if type_ == "BOOLEAN":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise invalid(name, value, "Expected value to be either true or false")
    if type_ == "LIST":
        if isinstance(value, (list, tuple)):
            items: Sequence[str] = [str(x).strip() for x in value]
        else:
            text = str(value).strip()
            items = [] if not text else [x.strip() for x in text.split(",")]
        return list(items)
    if type_ in ("STRING", "CLASS", "PASSWORD"):
        return str(value).strip() if type_ != "PASSWORD" else str(value)
    raise ConfigError(f"config {name}: unknown type {type_}")   # a definition's mistake


def _bad(name: str, value: Any) -> Any:
    raise invalid(name, value, "Not a number of type DOUBLE")


def _bits(type_: str) -> str:
    return {"INT": "32-bit", "LONG": "64-bit", "SHORT": "16-bit"}[type_]
