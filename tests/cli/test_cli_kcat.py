"""What kcat and Kafka's own tools have, the kcodec command has too: groups list, one
partition from an offset or a time (-p, -o), a notice at a partition's end (-e to exit
there), topic configs at creation, notices and near names for topics and groups that do
not exist, and a command of sub-commands given none lists them."""

from __future__ import annotations

import json
import re
import time

import pytest

from kcodec.client import Admin, Consumer, Producer, TopicPartition
from tests.cli.harness import create, run

BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def ten(kbroker) -> tuple[str, str]:
    """Partition 1 of a two-partition topic: v0..v9 at BASE_TS + 1000 * i."""
    topic = "ten"
    create(kbroker, topic, 2)
    with Producer(bootstrap_servers=kbroker.bootstrap, linger_ms=0) as p:
        for i in range(10):
            p.send(topic, b"v%d" % i, partition=1, timestamp=BASE_TS + 1000 * i).result(10)
    return kbroker.bootstrap, topic


# ------------------------------------------------------------------ -p, -o, -e

@pytest.mark.parametrize("offset,values", [
    (["-o", "beginning"], range(10)),
    (["--from-beginning"], range(10)),
    (["-o", "3"], range(3, 10)),
    (["-o", "-2"], range(8, 10)),
    (["-o", "-50"], range(10)),                      # fewer than N: all there is
    (["-o", f"s@{BASE_TS + 5000}"], range(5, 10)),
    (["-o", f"s@{BASE_TS + 4500}"], range(5, 10)),   # the first at or after the time
    (["-o", f"s@{BASE_TS + 99000}"], []),            # none after it: the end
    (["-o", "end"], []),
])
def test_one_partition_from_an_offset_or_a_time(ten, offset, values) -> None:
    bootstrap, topic = ten
    rc, out, err, _ = run("consume", "-b", bootstrap, "-t", topic, "-p", "1", *offset, "-e")
    assert rc == 0, err
    assert out.splitlines() == [f"v{i}" for i in values]
    assert err.strip() == f"kcodec consume: reached the end of {topic}[1] at offset 10: exiting"


def test_stop_time_and_a_start_offset(ten) -> None:
    bootstrap, topic = ten
    rc, out, err, _ = run("consume", "-b", bootstrap, "-t", topic, "-p", "1", "-o", "4",
                          "-o", f"e@{BASE_TS + 7000}")
    assert rc == 0, err
    assert out.splitlines() == ["v4", "v5", "v6"]
    assert err.strip() == f"kcodec consume: reached the stop time in {topic}[1] at offset 7: exiting"


def test_an_offset_outside_the_log_is_moved_into_it_with_a_notice(ten) -> None:
    bootstrap, topic = ten
    rc, out, err, _ = run("consume", "-b", bootstrap, "-t", topic, "-p", "1", "-o", "100", "-e")
    assert rc == 0 and out == ""
    assert err.splitlines() == [
        f"kcodec consume: {topic}[1]: offset 100 is past the end (10): starting at 10",
        f"kcodec consume: reached the end of {topic}[1] at offset 10: exiting"]
    rc, out, err, _ = run("consume", "-b", bootstrap, "-t", topic, "-p", "1", "-o", "100", "-e", "-q")
    assert (rc, out, err) == (0, "", "")


def test_every_partition_reaches_its_end(ten) -> None:
    """Without -p: both partitions (one empty); -e exits when the last gets there, and the
    notices name each once."""
    bootstrap, topic = ten
    rc, out, err, _ = run("consume", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e",
                          "--format", "text")
    assert rc == 0, err
    assert out.splitlines() == [f"1:{i} v{i}" for i in range(10)]
    lines = err.splitlines()
    assert sorted(x.removesuffix(": exiting") for x in lines) == [
        f"kcodec consume: reached the end of {topic}[0] at offset 0",
        f"kcodec consume: reached the end of {topic}[1] at offset 10"]
    assert lines[-1].endswith(": exiting") and len(lines) == 2


