"""The group history matrix: members of one group (kcodec's Consumer, confluent-kafka's,
kafka-python's, mixed) consume while members join, leave, are SIGKILLed and SIGSTOPped,
partitions are added and the broker restarts; the history checker
(tests/support/history.py) then reports records never received, records received below
what the group had committed, commits that go back, and two members owning a partition
at once. Every cell must lose nothing.

Cells: the classic protocol with each assignor (range, roundrobin, sticky,
cooperative-sticky) and the consumer protocol with each server assignor (uniform, range),
each with every commit pattern (auto-commit, after each poll, in the revoke callback,
async). The default run takes one commit pattern per cell, rotated so that each
protocol meets each pattern (8 cells, a few minutes in all); ``KCODEC_HISTORY_FULL=1``
runs every pattern of every cell (24), and ``KCODEC_HISTORY_SECONDS`` makes each cell's
schedule that many seconds long (a soak; default 20). Slow tests (``-m slow``), on
loopback (no root needed): the faults are the processes' own.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from tests.faults.scenario import LocalNet, Run, events, tail

pytestmark = pytest.mark.slow

SECONDS = float(os.environ.get("KCODEC_HISTORY_SECONDS", "20"))
FULL = os.environ.get("KCODEC_HISTORY_FULL", "") not in ("", "0", "false")
PATTERNS = ("auto", "poll", "revoke", "async")

# (protocol, assignor, the peers that speak it: members c, d are these clients)
GROUPS = [
    ("classic", "range", ("confluent", "kafka-python")),
    ("classic", "roundrobin", ("kafka-python", "confluent")),
    ("classic", "sticky", ("kafka-python", "kcodec")),
    ("classic", "cooperative-sticky", ("confluent", "kcodec")),
    ("consumer", "uniform", ("confluent", "kcodec")),
    ("consumer", "range", ("kcodec", "confluent")),
]


def _cells() -> list[Any]:
    out = []
    for n, (protocol, assignor, peers) in enumerate(GROUPS):
        patterns = PATTERNS if FULL else (PATTERNS[n % 4], PATTERNS[(n + 2) % 4])[:1 + (n >= 4)]
        for pattern in patterns:
            out.append(pytest.param(protocol, assignor, peers, pattern,
                                    id=f"{protocol}-{assignor}-{pattern}"))
    return out


# the consumer protocol's session and heartbeat, short as the classic members ask for theirs
BROKER = ("--config", "group.consumer.min.session.timeout.ms=2000",
          "--config", "group.consumer.session.timeout.ms=6000",
          "--config", "group.consumer.min.heartbeat.interval.ms=500",
          "--config", "group.consumer.heartbeat.interval.ms=500")


def _schedule(seconds: float) -> list[tuple[float, Any]]:
    """Joins, a SIGSTOP, partitions added, a SIGKILL and restart, a leave, a broker restart,
    spread over ``seconds`` (the same order at every length)."""
    def at(f: float) -> float:
        return round(f * seconds, 1)

    def later(fn: Any) -> Any:      # in the background, so the schedule goes on meanwhile
        return lambda r: threading.Thread(target=fn, args=(r,), daemon=True).start()
    return [
        (at(0.15), lambda r: r.start_member("c")),
        (at(0.25), later(lambda r: r.pause(r.members["a"], 2, "member a"))),
        (at(0.35), later(lambda r: r.add_partitions(4))),
        (at(0.45), lambda r: r.start_member("d")),
        (at(0.55), lambda r: (r.kill_member("b"), threading.Event().wait(1.5),
                              r.start_member("b"))),
        (at(0.65), lambda r: r.leave("c")),
        (at(0.8), lambda r: r.restart_broker(2)),
    ]


@pytest.mark.parametrize("protocol,assignor,peers,pattern", _cells())
def test_group_history(tmp_path, protocol, assignor, peers, pattern) -> None:
    opts = {"protocol": protocol, "assignor": assignor, "commit": pattern}
    member_opts = {"a": {**opts, "client": "kcodec"}, "b": {**opts, "client": "kcodec"},
                   "c": {**opts, "client": peers[0]}, "d": {**opts, "client": peers[1]}}
    with LocalNet() as net:
        run = Run(net, tmp_path, members=("a", "b"), member_opts=member_opts,
                  broker_args=BROKER, rate=150)
        report, timing = run.go(_schedule(SECONDS), SECONDS, base={})
    print(f"\n{protocol}/{assignor}/{pattern} (peers {', '.join(peers)}): {report.figures}; "
          f"{timing['seconds']:.0f} s")
    print("\n".join(run.log))
    assert report.acked > 5 * SECONDS, report.figures
    assert timing["caught_up"], ("the group did not commit the end of the log within 120 s "
                                 f"of the producer's end\n{report.figures}\n" + "\n".join(run.log)
                                 + "\n" + events(run))
    assert not report.violations, (f"{report.violations}\n{report.figures}\n"
                                   + "\n".join(run.log) + "\n" + tail(run.tmp / "clients.err"))
    assert report.lost == [] and report.unconsumed == []
    # the faults happened (a cell that cannot fail proves nothing): the broker came back,
    # b was restarted, the added partition was consumed, the group rebalanced repeatedly
    members = run._members()
    assert sum("broker up" in line for line in run.log) == 2, run.log
    assert "member-b-2" in members and "member-d-1" in members, sorted(members)
    assert any(e.get("p") == 3 for evs in members.values() for e in evs if "rec" in e)
    assert sum("assigned" in e for evs in members.values() for e in evs) >= 6
