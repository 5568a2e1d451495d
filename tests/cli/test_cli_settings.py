"""``-X NAME=VALUE`` on produce and consume (kcat's; ``--producer-property`` and
``--consumer-property`` as Kafka's scripts): any client setting by kcodec's, Java's or
librdkafka's name, over the command's own choices; a bad one is a usage error."""

from __future__ import annotations

from kcodec.client import Admin, NewTopic
from tests.cli.harness import run


def test_a_large_record_goes_through_once_its_limits_are_raised(kbroker) -> None:
    with Admin(bootstrap_servers=kbroker.bootstrap) as a:
        a.create_topics([NewTopic("big-x", 1, -1, {"max.message.bytes": "20000000"})])
    line = b"v" * 5_000_000 + b"\n"
    common = ("produce", "-q", "-b", kbroker.bootstrap, "-t", "big-x", "--max-line-bytes", "6000000")
    rc, _, err, _ = run(*common, "-X", "buffer_memory=4000000", stdin=line)
    assert rc == 1 and "buffer_memory" in err, err      # the setting reached the producer
    rc, _, err, _ = run(*common, "--producer-property", "buffer.memory=16000000", stdin=line)
    assert rc == 0, err
    assert "1 records confirmed in 'big-x'" in err


def test_a_setting_wins_over_the_commands_choice(kbroker) -> None:
    # the command sets max_request_size from --max-line-bytes; -X replaces it
    rc, _, err, _ = run("produce", "-q", "-b", kbroker.bootstrap, "-t", "small-x",
                        "-X", "message.max.bytes=1000", stdin=b"x" * 5000 + b"\n")
    assert rc == 1 and "max_request_size" in err, err


def test_unknown_or_bad_settings_are_usage_errors(kbroker) -> None:
    for argv, said in ((["produce", "-t", "x", "-X", "linger.msx=3"], "did you mean linger_ms?"),
                       (["produce", "-t", "x", "-X", "linger.ms=abc"], "linger_ms"),
                       (["produce", "-t", "x", "-X", "novalue"], "-X takes NAME=VALUE"),
                       (["consume", "-t", "x", "-X", "fetch_max_bytes=zz"], "fetch_max_bytes"),
                       (["consume", "-t", "x", "--consumer-property", "nosuch=1"], "nosuch")):
        rc, out, err, _ = run(*argv, "-b", kbroker.bootstrap)
        assert (rc, out) == (2, ""), (argv, err)
        assert said in err, (argv, err)
