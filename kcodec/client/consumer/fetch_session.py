"""Incremental fetch sessions (KIP-227), sans-I/O: one ``FetchSession`` per broker.

The first Fetch to a broker is full with ``session_id=0, session_epoch=0`` ("create a
session"). A broker with sessions answers a session id; later fetches carry that id and
the next epoch and list only partitions that are new or whose fetch offset changed, plus
the partitions to forget. The broker answers only partitions with something to say, and
its answers for partitions left out of a request refer to the offsets the session
remembers, which ``offsets`` gives. A broker without sessions answers id 0: then every
fetch is full and sessionless (epoch -1), as before KIP-227.

    Fetch(session_id=0,  epoch=0,  all partitions)            -> session_id=S
    Fetch(session_id=S,  epoch=1,  changed partitions, forgotten=[...])
    Fetch(session_id=S,  epoch=2,  ...)           epochs wrap from 2**31-1 to 1
    FETCH_SESSION_ID_NOT_FOUND (70) / INVALID_FETCH_SESSION_EPOCH (71) / a lost request:
                                  start again with a full fetch creating a new session
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

from kcodec.protocol import ErrorCode

__all__ = ["FetchSession", "SESSION_ERRORS"]

SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
SESSIONLESS = -1
INITIAL = 0
MAX_EPOCH = 0x7FFFFFFF

K = TypeVar("K", bound=Hashable)   # how the caller names a partition


class FetchSession(Generic[K]):
    """Session state with one broker. Use: ``build``, send, then ``on_response`` (or
    ``on_error`` if no answer came)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled          # False: the broker has no sessions (or too old)
        self.session_id = 0
        self.epoch = INITIAL if enabled else SESSIONLESS
        self.offsets: dict[K, int] = {}   # what the broker's session holds
        self._pending: dict[K, int] | None = None
        self.full_fetches = 0
        self.incremental_fetches = 0
        self.topic_ids = False          # this session names topics by id (Fetch v13+)

    def __repr__(self) -> str:
        return (f"<FetchSession id={self.session_id} epoch={self.epoch} "
                f"partitions={len(self.offsets)}>")

    @property
    def incremental(self) -> bool:
        return self.enabled and self.session_id != 0 and self.epoch > 0

    def build(self, wanted: dict[K, int]) -> tuple[int, int, dict[K, int], list[K]]:
        """(session_id, epoch, partitions to send with their offsets, partitions to forget)
        for a fetch of ``wanted`` ({partition: fetch offset})."""
        self._pending = dict(wanted)
        if not self.incremental:
            self.full_fetches += 1
            return (self.session_id if self.enabled else 0, self.epoch, dict(wanted), [])
        self.incremental_fetches += 1
        send = {tp: off for tp, off in wanted.items() if self.offsets.get(tp) != off}
        forget = [tp for tp in self.offsets if tp not in wanted]
        return self.session_id, self.epoch, send, forget

    def on_response(self, error_code: int, session_id: int) -> bool:
        """Record the broker's answer; False means: the session is gone, fetch again in full
        (the answer's partition data is still good unless the top-level error is set)."""
        pending, self._pending = self._pending or {}, None
        if not self.enabled:
            return error_code == 0
        if error_code in SESSION_ERRORS:
            self.reset()
            return False
        if error_code:
            self.reset()
            return True
        if self.epoch == INITIAL:
            if session_id == 0:          # the broker keeps no sessions: stay sessionless
                self.enabled = False
                self.epoch = SESSIONLESS
                self.offsets = {}
                return True
            self.session_id = session_id
            self.epoch = 1
        else:
            self.epoch = 1 if self.epoch >= MAX_EPOCH else self.epoch + 1
        self.offsets = pending
        return True

    def on_error(self) -> None:
        """No answer (timeout, lost connection): the broker's state is unknown."""
        self._pending = None
        self.reset()

    def reset(self) -> None:
        if self.enabled:
            self.session_id = 0
            self.epoch = INITIAL
        self.offsets = {}
