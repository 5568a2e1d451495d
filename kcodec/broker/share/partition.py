"""A share partition: one topic partition as one share group sees it (KIP-932).

The share-partition leader keeps, for each group reading the partition, a window of
records in flight::

    start offset (SPSO)                     end (next offset never handed out)
         |<------------- in flight -------------->|
         [ batch ][ batch ][ batch ] ...           records after end: not yet fetched

Each in-flight offset has a state, a delivery count and, while acquired, an owner (the
member) and a lock deadline::

    AVAILABLE --acquire--> ACQUIRED --accept / gap--> ACKNOWLEDGED
        ^                     |  |---reject------------> ARCHIVED
        |----release / lock --|  |---release or lock timeout at the delivery
             timeout (count < limit)   count limit -----> ARCHIVED

The start offset moves up over the leading offsets that are ACKNOWLEDGED or ARCHIVED;
everything below it is done for the group. An in-flight batch keeps one byte per offset
for the state and one for the count (``bytearray``), so the common work (acquire a whole
batch, accept it) is a few slice assignments, not a loop over records.

A :class:`SharePartition` is not thread-safe: the manager holds ``lock`` around each call.
"""

from __future__ import annotations

import threading
from typing import Any

from kcodec.protocol import ErrorCode

__all__ = ["SharePartition", "InFlight", "AVAILABLE", "ACQUIRED", "ACKNOWLEDGED", "ARCHIVED",
           "GAP", "ACCEPT", "RELEASE", "REJECT", "RENEW", "STATE_NAMES"]

# record states, numbered as Kafka's RecordState
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
STATE_NAMES = {AVAILABLE: "Available", ACQUIRED: "Acquired", ACKNOWLEDGED: "Acknowledged",
               ARCHIVED: "Archived"}
# acknowledge types, as on the wire (ShareFetch / ShareAcknowledge)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4

_NOT_AVAILABLE = (bytes([ACQUIRED]), bytes([ACKNOWLEDGED]), bytes([ARCHIVED]))
_DONE = {ACKNOWLEDGED, ARCHIVED}

Range = tuple[int, int, int]          # (first offset, last offset, delivery count)


class InFlight:
    """A run of consecutive in-flight offsets from ``first`` (one log batch, or the part of
    one that is in the window)."""

    __slots__ = ("first", "state", "count", "owner", "deadline")

    def __init__(self, first: int, n: int, state: int, count: int, owner: str | None,
                 deadline: float) -> None:
        self.first = first
        self.state = bytearray([state]) * n
        self.count = bytearray([count]) * n
        self.owner: list[str | None] = [owner] * n
        self.deadline: list[float] = [deadline] * n

    @property
    def end(self) -> int:
        return self.first + len(self.state)


def _run_end(st: bytearray, i: int) -> int:
    """The end of the run of AVAILABLE offsets that starts at ``i``."""
    n = len(st)
    end = n
    for b in _NOT_AVAILABLE:
        j = st.find(b, i, end)
        if j >= 0:
            end = j
    return end


