"""Every client sub-command against the real broker, output checked (in-process main())."""

from __future__ import annotations

import json

import pytest

from kcodec.cli import main
from kcodec.client import Consumer, Producer, TopicPartition

pytestmark = pytest.mark.broker


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def jl(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_topics_create_list_delete(broker, topic_name, capsys) -> None:
    b = ("-b", broker.bootstrap)
    rc, out, _ = run(capsys, "topics", "create", *b, "-p", "3", topic_name)
    assert rc == 0 and out.strip() == f"{topic_name}: created"
    rc, out, _ = run(capsys, "topics", "create", *b, topic_name)
    assert rc == 1 and "TOPIC_ALREADY_EXISTS" in out
    rc, out, _ = run(capsys, "topics", "list", *b)
    assert rc == 0 and out.splitlines()[0].split() == ["TOPIC", "PARTITIONS"]
    assert [topic_name, "3"] in [line.split() for line in out.splitlines()]
    rc, out, _ = run(capsys, "topics", "list", *b, "--json", topic_name)
    assert jl(out) == [{"topic": topic_name, "partitions": 3}]
    rc, out, _ = run(capsys, "topics", "delete", *b, topic_name)
    assert rc == 0 and out.strip() == f"{topic_name}: deleted"
    rc, out, _ = run(capsys, "topics", "list", *b, "--json")
    assert topic_name not in [r["topic"] for r in jl(out)]


def test_produce_consume(broker, topic_name, capsys, monkeypatch) -> None:
    b = ("-b", broker.bootstrap)
    run(capsys, "topics", "create", *b, "-p", "4", topic_name)
    rc, out, _ = run(capsys, "produce", *b, "-t", topic_name, "-p", "1", "-H", "a=b", "-c", "zstd",
                     "one", "two")
    assert rc == 0 and out.splitlines() == ["partition 1 offset 0", "partition 1 offset 1"]
    import io
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"x\ny\n")))
    rc, out, _ = run(capsys, "produce", *b, "-t", topic_name, "-k", "kk", "--json")
    rows = jl(out)
    from kcodec.client.producer.partitioner import partition_for_key
    assert [r["partition"] for r in rows] == [partition_for_key(b"kk", 4)] * 2
    assert [r["offset"] for r in rows] == [0, 1] or rows[0]["partition"] == 1
    rc, out, _ = run(capsys, "consume", *b, "-t", topic_name, "--from-beginning", "-n", "4", "--json")
    got = jl(out)
    assert rc == 0 and len(got) == 4
    one = [r for r in got if r["value"] == "one"][0]
    assert (one["partition"], one["offset"], one["headers"], one["key"]) == (1, 0, [["a", "b"]], None)
    assert sorted(r["value"] for r in got) == ["one", "two", "x", "y"]
    assert {r["key"] for r in got if r["value"] in ("x", "y")} == {"kk"}
    rc, out, _ = run(capsys, "consume", *b, "-t", topic_name, "--from-beginning", "-n", "4",
                     "--format", "text")
    assert rc == 0 and "1:0 headers=[a=b] one" in out.splitlines() and len(out.splitlines()) == 4
    rc, out, _ = run(capsys, "consume", *b, "-t", topic_name, "--from-beginning", "-n", "4")
    assert rc == 0 and sorted(out.splitlines()) == ["one", "two", "x", "y"]   # the values as they are


def test_metadata(broker, topic_name, capsys) -> None:
    b = ("-b", broker.bootstrap)
    run(capsys, "topics", "create", *b, "-p", "2", topic_name)
    rc, out, _ = run(capsys, "metadata", *b, "brokers")
    lines = out.splitlines()
    assert rc == 0 and lines[0].split() == ["NODE", "HOST", "PORT", "RACK", "CONTROLLER"]
    assert str(broker.port) in lines[1]
    rc, out, _ = run(capsys, "metadata", *b, "brokers", "--json")
    assert jl(out)[0]["port"] == broker.port
    rc, out, _ = run(capsys, "metadata", *b, "topics", "-t", topic_name)
    lines = out.splitlines()
    assert lines[0].split() == ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"]
    assert [line.split()[:2] for line in lines[1:]] == [[topic_name, "0"], [topic_name, "1"]]
    rc, out, _ = run(capsys, "metadata", *b, "topics", "-t", topic_name, "--json")
    rows = jl(out)
    assert [r["partition"] for r in rows] == [0, 1] and all(r["leader"] in r["isr"] for r in rows)


