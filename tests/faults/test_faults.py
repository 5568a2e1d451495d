"""The fault harness: kcodec's broker and its clients in separate network namespaces with a
userspace link between them (tests/support/faultnet.py), faults on the link and on the
processes, and every run judged by the history checker (tests/support/history.py).

An idempotent acks=all producer and a two-member group must lose, duplicate and reorder
nothing, and committed offsets must never go backwards. Slow tests (``-m slow``); they
need root to make network namespaces and skip, saying why, where that is not possible.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.faults.scenario import Run, events, tail
from tests.support.faultnet import FaultNet

pytestmark = pytest.mark.slow

WHY_NOT = FaultNet.available()


@pytest.fixture
def net():
    if WHY_NOT is not None:
        pytest.skip(f"fault harness unavailable: {WHY_NOT}")
    with FaultNet() as n:
        yield n


def _judge(run: Run, report, timing, faults: tuple[str, ...]) -> None:
    print(f"\n{report.figures}; {timing['seconds']:.0f} s")
    print("\n".join(run.log))
    assert report.acked > 1000, report.figures
    # the faults happened: the link's own counters (a test that cannot fail proves nothing)
    assert all(timing[f] > 0 for f in faults), (faults, timing)
    assert timing["caught_up"], ("the group did not commit the end of the log within 120 s "
                                 f"of the producer's end\n{report.figures}\n" + "\n".join(run.log)
                                 + "\n" + events(run))
    assert not report.violations, (f"{report.violations}\n{report.figures}\n"
                                   + "\n".join(run.log) + "\n" + tail(run.tmp / "clients.err"))


def test_network_faults(net, tmp_path) -> None:
    """100±50 ms one way, 5 % loss, 1 % duplicates, 25 % reordering throughout; a 12 s
    partition (longer than the group's session timeout), 8 s one-way partitions each
    way, and a second of TCP resets."""
    def partition(block: str, seconds: float):
        def act(run: Run) -> None:
            # every member is cut off: the group may move on before one hears so (the
            # checker's faults, as for a broker restart)
            run.faults.append((time.time(), "*"))
            run.net.set(block=block)
            run.note(f"partition {block} for {seconds:.0f} s")
            heal = threading.Timer(seconds, lambda: (run.net.set(block="none"),
                                                     run.note(f"partition {block} healed")))
            heal.daemon = True      # a failed run does not wait for it
            heal.start()
        return act

    def resets(run: Run) -> None:
        run.faults.append((time.time(), "*"))
        run.net.set(reset_s=1.0)
        run.note("TCP resets for 1 s")

    run = Run(net, tmp_path)
    report, timing = run.go(
        [(8, partition("both", 12)), (26, partition("c2b", 8)), (40, partition("b2c", 8)),
         (54, resets)], 60,
        base=dict(delay_ms=100, jitter_ms=50, loss=0.05, dup=0.01, reorder=0.25))
    _judge(run, report, timing, ("lost", "duplicated", "reordered", "blocked", "resets"))


def test_process_faults(net, tmp_path) -> None:
    """SIGSTOP and SIGKILL of the broker (restarted on its data dir), SIGKILL of a member
    (restarted), SIGSTOP of the other member past its session timeout (it comes back a
    zombie whose commits must be refused), over a link with 20±10 ms and 1 % loss."""
    def restart_broker(run: Run) -> None:
        run.kill_broker()
        threading.Event().wait(2)
        run.start_broker()

    def kill_member(run: Run) -> None:
        run.kill_member("a")
        threading.Event().wait(2)
        run.start_member("a")

    run = Run(net, tmp_path)
    report, timing = run.go(
        [(6, lambda r: r.pause(r.broker, 8, "broker")),
         (20, restart_broker),
         (30, kill_member),
         (38, lambda r: threading.Thread(target=r.pause, args=(r.members["b"], 15, "member b"),
                                         daemon=True).start())],
        60, base=dict(delay_ms=20, jitter_ms=10, loss=0.01))
    _judge(run, report, timing, ("lost",))