class SharePartition:
    def __init__(self, group_id: str, topic: str, index: int, start: int) -> None:
        self.group_id = group_id
        self.topic = topic
        self.index = index
        # the topic's id: a topic recreated under its name is another topic, with share
        # state of its own
        self.topic_id = ""
        self.start = start
        self.end = start
        self.batches: list[InFlight] = []
        self.acquired = 0          # offsets in the ACQUIRED state
        self.lock = threading.Lock()

    # ------------------------------------------------------------------ state
    @classmethod
    def restore(cls, group_id: str, topic: str, index: int, snap: dict[str, Any]) -> SharePartition:
        """A share partition from :meth:`snapshot` (after a restart: nothing is acquired)."""
        sp = cls(group_id, topic, index, int(snap["s"]))
        for first, last, state, count in snap.get("r", ()):
            if state not in (AVAILABLE, ACKNOWLEDGED, ARCHIVED) or last < first:
                continue
            if sp.batches and sp.batches[-1].end != first:
                continue                  # a hole: the rest is fetched again
            sp.batches.append(InFlight(first, last - first + 1, state, count, None, 0.0))
            sp.end = last + 1
        sp._advance()
        return sp

    def snapshot(self) -> dict[str, Any]:
        """What survives a restart: the start offset and the in-flight runs (state, count);
        an acquired record is written as available (its lock dies with the broker)."""
        runs: list[list[int]] = []
        for b in self.batches:
            st, cnt = b.state, b.count
            n = len(st)
            i = max(0, self.start - b.first)         # what is below the start is done
            while i < n:
                s = st[i] if st[i] != ACQUIRED else AVAILABLE
                c = cnt[i]
                j = i + 1
                while j < n and (st[j] if st[j] != ACQUIRED else AVAILABLE) == s and cnt[j] == c:
                    j += 1
                if runs and runs[-1][1] == b.first + i - 1 and runs[-1][2] == s and runs[-1][3] == c:
                    runs[-1][1] = b.first + j - 1
                else:
                    runs.append([b.first + i, b.first + j - 1, s, c])
                i = j
        return {"s": self.start, "r": runs}

    def reset(self, start: int) -> None:
        """Forget everything in flight and start again at ``start`` (offsets altered or
        deleted by an admin, or the log start moved past the window)."""
        self.start = self.end = start
        self.batches = []
        self.acquired = 0

    def state_of(self, offset: int) -> tuple[int, int] | None:
        """(state, delivery count) of an in-flight offset; None outside the window."""
        for b in self.batches:
            if b.first <= offset < b.end:
                i = offset - b.first
                return b.state[i], b.count[i]
        return None

    def in_flight(self) -> int:
        return self.end - self.start

    # ------------------------------------------------------------------ acquiring
    def acquire_available(self, member: str, budget: int, strict: bool, deadline: float,
                          locks: int | None = None) -> list[Range]:
        """Acquire in-flight records that are AVAILABLE again (released, or a lock that
        timed out), oldest first, for at most ``budget`` offsets when ``strict`` (else
        whole runs), and never more than ``locks`` (the records the partition may still
        lock); their delivery counts go up by one."""
        out: list[Range] = []
        for b in self.batches:
            if budget <= 0 or locks is not None and locks <= 0:
                break
            st = b.state
            i = st.find(AVAILABLE)
            while i >= 0 and budget > 0 and (locks is None or locks > 0):
                j = _run_end(st, i)
                if strict:
                    j = min(j, i + budget)
                if locks is not None:
                    j = min(j, i + locks)
                    locks -= j - i
                k = j - i
                st[i:j] = bytes([ACQUIRED]) * k
                b.owner[i:j] = [member] * k
                b.deadline[i:j] = [deadline] * k
                cnt = b.count
                first = i
                for x in range(i, j):
                    c = cnt[x] + 1 if cnt[x] < 255 else 255
                    cnt[x] = c
                    if x > first and c != cnt[x - 1]:
                        out.append((b.first + first, b.first + x - 1, cnt[x - 1]))
                        first = x
                out.append((b.first + first, b.first + j - 1, cnt[j - 1]))
                budget -= k
                self.acquired += k
                i = st.find(AVAILABLE, j)
        return out

    def acquire_new(self, member: str, entries: list[tuple[int, int, bool]], budget: int,
                    strict: bool, deadline: float, locks: int | None = None
                    ) -> tuple[list[Range], list[int]]:
        """Acquire records read from the log after ``end``: ``entries`` are the log
        batches (first offset, last offset, is a control batch) in order. Control batches
        (transaction markers) are archived, never delivered. At most ``locks`` records are
        acquired (a batch bigger than that is acquired in part, its rest left AVAILABLE).
        Returns the acquired ranges and the indexes of the entries they are in (the bytes
        to send)."""
        out: list[Range] = []
        taken: list[int] = []
        for n_entry, (_base, last, control) in enumerate(entries):
            if last < self.end:
                continue
            if control:
                if budget <= 0 and strict:
                    break
                self.batches.append(InFlight(self.end, last - self.end + 1, ARCHIVED, 0, None, 0.0))
                self.end = last + 1
                continue
            if budget <= 0 or locks is not None and locks <= 0:
                break
            first = self.end                       # a gap (compaction) rides along
            n = last - first + 1
            take = min(n, budget) if strict else n
            if locks is not None:
                take = min(take, locks)
                locks -= take
            b = InFlight(first, n, AVAILABLE, 0, None, 0.0)
            b.state[:take] = bytes([ACQUIRED]) * take
            b.count[:take] = bytes([1]) * take
            b.owner[:take] = [member] * take
            b.deadline[:take] = [deadline] * take
            self.batches.append(b)
            self.end = last + 1
            self.acquired += take
            budget -= take
            out.append((first, first + take - 1, 1))
            taken.append(n_entry)
        self._advance()
        return out, taken

    # ------------------------------------------------------------------ acknowledging
    def acknowledge(self, member: str, first: int, last: int, types: list[int], limit: int,
                    renew_deadline: float) -> int:
        """Apply one acknowledgement batch of ``member``; 0 or the error code. Every offset
        must be acquired by that member (else INVALID_RECORD_STATE and nothing changes)."""
        n = last - first + 1
        if n <= 0 or not types or (len(types) != 1 and len(types) != n) or \
                any(t not in (GAP, ACCEPT, RELEASE, REJECT, RENEW) for t in types):
            return ErrorCode.INVALID_REQUEST
        if first < self.start or last >= self.end:
            return ErrorCode.INVALID_RECORD_STATE
        spans = []
        for b in self.batches:
            if b.end <= first:
                continue
            if b.first > last:
                break
            i, j = max(first, b.first) - b.first, min(last + 1, b.end) - b.first
            if b.state.count(ACQUIRED, i, j) != j - i or b.owner[i:j].count(member) != j - i:
                return ErrorCode.INVALID_RECORD_STATE
            spans.append((b, i, j))
        for b, i, j in spans:
            if len(types) == 1:
                self._apply(b, i, j, types[0], limit, renew_deadline)
            else:
                base = b.first + i - first
                x = i
                while x < j:                       # runs of one type
                    t = types[base + x - i]
                    y = x + 1
                    while y < j and types[base + y - i] == t:
                        y += 1
                    self._apply(b, x, y, t, limit, renew_deadline)
                    x = y
        self._advance()
        return 0

    def _apply(self, b: InFlight, i: int, j: int, t: int, limit: int, deadline: float) -> None:
        k = j - i
        if t == RENEW:                             # KIP-1222: a new lock, same delivery
            b.deadline[i:j] = [deadline] * k
            return
        if t == RELEASE:
            self._free(b, i, j, limit)
            return
        b.state[i:j] = bytes([ACKNOWLEDGED if t in (ACCEPT, GAP) else ARCHIVED]) * k
        b.owner[i:j] = [None] * k
        self.acquired -= k

    def _free(self, b: InFlight, i: int, j: int, limit: int) -> None:
        """Acquired offsets i..j of ``b`` go back: AVAILABLE, or ARCHIVED once delivered
        ``limit`` times."""
        st, cnt = b.state, b.count
        for x in range(i, j):
            if st[x] == ACQUIRED:
                st[x] = ARCHIVED if cnt[x] >= limit else AVAILABLE
                b.owner[x] = None
                self.acquired -= 1

    def release_member(self, member: str, limit: int) -> bool:
        """Everything ``member`` holds goes back (its share session closed, it left)."""
        changed = False
        for b in self.batches:
            if member in b.owner:
                for x, o in enumerate(b.owner):
                    if o == member and b.state[x] == ACQUIRED:
                        self._free(b, x, x + 1, limit)
                        changed = True
        self._advance()
        return changed

    def expire_locks(self, now: float, limit: int) -> bool:
        """Acquisition locks past their deadline: the records go back (or are archived at
        the delivery count limit). True if any did."""
        if not self.acquired:
            return False
        changed = False
        for b in self.batches:
            if ACQUIRED not in b.state or min(b.deadline) > now:
                continue
            for x, d in enumerate(b.deadline):
                if d <= now and b.state[x] == ACQUIRED:
                    self._free(b, x, x + 1, limit)
                    changed = True
        if changed:
            self._advance()
        return changed

    def archive_below(self, offset: int) -> None:
        """The log start moved up to ``offset`` (retention, DeleteRecords): what is below it
        can no longer be delivered."""
        if offset <= self.start:
            return
        if offset >= self.end:
            self.reset(offset)
            return
        for b in self.batches:
            lo, hi = b.first, min(b.end, offset)
            if lo >= hi:
                break
            for x in range(0, hi - lo):
                if b.state[x] == ACQUIRED:
                    self.acquired -= 1
                b.state[x] = ARCHIVED
                b.owner[x] = None
        self._advance()

    def _advance(self) -> None:
        """Move the start offset over the leading offsets that are done."""
        batches = self.batches
        drop = 0
        for b in batches:
            st = b.state
            if st.count(AVAILABLE) or st.count(ACQUIRED):
                i = 0
                while st[i] in _DONE:
                    i += 1
                self.start = b.first + i
                break
            drop += 1
        else:
            self.start = self.end
        if drop:
            del batches[:drop]