def test_groups_offsets_lag(broker, topic_name, capsys) -> None:
    b = ("-b", broker.bootstrap)
    group = f"g-{topic_name}"
    run(capsys, "topics", "create", *b, "-p", "2", topic_name)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
        for i in range(5):   # one record per batch and request
            p.send(topic_name, b"v%d" % i, partition=0).result(10)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False,
                  session_timeout_ms=2000, heartbeat_interval_ms=200, fetch_max_wait_ms=50) as c:
        c.assign([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])
        c.commit({TopicPartition(topic_name, 0): 3})
    rc, out, _ = run(capsys, "offsets", *b, "-g", group, "-t", topic_name)
    lines = [line.split() for line in out.splitlines()]
    assert rc == 0 and lines[0] == ["TOPIC", "PARTITION", "COMMITTED", "END", "OFFSET", "REMAINING"]
    # partition 1: no member has it and nothing is committed there, so not the group's
    assert lines[1:] == [[topic_name, "0", "3", "5", "2"]]
    rc, out, _ = run(capsys, "offsets", *b, "-g", group, "--json")
    assert {"topic": topic_name, "partition": 0, "committed": 3, "end_offset": 5, "remaining": 2} in jl(out)
    rc, out, _ = run(capsys, "lag", *b, "-g", group)
    assert rc == 0 and out.strip().startswith(f"{group}: lag 2 ")
    rc, out, _ = run(capsys, "lag", *b, "-g", group, "--json")
    assert jl(out)[0]["lag"] == 2

    # a live member: describe-groups shows the group, its state and protocol type
    with Consumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group,
                  session_timeout_ms=2000, heartbeat_interval_ms=200, fetch_max_wait_ms=50) as c:
        import time
        deadline = time.monotonic() + 20
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.1)
        rc, out, _ = run(capsys, "describe-groups", *b, "-g", group)
        lines = out.splitlines()
        assert rc == 0 and lines[0].split()[:4] == ["GROUP", "STATE", "PROTOCOL", "TYPE"]
        assert lines[1].split()[:3] == [group, "Stable", "consumer"]
        rc, out, _ = run(capsys, "describe-groups", *b, "-g", group, "--json")
        d = jl(out)[0]
        assert (d["group"], d["state"], d["protocol_type"], len(d["members"])) == (group, "Stable", "consumer", 1)


@pytest.mark.parametrize("argv,msg", [
    (["produce", "-t", "x", "-c", "brotli", "m"], "unknown compression codec 'brotli'"),
    (["produce", "-t", "x", "-p", "-1", "m"], "partition must be non-negative"),
    (["produce", "-t", "x", "-H", "novalue", "m"], "is not KEY=VALUE"),
    (["topics", "create", "-p", "0", "t"], "--partitions must be positive"),
    (["topics", "list", "-b", "nohostport:x"], "bad address"),
    (["topics", "list", "-b", "127.0.0.1:9092:9093"], "bad address"),
    (["consume", "-t", "x", "-b", "a b:1"], "bad address"),
    (["consume", "-t", "x", "-n", "0"], "--count must be positive"),
    (["produce", "-t", "x", "-p", "1", "-k", "k", "m"], "either -p PARTITION or -k KEY"),
    (["produce", "-t", "x", "--acks", "2", "m"], "acks must be 0, 1 or 'all'"),
    (["consume", "-t", "x", "--timeout", "0"], "--timeout must be positive"),
    (["metadata", "brokers", "-t", "x"], "-t/--topic applies to 'metadata topics'"),
])
def test_bad_arguments_one_line_exit_2(capsys, argv, msg) -> None:
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and msg in err


@pytest.mark.parametrize("argv,msg", [
    (["produce", "m"], "the following arguments are required: -t/--topic"),
    (["consume", "-n", "1"], "the following arguments are required: -t/--topic"),
    (["offsets"], "the following arguments are required: -g/--group"),
    (["lag"], "the following arguments are required: -g/--group"),
    (["describe-groups"], "the following arguments are required: -g/--group"),
    (["consume", "-t", "x", "-g", "a", "-g", "b"], "-g/--group may be given only once"),
    (["offsets", "-g", "a", "-g", "b"], "-g/--group may be given only once"),
    (["produce", "-t", "a", "-t", "b", "m"], "-t/--topic may be given only once"),
])
def test_parser_errors_exit_2(capsys, argv, msg) -> None:
    with pytest.raises(SystemExit) as ei:
        main(argv)
    out, err = capsys.readouterr()
    assert ei.value.code == 2 and out == "" and err.strip().splitlines()[-1].endswith(msg)


