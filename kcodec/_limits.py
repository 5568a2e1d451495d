"""Limits shared by the compression registry and both xerial twins.

DEFAULT_MAX_SIZE bounds every decompression unless the caller passes another ``max_size``.
It is 100 MiB: the largest request a broker accepts by default (``socket.request.max.bytes``
= 104857600) and about librdkafka's cap on a decompressed batch
(``receive.message.max.bytes`` = 100000000). A real batch beyond it is rare (a 1 MiB
``message.max.bytes`` batch would need a compression ratio above 100); a decompression bomb
costs at most this much memory, and most bombs fail before any work because their headers
already declare a size above it.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["DEFAULT_MAX_SIZE", "check_max_size"]

DEFAULT_MAX_SIZE = 100 * 1024 * 1024


def check_max_size(max_size: Any) -> int:
    """``max_size`` as an int in [0, sys.maxsize - 1] (larger values mean "no practical limit")."""
    if not isinstance(max_size, int) or isinstance(max_size, bool) or max_size < 0:
        raise ValueError(f"max_size must be a non-negative int, not {max_size!r}")
    return min(max_size, sys.maxsize - 1)
