"""Regular-expression subscriptions of the consumer group protocol (KIP-848).

A member may subscribe with ``SubscribedTopicRegex``; Kafka's group coordinator compiles it
with RE2/J (``com.google.re2j``) and matches it against every topic name as a whole. kcodec's
broker compiles it with Google's RE2 (the ``google-re2`` package, ``pip install
'kcodec[broker]'``), whose syntax RE2/J follows: no backreferences and no lookaround, and a
match takes linear time, so a hostile pattern cannot stall the coordinator. A pattern RE2
rejects is INVALID_REGULAR_EXPRESSION, with RE2's reason, as Kafka answers it.

``Resolver`` keeps each pattern's matches for the cluster's current set of topic names and
matches again only when that set changes (a topic created or deleted).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["RegexError", "compile_regex", "Resolver"]

MAX_PATTERN = 4096     # characters: a subscription pattern is a short thing


class RegexError(ValueError):
    """A pattern the coordinator cannot use; the message says why."""


def _re2() -> Any:
    try:
        import re2
    except ImportError:
        raise RegexError("kcodec's broker matches subscription patterns with RE2 (RE2/J "
                         "syntax): install google-re2 (pip install 'kcodec[broker]')") from None
    return re2


def compile_regex(pattern: str) -> Any:
    """The compiled RE2 pattern, or ``RegexError`` naming what is wrong."""
    if len(pattern) > MAX_PATTERN:
        raise RegexError(f"SubscribedTopicRegex is {len(pattern)} characters long; at most "
                         f"{MAX_PATTERN} are accepted")
    re2 = _re2()
    options = re2.Options()
    options.log_errors = False      # the reason goes to the member, not to stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise RegexError(f"SubscribedTopicRegex `{pattern}` is not a valid regular "
                         f"expression: {reason}.") from None


class Resolver:
    """Each pattern's matching topics among the current names (see the module docstring)."""

    def __init__(self) -> None:
        self._names: frozenset[str] = frozenset()
        self._cache: dict[str, frozenset[str]] = {}

    def matches(self, pattern: str, names: Iterable[str]) -> frozenset[str]:
        current = frozenset(names)
        if current != self._names:
            self._names, self._cache = current, {}
        got = self._cache.get(pattern)
        if got is None:
            try:
                rx = compile_regex(pattern)
            except RegexError:
                got = frozenset()       # checked when the member subscribed
            else:
                got = frozenset(n for n in current if rx.fullmatch(n) is not None)
            if len(self._cache) > 1024:
                self._cache.clear()
            self._cache[pattern] = got
        return got
