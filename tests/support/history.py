"""A history checker in the spirit of Jepsen's: what the clients did against what the log
holds. Inputs are the JSON-lines histories of tests/support/fault_workload.py.

The log (a final read of every partition from offset 0):
    lost          acknowledged records missing from the log
    misplaced     acknowledged records found at another partition or offset than the ack said
    duplicated    records in the log more than once (the producer is idempotent)
    reordered     records of one partition out of the order they were sent in
The group (the members' histories and the final committed offsets):
    unconsumed    records before a partition's final committed offset no member received
    below_committed   a member received a record below the offset the group had committed
                  for its partition when the member was given it: it did not start from
                  the committed offset (a record received again otherwise -- its member
                  died, or was fenced, before committing it -- is at-least-once delivery,
                  allowed, and counted as ``redelivered``)
    out_of_order  a member receiving a partition's records out of offset order without a
                  new assignment in between
    commits_backwards       a successful commit lower than one of the partition that had
                  succeeded before it was sent (``sent``, when the member asked for it; the
                  event's ``t`` is when it heard back): two commits in flight at once, of
                  one member or two (a member SIGSTOPped between the broker's answer and
                  its log line), may be logged in either order; without ``sent``, every
                  earlier one. An async commit's answer, ``seq`` its number in the order
                  its member sent it, that comes after a later one of the same member's,
                  or after a read-back of the committed offsets made once more were sent,
                  is skipped: the broker applied them in the order sent)
    double_owner  two members owning one partition at once: a member owns a partition from
                  the ``assigned`` event that names it to the ``revoked`` or ``lost`` that
                  does (or its history's end). A member the run faulted (SIGSTOP, SIGKILL,
                  or everyone at a broker restart: ``faults``, (time, member or "*")) may
                  rightly be replaced before it hears so: an ownership it began before such
                  a fault ends there for this check (a zombie's late records are allowed
                  above, and its commits are refused by the broker)

``Report.violations`` lists the checks that failed; ``Report.figures`` is a summary line.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def load(path: str | Path) -> list[dict[str, Any]]:
    """The events of a history file; a process killed with SIGKILL may have left its
    last line cut short, which is dropped (a bad line anywhere else is an error)."""
    out = []
    lines = [line for line in Path(path).read_text().splitlines() if line.strip()]
    for n, line in enumerate(lines):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            if n != len(lines) - 1:
                raise ValueError(f"{path}: line {n + 1} is not JSON: {line[:200]!r}") from None
    return out


@dataclass
class Report:
    sent: int = 0
    acked: int = 0
    failed: int = 0
    in_log: int = 0
    delivered: int = 0
    commits: int = 0
    lost: list[int] = field(default_factory=list)
    misplaced: list[tuple[int, Any, Any]] = field(default_factory=list)
    duplicated: list[int] = field(default_factory=list)
    reordered: list[tuple[int, int, int]] = field(default_factory=list)
    unconsumed: list[tuple[int, int]] = field(default_factory=list)
    redelivered: int = 0
    below_committed: list[tuple[str, int, int, int]] = field(default_factory=list)
    out_of_order: list[tuple[str, int, int, int]] = field(default_factory=list)
    commits_backwards: list[tuple[int, int, int]] = field(default_factory=list)
    double_owner: list[tuple[int, str, str, float]] = field(default_factory=list)

    CHECKS = ("lost", "misplaced", "duplicated", "reordered", "unconsumed",
              "below_committed", "out_of_order", "commits_backwards", "double_owner")

    @property
    def violations(self) -> dict[str, list]:
        return {name: getattr(self, name)[:10] for name in self.CHECKS if getattr(self, name)}

    @property
    def figures(self) -> str:
        return (f"{self.sent} sent, {self.acked} acknowledged, {self.failed} failed, "
                f"{self.in_log} in the log; {self.delivered} deliveries to the group "
                f"({self.redelivered} redelivered, uncommitted), {self.commits} commits; "
                + ", ".join(f"{len(getattr(self, c))} {c.replace('_', ' ')}"
                            for c in self.CHECKS))


def check(produced: list[dict], log: list[dict], members: dict[str, list[dict]],
          committed: list[dict] | None = None,
          faults: list[tuple[float, str]] | None = None) -> Report:
    r = Report()
    sent = {e["send"]: e["p"] for e in produced if "send" in e}
    acks = {e["ack"]: (e["p"], e["off"]) for e in produced if "ack" in e}
    r.sent, r.acked = len(sent), len(acks)
    r.failed = sum(1 for e in produced if "fail" in e)

    rows = [e for e in log if "id" in e]
    r.in_log = len(rows)
    where: dict[int, list[tuple[int, int]]] = defaultdict(list)
    by_partition: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for e in rows:
        where[e["id"]].append((e["p"], e["off"]))
        by_partition[e["p"]].append((e["off"], e["id"]))
    r.duplicated = sorted(i for i, places in where.items() if len(places) > 1)
    for i, (p, off) in sorted(acks.items()):
        if i not in where:
            r.lost.append(i)
        elif (p, off) not in where[i]:
            r.misplaced.append((i, (p, off), where[i]))
    for p, recs in by_partition.items():
        recs.sort()
        for (_o1, a), (o2, b) in zip(recs, recs[1:], strict=False):
            if b < a:
                r.reordered.append((p, o2, b))

    # ------------------------------------------------------------------ the group
    events = sorted(((e["t"], name, e) for name, evs in members.items() for e in evs),
                    key=lambda x: x[0])
    high: dict[int, int] = {}          # partition -> highest committed offset so far
    # partition -> (time heard back, highest committed offset by then), in time order
    acked: dict[int, list[tuple[float, int]]] = defaultdict(list)
    seen: set[tuple[int, int]] = set()
    last: dict[tuple[str, int], int] = {}
    floor: dict[tuple[str, int], int] = {}   # committed when the member was given it
    last_seq: dict[str, int] = {}            # the latest async commit answered, by member
    for _t, name, e in events:
        if "assigned" in e or "revoked" in e or "lost" in e:
            for p in e.get("assigned", []) + e.get("revoked", []) + e.get("lost", []):
                last.pop((name, p), None)
            for p in e.get("assigned", []):
                floor[(name, p)] = high.get(p, -1)
        elif "rec" in e:
            p, off = e["p"], e["off"]
            r.delivered += 1
            if off < floor.get((name, p), -1):
                r.below_committed.append((name, p, off, floor[(name, p)]))
            if (p, off) in seen:
                r.redelivered += 1
            seen.add((p, off))
            prev = last.get((name, p))
            if prev is not None and off <= prev:
                r.out_of_order.append((name, p, prev, off))
            last[(name, p)] = off
        elif "commit" in e:
            seq = e.get("seq")
            if seq is not None:
                if seq < last_seq.get(name, -1):
                    continue         # superseded: applied before the later one
                last_seq[name] = seq
            r.commits += 1
            sent = e.get("sent", e["t"])
            for ps, off in e["commit"].items():
                p = int(ps)
                times = acked[p]
                n = bisect.bisect_left(times, (sent, -1))   # those heard back before sent
                before = times[n - 1][1] if n else -1
                if off < before:
                    r.commits_backwards.append((p, before, off))
                high[p] = max(high.get(p, -1), off)
                times.append((e["t"], high[p]))
    r.double_owner = _double_owners(members, faults or [])
    final = {e["p"]: e["off"] for e in committed or [] if e.get("off") is not None}
    for p, recs in by_partition.items():
        upto = final.get(p, high.get(p, 0))
        r.unconsumed += [(p, off) for off, _ in recs if off < upto and (p, off) not in seen]
    return r


def _owned(name: str, evs: list[dict], faults: list[tuple[float, str]]
           ) -> list[tuple[int, float, float]]:
    """(partition, from, to) of each time member ``name`` owned a partition (see the
    module docstring: cut at a fault of the member, or of everyone)."""
    out: list[tuple[int, float, float]] = []
    since: dict[int, float] = {}
    end = evs[-1]["t"] if evs else 0.0
    cuts = sorted(t for t, who in faults if who in (name, "*"))

    def close(p: int, t: float) -> None:
        t0 = since.pop(p)
        cut = next((c for c in cuts if t0 <= c < t), None)
        out.append((p, t0, t if cut is None else cut))
    for e in evs:
        for p in e.get("revoked", []) + e.get("lost", []):
            if p in since:
                close(p, e["t"])
        for p in e.get("assigned", []):
            since.setdefault(p, e["t"])
    for p in list(since):
        close(p, end)
    return out


def _double_owners(members: dict[str, list[dict]], faults: list[tuple[float, str]]
                   ) -> list[tuple[int, str, str, float]]:
    """(partition, member, other member, when the second began) for each overlap."""
    spans = sorted((p, t0, t1, name) for name, evs in members.items()
                   for p, t0, t1 in _owned(name, evs, faults))
    out = []
    for i, (p, _t0, t1, name) in enumerate(spans):
        for q, u0, _u1, other in spans[i + 1:]:
            if q != p or u0 >= t1:
                break
            if other != name:
                out.append((p, name, other, u0))
    return out
