"""``kcodec broker --racks`` and ``--config broker.rack=RACK{id}`` (kcodec/cli/broker.py):
each node's rack as clients see it, and ``topics describe`` showing a replicated topic's
replicas and ISR."""

from __future__ import annotations

import json
import signal

import pytest

from kcodec.client import Admin
from tests.cli.harness import kcodec, run


def _start(*extra: str):
    proc = kcodec("broker", "--json", "--nodes", "3", *extra)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.stderr.read().decode() if proc.stderr else ""
    return proc, json.loads(line)["bootstrap"]


def _stop(proc) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("args, racks", [
    (("--racks", "east,east,west"), {0: "east", 1: "east", 2: "west"}),
    (("--config", "broker.rack=RACK{id}"), {0: "RACK0", 1: "RACK1", 2: "RACK2"}),
])
def test_each_node_gets_its_rack(args, racks) -> None:
    proc, bootstrap = _start(*args)
    try:
        with Admin(bootstrap_servers=bootstrap) as a:
            assert {b.node_id: b.rack for b in a.describe_cluster().brokers} == racks
        rc, _, err, _ = run("topics", "create", "-b", bootstrap, "r3", "-p", "2", "-r", "3")
        assert rc == 0, err
        rc, out, err, _ = run("topics", "describe", "-b", bootstrap, "r3", "--json")
        assert rc == 0, err
        for row in map(json.loads, out.splitlines()):
            assert sorted(row["replicas"]) == [0, 1, 2] and row["isr"] == row["replicas"]
            assert row["replicas"][0] == row["leader"]
    finally:
        _stop(proc)


@pytest.mark.parametrize("racks", ["a,b", "a,,b", "a,b,c,d"])
def test_racks_must_name_one_per_node(racks) -> None:
    rc, _, err, _ = run("broker", "--nodes", "3", "--racks", racks)
    assert rc != 0 and "--racks" in err and "3 non-empty rack name(s)" in err


def test_an_unknown_replica_selector_is_refused() -> None:
    rc, _, err, _ = run("broker", "--config", "replica.selector.class=com.example.Nope")
    assert rc != 0 and "Class com.example.Nope cannot be found" in err
