"""The cyclic GC set up for a long-running kcodec process of its own (a runtime child, the
``kcodec broker`` command), never for a library user's process.

Under CPython's defaults a busy process runs a young collection every 700 net allocations
and, as survivors pile up, full collections that walk every tracked object it has: the tens
of thousands its imports and set-up made, which never die. ``settle()`` collects once, then
freezes what exists (``gc.freeze()``: kept out of every later collection; a frozen object
is still freed when its last reference goes, only never as part of a garbage cycle) and
raises the young threshold. What the process makes afterwards is collected as usual.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "settle"]

# the young-generation threshold once settled (CPython's default: 700)
YOUNG_THRESHOLD = 10_000


def settle() -> None:
    """Collect what set-up left, freeze the rest, and set the young threshold to
    ``YOUNG_THRESHOLD``; the older generations' thresholds are kept."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
