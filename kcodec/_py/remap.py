"""An iterator that hands on another iterator's items and turns one family of exceptions
into another on the way:

    remap_errors(iterator, catch, convert)  ->  iterator
        next()  = next(iterator)
        raises    convert(exc) from exc         when next(iterator) raised ``exc``, an
                                                instance of ``catch`` (a class or a tuple)
        others    pass through unchanged (StopIteration ends it)

The adapters in ``kcodec.compat`` use it so that a record decoding error surfaces as the
peer client's own exception type, chained from kcodec's, at the record where it happened.
The compiled twin costs no Python frame per item.

This is the pure-Python twin; ``kcodec._cy.remap`` must give the same results and errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["remap_errors"]


def remap_errors(iterator: Iterable[Any],
                 catch: type[BaseException] | tuple[type[BaseException], ...],
                 convert: Callable[[Any], BaseException]) -> Iterator[Any]:
    """The items of ``iterator``; an exception of ``catch`` it raises becomes
    ``convert(exc)``, raised from ``exc``."""
    return _remapped(iter(iterator), catch, convert)


def _remapped(it: Iterator[Any], catch: Any, convert: Callable[[Any], BaseException]
              ) -> Iterator[Any]:
    try:
        yield from it
    except catch as exc:
        raise convert(exc) from exc