def test_end_notice_without_exit_and_again_after_new_records(kbroker, topic_name) -> None:
    """Without -e: the notice comes, the consumer goes on; a new record and its end again."""
    from tests.cli.harness import finish, kcodec

    create(kbroker, topic_name, 1)
    child = kcodec("consume", "-b", kbroker.bootstrap, "-t", topic_name, "-o", "beginning")
    try:
        assert child.stderr.readline().decode().strip() == \
            f"kcodec consume: reached the end of {topic_name}[0] at offset 0"
        with Producer(bootstrap_servers=kbroker.bootstrap) as p:
            p.send(topic_name, b"new", partition=0).result(10)
        assert child.stdout.readline() == b"new\n"
        assert child.stderr.readline().decode().strip() == \
            f"kcodec consume: reached the end of {topic_name}[0] at offset 1"
        child.send_signal(2)
        out, err = finish(child, 30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130 and out == b""


@pytest.mark.broker
def test_exit_at_the_end_on_tansu(broker, topic_name) -> None:
    create(broker, topic_name, 2)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
        for i in range(3):
            p.send(topic_name, b"t%d" % i, partition=0).result(10)
    rc, out, err, _ = run("consume", "-b", broker.bootstrap, "-t", topic_name, "-o", "beginning",
                          "-e")
    assert rc == 0 and out.splitlines() == ["t0", "t1", "t2"], err
    assert err.splitlines()[-1].endswith(": exiting") and len(err.splitlines()) == 2


def test_group_member_exits_at_the_end_and_commits(kbroker, topic_name) -> None:
    create(kbroker, topic_name, 2)
    with Producer(bootstrap_servers=kbroker.bootstrap, linger_ms=0) as p:
        for i in range(4):
            p.send(topic_name, b"g%d" % i, partition=i % 2).result(10)
    group = f"g-{topic_name}"
    rc, out, err, _ = run("consume", "-b", kbroker.bootstrap, "-t", topic_name, "-g", group,
                          "-o", "beginning", "-e")
    assert rc == 0 and sorted(out.splitlines()) == ["g0", "g1", "g2", "g3"], err
    with Admin(bootstrap_servers=kbroker.bootstrap) as a:
        assert a.committed_offsets(group, [topic_name]) == {
            TopicPartition(topic_name, 0): 2, TopicPartition(topic_name, 1): 2}


@pytest.mark.parametrize("argv,msg", [
    (["-o", "bogus"], "-o 'bogus': expected beginning, end, stored, an offset N"),
    (["-o", "s@x"], "-o 's@x': s@ needs milliseconds since the epoch, e.g. s@1700000000000"),
    (["-o", "e@-5"], "e@ needs milliseconds since the epoch"),
    (["-o", "1", "-o", "2"], "-o: one place to start, not two"),
    (["-o", "e@1", "-o", "e@2"], "-o e@MS may be given once"),
    (["-o", "stored"], "-o stored starts at a group's committed offsets: give -g GROUP"),
    (["-o", "5", "-g", "g"], "with -g a member starts at the group's committed offsets"),
    (["-o", "end", "--from-beginning"], "--from-beginning and -o say different things"),
    (["-p", "0", "-g", "g"], "-p picks partitions without a group"),
    (["-p", "0", "-t", "other"], "-p picks partitions of one topic: give one -t"),
    (["-p", "-1"], "partition must be non-negative, got -1"),
    (["-K", ":", "--json"], "-K applies to --format raw output, not json"),
    (["-D", ";", "--format", "text"], "-D applies to --format raw output, not text"),
    (["--base64"], "--base64 applies to --format json output, not raw"),
    (["--format", "text", "--json"], "--json and --format text: give one"),
])
def test_consume_usage_errors(capsys, argv, msg) -> None:
    from kcodec.cli import main

    rc = main(["consume", "-t", "x", "-b", "127.0.0.1:1", *argv])
    out, err = capsys.readouterr()
    assert (rc, out) == (2, "") and len(err.strip().splitlines()) == 1 and msg in err, err


def test_a_partition_the_topic_does_not_have(ten) -> None:
    bootstrap, topic = ten
    rc, out, err, _ = run("consume", "-b", bootstrap, "-t", topic, "-p", "1", "-p", "7")
    assert (rc, out) == (1, "")
    assert err.strip() == f"kcodec consume: error: topic {topic!r} has partitions 0..1: no partition 7"


# ------------------------------------------------------------------ groups list

def test_groups_list(either, topic_name) -> None:
    group = f"g-{topic_name}"
    create(either, topic_name, 1)
    with Consumer(bootstrap_servers=either.bootstrap, group_id=group, enable_auto_commit=False) as c:
        c.assign([TopicPartition(topic_name, 0)])
        c.commit({TopicPartition(topic_name, 0): 0})
    rc, out, err, _ = run("groups", "list", "-b", either.bootstrap)
    assert rc == 0, err
    assert out.splitlines()[0].split() == ["GROUP", "TYPE", "STATE", "PROTOCOL", "TYPE"]
    assert group in [line.split()[0] for line in out.splitlines()[1:]]
    rc, out, err, _ = run("groups", "list", "-b", either.bootstrap, "--json")
    row = [r for r in map(json.loads, out.splitlines()) if r["group"] == group]
    assert rc == 0 and len(row) == 1 and set(row[0]) == {"group", "type", "state", "protocol_type"}
    if either.__class__.__name__ == "CliBroker":   # (Tansu: state "Unknown", no type)
        assert row[0]["type"] == "classic" and row[0]["state"] == "Empty"


# ------------------------------------------------------------------ topics create --config

def test_topics_create_with_configs(kbroker, topic_name) -> None:
    rc, out, err, _ = run("topics", "create", "-b", kbroker.bootstrap, topic_name,
                          "--config", "cleanup.policy=compact", "--config", "retention.ms=60000")
    assert (rc, out.strip()) == (0, f"{topic_name}: created"), err
    rc, out, _, _ = run("topics", "create", "-b", kbroker.bootstrap, topic_name + "-x",
                        "--config", "no.such.config=1", "--json")
    assert rc == 1 and json.loads(out) == {
        "topic": topic_name + "-x", "ok": False, "error": "INVALID_CONFIG",
        "message": "Unknown topic config name: no.such.config"}
    rc, out, _, _ = run("topics", "create", "-b", kbroker.bootstrap, topic_name + "-x",
                        "--config", "no.such.config=1")
    assert rc == 1 and out.strip() == \
        f"{topic_name}-x: INVALID_CONFIG: Unknown topic config name: no.such.config"


@pytest.mark.parametrize("argv,msg", [
    (["--config", "novalue"], "--config 'novalue' is not KEY=VALUE"),
    (["--config", "=v"], "--config '=v' is not KEY=VALUE"),
    (["--config", "a=1", "--config", "a=2"], "--config a given twice ('1' and '2')"),
])
def test_topics_create_config_usage_errors(capsys, argv, msg) -> None:
    from kcodec.cli import main

    rc = main(["topics", "create", "t", "-b", "127.0.0.1:1", *argv])
    out, err = capsys.readouterr()
    assert (rc, out) == (2, "") and err.strip() == f"kcodec topics: error: {msg}"


# ------------------------------------------------------------------ topics that do not exist

def test_produce_notices_a_topic_the_broker_created(either, topic_name) -> None:
    rc, _, err, _ = run("produce", "-b", either.bootstrap, "-t", topic_name, "m")
    assert rc == 0, err
    first = err.splitlines()[0]
    assert re.fullmatch(rf"kcodec produce: topic {topic_name!r} did not exist: the broker "
                        r"created it with \d+ partitions?", first), first
    rc, _, err, _ = run("produce", "-b", either.bootstrap, "-t", topic_name, "m")
    assert rc == 0 and "did not exist" not in err              # the second time: no notice
    rc, _, err, _ = run("produce", "-b", either.bootstrap, "-t", topic_name + "x", "m")
    assert rc == 0 and f"(did you mean {topic_name!r}?); 'kcodec topics delete {topic_name}x' " \
        "removes it" in err.splitlines()[0]


def test_produce_to_a_missing_topic_of_a_broker_that_does_not_create_fails_at_once() -> None:
    from kcodec.broker import Cluster

    with Cluster(1, auto_create_topics=False) as c:
        c.create_topic("events")
        rc, out, err, secs = run("produce", "-b", c.bootstrap, "-t", "evnts", "--timeout", "30",
                                 stdin=b"a\n")
    assert (rc, out) == (1, "") and secs < 20
    assert err.strip() == (
        "kcodec produce: error: topic 'evnts' does not exist (did you mean 'events'?), and the "
        "broker does not create topics on first use: 'kcodec topics create evnts' makes it "
        "(nothing sent, no input read)")


def test_near_names_for_topics_and_groups(kbroker, topic_name) -> None:
    b = ("-b", kbroker.bootstrap)
    create(kbroker, topic_name, 1)
    group = f"g-{topic_name}"
    with Consumer(bootstrap_servers=kbroker.bootstrap, group_id=group, enable_auto_commit=False) as c:
        c.assign([TopicPartition(topic_name, 0)])
        c.commit({TopicPartition(topic_name, 0): 0})
    typo = topic_name[:-1] + "Z"
    near_topic = (f"topic {typo!r} does not exist (did you mean {topic_name!r}?): 'kcodec topics "
                  "list' shows the topics, 'kcodec topics create NAME' makes one")
    for argv in (["consume", "-t", typo], ["metadata", "topics", "-t", typo],
                 ["lag", "-g", group, "-t", typo], ["offsets", "-g", group, "-t", typo],
                 ["describe-groups", "-g", group, "-t", typo]):
        rc, out, err, _ = run(*argv, *b)
        assert (rc, out) == (1, "") and err.strip() == f"kcodec {argv[0]}: error: {near_topic}", err
    near_group = (f"group {group + 'x'!r} does not exist (did you mean {group!r}?): 'kcodec "
                  "groups list' shows the groups")
    for cmd in ("lag", "offsets", "describe-groups"):
        rc, out, err, _ = run(cmd, "-g", group + "x", *b)
        assert (rc, out) == (1, "") and err.strip() == f"kcodec {cmd}: error: {near_group}", err


# ------------------------------------------------------------------ sub-commands, listed

@pytest.mark.parametrize("argv,lines", [
    (["metadata"], ["kcodec metadata brokers", "kcodec metadata topics",
                    "('kcodec metadata --help' lists the options)"]),
    (["topics"], ["kcodec topics list", "kcodec topics create", "kcodec topics delete",
                  "('kcodec topics NAME --help' lists the options of each)"]),
    (["groups"], ["kcodec groups list"]),
])
def test_a_command_without_its_sub_command_lists_them(capsys, argv, lines) -> None:
    from kcodec.cli import main

    rc = main(argv)
    out, err = capsys.readouterr()
    assert (rc, out) == (2, "")
    assert err.splitlines()[0] == f"kcodec {argv[0]}: give one of these:"
    for want in lines:
        assert any(line.strip().startswith(want) for line in err.splitlines()), (want, err)


def test_kcodec_alone_lists_the_commands(capsys) -> None:
    from kcodec.cli import main

    rc = main([])
    out, err = capsys.readouterr()
    assert (rc, out) == (2, "")
    for cmd in ("consume", "produce", "groups", "lag", "metadata", "topics"):
        assert re.search(rf"^\s+{cmd}\s", err, re.M), cmd


def test_metadata_options_before_or_after_what() -> None:
    """``metadata -t T topics`` and ``metadata topics -t T`` both work (a positional)."""
    from kcodec.cli import build_parser

    p = build_parser()
    for argv in (["metadata", "-t", "x", "topics"], ["metadata", "topics", "-t", "x"]):
        args = p.parse_args(argv)
        assert (args.what, args.topic) == ("topics", ["x"])


@pytest.mark.parametrize("command,words", [
    ("consume", ["s@MS", "e@MS", "-N", "beginning", "--exit", "--format", "--base64", "-K"]),
    ("produce", ["-K", "-D", "--max-line-bytes"]),
    ("topics create", ["--config"]),
    ("groups list", ["ListGroups"]),
])
def test_help_documents_the_new_options(capsys, command, words) -> None:
    from kcodec.cli import main

    with pytest.raises(SystemExit):
        main([*command.split(), "--help"])
    out = capsys.readouterr().out
    for w in words:
        assert w in out, (command, w)


def test_consume_waits_for_a_group_assignment_before_exit(kbroker, topic_name) -> None:
    """-e with -g: not done while nothing is assigned yet (an empty assignment is not "every
    partition at its end")."""
    create(kbroker, topic_name, 1)
    t0 = time.monotonic()
    rc, out, err, _ = run("consume", "-b", kbroker.bootstrap, "-t", topic_name, "-g",
                          f"g-{topic_name}", "-e")
    assert rc == 0 and out == "" and time.monotonic() - t0 < 30
    assert err.strip() == f"kcodec consume: reached the end of {topic_name}[0] at offset 0: exiting"
