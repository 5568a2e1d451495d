"""The group history matrix: members of one group (kcodec's Consumer, confluent-kafka's,
kafka-python's, mixed) consume while members join, leave, are SIGKILLed and SIGSTOPped,
partitions are added and the broker restarts; the history checker
(tests/support/history.py) then reports records never received, records received below
what the group had committed, commits that go back, and two members owning a partition
at once. Every cell must lose nothing.

Cells: the classic protocol with each assignor (range, roundrobin, sticky,
cooperative-sticky) and the consumer protocol with each server assignor (uniform, range),
each with every commit pattern (auto-commit, after each poll, in the revoke callback,
async): 24. The four patterns of one protocol and assignor share a run: one broker,
producer, topic and schedule, four groups (one a pattern) of four members each, every
member fault done to that member of each group at once, each group judged alone; six runs
in all (a few minutes). ``KCODEC_HISTORY_SECONDS`` makes each schedule that many seconds
long (a soak; default 20). Slow tests (``-m slow``), on loopback (no root needed): the
faults are the processes' own.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from tests.faults.scenario import LocalNet, Run, events, tail

pytestmark = pytest.mark.slow

SECONDS = float(os.environ.get("KCODEC_HISTORY_SECONDS", "20"))
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
        (at(0.25), later(lambda r: r.pause_member("a", 2))),
        (at(0.35), later(lambda r: r.add_partitions(4))),
        (at(0.45), lambda r: r.start_member("d")),
        (at(0.55), lambda r: (r.kill_member("b"), threading.Event().wait(1.5),
                              r.start_member("b"))),
        (at(0.65), lambda r: r.leave("c")),
        (at(0.8), lambda r: r.restart_broker(2)),
    ]


@pytest.fixture(scope="module", params=GROUPS, ids=lambda g: f"{g[0]}-{g[1]}")
def shared_run(request, tmp_path_factory) -> Any:
    """One run of every commit pattern's group of one protocol and assignor."""
    protocol, assignor, peers = request.param
    groups = {}
    for pattern in PATTERNS:
        opts = {"protocol": protocol, "assignor": assignor, "commit": pattern}
        groups[f"checkers-{pattern}"] = {
            "a": {**opts, "client": "kcodec"}, "b": {**opts, "client": "kcodec"},
            "c": {**opts, "client": peers[0]}, "d": {**opts, "client": peers[1]}}
    with LocalNet() as net:
        run = Run(net, tmp_path_factory.mktemp(f"history-{protocol}-{assignor}"),
                  members=("a", "b"), groups=groups, broker_args=BROKER, rate=150)
        _report, timing = run.go(_schedule(SECONDS), SECONDS, base={})
    print(f"\n{protocol}/{assignor} (peers {', '.join(peers)}): {timing['seconds']:.0f} s\n"
          + "\n".join(run.log))
    return request.param, run, timing


@pytest.mark.parametrize("pattern", PATTERNS)
def test_group_history(shared_run, pattern) -> None:
    (protocol, assignor, peers), run, timing = shared_run
    group = f"checkers-{pattern}"
    report = run.reports[group]
    print(f"\n{protocol}/{assignor}/{pattern} (peers {', '.join(peers)}): {report.figures}; "
          f"{timing['seconds']:.0f} s")
    assert report.acked > 5 * SECONDS, report.figures
    assert timing["caught_up_groups"][group], (
        "the group did not commit the end of the log within 120 s of the producer's end\n"
        f"{report.figures}\n" + "\n".join(run.log) + "\n" + events(run, group=group))
    assert not report.violations, (f"{report.violations}\n{report.figures}\n"
                                   + "\n".join(run.log) + "\n" + tail(run.tmp / "clients.err"))
    assert report.lost == [] and report.unconsumed == []
    # the faults happened (a cell that cannot fail proves nothing): the broker came back,
    # b was restarted, the added partition was consumed, the group rebalanced repeatedly
    members = run._members(group)
    assert sum("broker up" in line for line in run.log) == 2, run.log
    assert "member-b-2" in members and "member-d-1" in members, sorted(members)
    assert any(e.get("p") == 3 for evs in members.values() for e in evs if "rec" in e)
    assert sum("assigned" in e for evs in members.values() for e in evs) >= 6