@pytest.mark.parametrize("command,flag", [("produce", "-t TOPIC"), ("consume", "-t TOPIC"),
                                          ("offsets", "-g GROUP"), ("lag", "-g GROUP"),
                                          ("describe-groups", "-g GROUP")])
def test_help_shows_required_options_as_required(capsys, command, flag) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    usage = out.split("\n\n")[0]
    assert flag in usage and f"[{flag}" not in usage      # no brackets: not optional
    assert "\nrequired:\n" in out


def test_unreachable_broker_exit_1(capsys) -> None:
    from kcodec.testing.net import free_port
    rc, out, err = run(capsys, "topics", "list", "-b", f"127.0.0.1:{free_port()}", "--timeout", "0.5")
    assert rc == 1 and "no broker reachable" in err and len(err.strip().splitlines()) == 1
    assert "check the bootstrap address" in err            # what to do, not only what failed


def test_demo_round_trips_every_codec(capsys) -> None:
    rc, out, _ = run(capsys, "demo", "-n", "500", "--json")
    rows = jl(out)
    assert rc == 0 and [r["codec"] for r in rows] == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert all(r["ok"] and r["received"] == 500 for r in rows)


def test_broker_side_bad_arguments_exit_nonzero_one_line(broker, topic_name, capsys) -> None:
    b = ("-b", broker.bootstrap)
    run(capsys, "topics", "create", *b, "-p", "2", topic_name)
    rc, out, err = run(capsys, "produce", *b, "-t", topic_name, "-p", "2", "m")
    assert (rc, out) == (2, "") and err.strip() == \
        f"kcodec produce: error: partition 2 out of range for {topic_name!r} (2 partitions)"
    rc, out, err = run(capsys, "consume", *b, "-t", topic_name + "-missing", "-n", "1")
    assert (rc, out) == (1, "") and err.strip() == (
        f"kcodec consume: error: topic {topic_name + '-missing'!r} does not exist (did you mean "
        f"{topic_name!r}?): 'kcodec topics list' shows the topics, 'kcodec topics create NAME' "
        "makes one")
    rc, out, err = run(capsys, "topics", "delete", *b, topic_name + "-missing")
    # (the broker's own message, if it sends one, comes between them)
    assert rc == 1 and out.startswith(f"{topic_name}-missing: UNKNOWN_TOPIC_OR_PARTITION")
    assert out.strip().endswith(f" (did you mean {topic_name!r}?)")


def test_bootstrap_from_environment(broker, topic_name, capsys, monkeypatch) -> None:
    run(capsys, "topics", "create", "-b", broker.bootstrap, "-p", "1", topic_name)
    monkeypatch.setenv("KCODEC_BOOTSTRAP", broker.bootstrap)
    rc, out, _ = run(capsys, "topics", "list", "--json", topic_name)
    assert rc == 0 and jl(out) == [{"topic": topic_name, "partitions": 1}]
    monkeypatch.setenv("KCODEC_BOOTSTRAP", "127.0.0.1:1")   # -b wins over the environment
    rc, out, _ = run(capsys, "topics", "list", "--json", "-b", broker.bootstrap, topic_name)
    assert rc == 0 and jl(out) == [{"topic": topic_name, "partitions": 1}]


