"""Where ``kcodec consume`` starts and stops in each partition.

``-o`` as kcat takes it: ``beginning``, ``end``, ``stored`` (a group's committed offsets),
``N`` (an offset), ``-N`` (N records before the end), ``s@MS`` (the first record at or
after a time, milliseconds since the epoch) and, besides one of those, ``e@MS`` (stop
before the first record at or after a time). Where a partition's end is: its position at
the high watermark of the last fetch, noticed once each time it gets there.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from kcodec.cli._client import UsageError

__all__ = ["Start", "parse_offsets", "start_offsets", "Ends"]


@dataclass
class Start:
    kind: str            # beginning, end, stored, offset, back (N before the end), time
    value: int = 0


def parse_offsets(args: argparse.Namespace) -> tuple[Start, int | None]:
    """The start (-o, --from-beginning) and the stop time (-o e@MS), checked."""
    start: Start | None = None
    stop = None
    for spec in args.offset or []:
        if spec.startswith("e@"):
            if stop is not None:
                raise UsageError("-o e@MS may be given once")
            stop = _ms(spec)
            continue
        if start is not None:
            raise UsageError(f"-o: one place to start, not two (got {spec!r} after another); "
                             "e@MS may come besides it")
        start = _start(spec)
    if args.from_beginning:
        if start is not None and start.kind != "beginning":
            raise UsageError("--from-beginning and -o say different things: give one")
        start = Start("beginning")
    start = start or Start("end")
    if args.group:
        if start.kind not in ("beginning", "end", "stored"):
            raise UsageError("with -g a member starts at the group's committed offsets (-o "
                             "beginning or end says where, when nothing is committed); to "
                             "read from an offset or a time, drop -g")
    elif start.kind == "stored":
        raise UsageError("-o stored starts at a group's committed offsets: give -g GROUP")
    return start, stop


def _start(spec: str) -> Start:
    if spec in ("beginning", "end", "stored"):
        return Start(spec)
    if spec.startswith("s@"):
        return Start("time", _ms(spec))
    try:
        n = int(spec)
    except ValueError:
        raise UsageError(f"-o {spec!r}: expected beginning, end, stored, an offset N, -N (N "
                         "before the end), s@MS or e@MS (milliseconds since the epoch)") from None
    return Start("back", -n) if spec.startswith("-") else Start("offset", n)


def _ms(spec: str) -> int:
    try:
        ms = int(spec[2:])
    except ValueError:
        ms = -1
    if ms < 0:
        form = spec[:2]
        raise UsageError(f"-o {spec!r}: {form} needs milliseconds since the epoch, "
                         f"e.g. {form}1700000000000")
    return ms


def start_offsets(admin: Any, parts: list[tuple[str, int]], start: Start,
                   quiet: bool) -> dict[Any, int]:
    """Where each partition starts, for the starts the consumer's reset cannot say: an
    offset (moved into the log, with a notice, when outside it), N before the end (fewer
    where the partition has fewer), the first record at or after a time (the end if none)."""
    from kcodec.client import TopicPartition

    if start.kind not in ("offset", "back", "time"):
        return {}
    tps = [TopicPartition(t, p) for t, p in parts]
    first = admin.list_offsets(tps, "earliest")
    end = admin.list_offsets(tps, "latest")
    if start.kind == "time":
        at = admin.list_offsets(tps, start.value)
        return {tp: end[tp] if at[tp] < 0 else at[tp] for tp in tps}
    if start.kind == "back":
        return {tp: max(end[tp] - start.value, first[tp]) for tp in tps}
    out = {}
    for tp in tps:
        out[tp] = min(max(start.value, first[tp]), end[tp])
        if out[tp] != start.value and not quiet:
            why = (f"past the end ({end[tp]})" if start.value > end[tp] else
                   f"before the first offset still in the log ({first[tp]})")
            print(f"kcodec consume: {tp.topic}[{tp.partition}]: offset {start.value} is {why}: "
                  f"starting at {out[tp]}", file=sys.stderr)
    return out


class Ends:
    """Which partitions have reached their end (their position is at the high watermark
    of the last fetch), and the notices on stderr: once each time a partition gets there,
    as kcat says "Reached end of topic"."""

    def __init__(self, consumer: Any, quiet: bool) -> None:
        self.c = consumer
        self.quiet = quiet
        self.reached: set = set()
        self.pending: list[str] = []

    def check(self, assigned: set, batch: dict, printed: dict[Any, int]) -> None:
        for tp in batch:
            self.reached.discard(tp)
        for tp in sorted(assigned - self.reached):
            hw = self.c.highwater(tp)
            # a partition this poll returned records of, short of the end, is not there
            if hw < 0 or tp in batch and printed.get(tp, -1) < hw:
                continue
            if self.c.position(tp) >= hw:
                self.reached.add(tp)
                self.notice(f"reached the end of {tp.topic}[{tp.partition}] at offset {hw}")

    def notice(self, line: str) -> None:
        self.pending.append(line)

    def say(self, last: str = "") -> None:
        if last and not self.pending:
            self.pending.append("every partition is done")
        if self.pending and not self.quiet:
            sys.stdout.flush()
            self.pending[-1] += last
            for line in self.pending:
                print(f"kcodec consume: {line}", file=sys.stderr)
        self.pending.clear()
