"""Failures and surprises said at once: ``kcodec run`` with a misspelt topic or no broker
fails before starting any process, a group consume names the partitions it starts at
their end past records already there; and the progress line (rate, ETA)."""

from __future__ import annotations

import io
import sys

from kcodec.cli._client import Ticker
from kcodec.client import Producer
from kcodec.testing.net import free_port
from tests.cli.harness import create, run


def test_run_with_a_misspelt_topic_fails_at_once(kbroker) -> None:
    create(kbroker, "orders-n", 1)
    rc, _, err, secs = run("run", "-b", kbroker.bootstrap, "-t", "ordres-n", "-g", "g",
                           "--state-dir", "/tmp/kcodec-run-notices", "json:loads", timeout=60)
    assert rc == 1, err
    assert "topic 'ordres-n' does not exist (did you mean 'orders-n'?)" in err
    assert "Traceback" not in err


def test_run_without_a_broker_fails_once_without_a_traceback() -> None:
    rc, _, err, _ = run("run", "-b", f"127.0.0.1:{free_port()}", "-t", "x", "-g", "g",
                        "--state-dir", "/tmp/kcodec-run-notices", "json:loads", timeout=60)
    assert rc == 1
    assert "no broker reachable" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 3, err


def test_group_consume_names_partitions_without_a_commit(kbroker) -> None:
    create(kbroker, "resume-n", 2)
    with Producer(bootstrap_servers=kbroker.bootstrap) as p:
        for i in range(5):
            p.send("resume-n", b"%d" % i, partition=1)
        p.flush(10)
    rc, out, err, _ = run("consume", "-b", kbroker.bootstrap, "-t", "resume-n", "-g", "gn",
                          "--idle", "1", timeout=90)
    assert rc == 0, err
    assert ("group 'gn' has no committed offset for resume-n[1]: they start at their end, past "
            "the 5 records already there (-o beginning reads them)") in err
    rc, out, err, _ = run("consume", "-b", kbroker.bootstrap, "-t", "resume-n", "-g", "gn2",
                          "-o", "beginning", "--idle", "1", timeout=90)
    assert "no committed offset" not in err and out.count("\n") == 5


def test_progress_line_has_rate_and_eta(monkeypatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    t = Ticker("sent {n} records, {rate}/s{eta}", enabled=True)
    t.update(n=100, done=25, total=100)
    line = err.getvalue()
    assert line.startswith("\rsent 100 records, ") and "/s, " in line
    assert "s left (25 %)" in line
    t.close()


def test_progress_line_on_a_terminal_only_when_stdout_stays_quiet(monkeypatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True
    monkeypatch.setattr(sys, "stderr", Tty())
    monkeypatch.setattr(sys, "stdout", Tty())
    assert Ticker("x").enabled is False                    # records on the same terminal
    assert Ticker("x", quiet_stdout=True).enabled is True   # produce's summary-only mode
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert Ticker("x", quiet_stdout=True).enabled is False  # piped stderr: quiet