@pytest.mark.slow   # ~6 s: the CLI's 10 s session timeout makes Tansu's JoinGroup wait 5 s
def test_consume_as_group_member(broker, topic_name, capsys) -> None:
    """consume -g with --client-id (no -b: $KCODEC_BOOTSTRAP) in a child process; while it
    waits, describe-groups -g shows it (member id from its client id); it stops
    after -n records, commits, and offsets/lag see the commit."""
    import os
    import subprocess
    import sys
    import time

    b = ("-b", broker.bootstrap)
    group = f"g-{topic_name}"
    other = topic_name + "-other"
    run(capsys, "topics", "create", *b, "-p", "2", topic_name)
    run(capsys, "topics", "create", *b, "-p", "1", other)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
        for i in range(3):   # one record per request (see tansu.md on ListOffsets)
            p.send(topic_name, b"v%d" % i, partition=i % 2).result(10)
    env = {**os.environ, "KCODEC_BOOTSTRAP": broker.bootstrap}
    child = subprocess.Popen(
        [sys.executable, "-m", "kcodec", "consume", "-t", topic_name, "-g", group, "--client-id",
         "my-cli", "--from-beginning", "-n", "4", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        deadline = time.monotonic() + 20
        members: list = []
        while time.monotonic() < deadline and not members:
            rc, out, _ = run(capsys, "describe-groups", *b, "-g", group, "--json")
            members = jl(out)[0]["members"] if rc == 0 and out.strip() else []
            time.sleep(0.2)
        # the broker derives member ids from the client id (Tansu leaves DescribeGroups'
        # client_id, host and assignment empty, so they are checked with a stub below)
        assert len(members) == 1 and members[0]["member_id"].startswith("my-cli-")
        with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
            p.send(topic_name, b"v3", partition=1).result(10)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    assert sorted(r["value"] for r in jl(out)) == ["v0", "v1", "v2", "v3"]
    rc, out, _ = run(capsys, "offsets", *b, "-g", group, "-t", topic_name, "--json")
    assert jl(out) == [
        {"topic": topic_name, "partition": 0, "committed": 2, "end_offset": 2, "remaining": 0},
        {"topic": topic_name, "partition": 1, "committed": 2, "end_offset": 2, "remaining": 0}]
    rc, out, _ = run(capsys, "lag", *b, "-g", group)
    assert rc == 0 and out.strip() == f"{group}: lag 0 (2 partitions)"


def test_describe_groups_members_table_and_topic_filter(capsys, monkeypatch) -> None:
    """The members part of describe-groups (Tansu answers it with empty client ids, hosts
    and assignments, so the admin result is stubbed here)."""
    from kcodec.client import Admin
    from kcodec.client.admin import GroupDescription, MemberDescription

    def describe(self, group_ids):
        return [GroupDescription("g1", "Stable", "consumer", "range", [
            MemberDescription("m-1", "app-a", "/10.0.0.1", {"t": [0, 1], "u": [2]}),
            MemberDescription("m-2", "app-b", "/10.0.0.2", {"u": [0, 1]})])]

    monkeypatch.setattr(Admin, "describe_groups", describe)
    monkeypatch.setattr(Admin, "describe_cluster", lambda self, topics=None: None)   # -t exists
    monkeypatch.setattr(Admin, "close", lambda self: None)
    rc, out, _ = run(capsys, "describe-groups", "-b", "127.0.0.1:1", "-g", "g1")
    assert rc == 0 and [line.split() for line in out.splitlines()] == [
        ["GROUP", "STATE", "PROTOCOL", "TYPE", "PROTOCOL", "MEMBERS"],
        ["g1", "Stable", "consumer", "range", "2"],
        [],
        ["MEMBER", "ID", "CLIENT", "ID", "HOST", "TOPIC", "PARTITIONS"],
        ["m-1", "app-a", "/10.0.0.1", "t", "0,1"],
        ["m-1", "app-a", "/10.0.0.1", "u", "2"],
        ["m-2", "app-b", "/10.0.0.2", "u", "0,1"]]
    rc, out, _ = run(capsys, "describe-groups", "-b", "127.0.0.1:1", "-g", "g1", "-t", "t")
    assert [line.split() for line in out.splitlines()[4:]] == [
        ["m-1", "app-a", "/10.0.0.1", "t", "0,1"], ["m-2", "app-b", "/10.0.0.2"]]
    rc, out, _ = run(capsys, "describe-groups", "-b", "127.0.0.1:1", "-g", "g1", "-t", "t", "--json")
    assert jl(out) == [{"group": "g1", "state": "Stable", "protocol_type": "consumer",
                        "protocol": "range", "type": "classic", "members": [
                            {"member_id": "m-1", "client_id": "app-a", "host": "/10.0.0.1",
                             "assignment": {"t": [0, 1]}},
                            {"member_id": "m-2", "client_id": "app-b", "host": "/10.0.0.2",
                             "assignment": {}}]}]
