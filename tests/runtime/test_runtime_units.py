"""Settings (defaults < TOML < KCODEC_RUN_* < flags), the handler's answers and their
outcomes (retries with backoff, dead ones), without a broker."""

from __future__ import annotations

import asyncio
import time

import pytest

from kcodec.runtime.config import Settings
from kcodec.runtime.handler import (
    Hung,
    Runner,
    backoff_ms,
    check_results,
    handler_ref,
    load_handler,
    plan_outcome,
)
from kcodec.runtime.message import Message


def test_settings_precedence(tmp_path) -> None:
    f = tmp_path / "run.toml"
    f.write_text('pullers = 2\nsinkers = 3\ndead-letter-topic = "dlq"\nstorage = "redis"\n'
                 '[client]\nsession_timeout_ms = 20000\nsecurity_protocol = "SASL_PLAINTEXT"\n'
                 'sasl_username = "u"\n')
    env = {"KCODEC_RUN_SINKERS": "4", "KCODEC_RUN_CLIENT_SASL_PASSWORD": "pw",
           "KCODEC_RUN_HANDLER_TIMEOUT": "2.5"}
    s = Settings.build(file=str(f), env=env, overrides={"storage": "file", "topics": ["a"],
                                                        "group": "g"})
    assert (s.pullers, s.sinkers, s.storage, s.dead_letter_topic) == (2, 4, "file", "dlq")
    assert s.handler_timeout == 2.5
    assert s.client == {"session_timeout_ms": 20000, "security_protocol": "SASL_PLAINTEXT",
                        "sasl_username": "u", "sasl_password": "pw"}
    s.ready()
    cfg = s.consumer_config()
    assert cfg["enable_auto_commit"] is False and cfg["group_id"] == "g"
    assert "sasl_password" in s.producer_config()


@pytest.mark.parametrize("kwargs, words", [
    ({"storage": "disk"}, "--storage must be one of direct, file, redis"),
    ({"pullers": 0}, "--pullers must be at least 1"),
    ({"retries": -1}, "--retries must be a non-negative integer"),
    ({"client": {"no_such": 1}}, "unknown client setting 'no_such'"),
    ({"client": {"group_id": "x"}}, "is the runtime's: use --group"),
    ({"client": {"enable_auto_commit": True}}, "offsets are committed by the runtime"),
    ({"handler_timeout": 0}, "--handler-timeout must be a positive number"),
])
def test_settings_refuse_bad_values(kwargs, words) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace("'", "'")):
        Settings(**kwargs)


def test_settings_sources_name_the_bad_one(tmp_path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text("pulers = 2\n")
    with pytest.raises(ValueError, match="unknown setting 'pulers'"):
        Settings.build(file=str(f), env={})
    with pytest.raises(ValueError, match="KCODEC_RUN_NOPE"):
        Settings.build(env={"KCODEC_RUN_NOPE": "1"})
    with pytest.raises(ValueError, match="KCODEC_RUN_PULLERS: expected int"):
        Settings.build(env={"KCODEC_RUN_PULLERS": "two"})
    (tmp_path / "broken.toml").write_text("pullers = \n")
    with pytest.raises(ValueError, match="not valid TOML"):
        Settings.build(file=str(tmp_path / "broken.toml"), env={})
    with pytest.raises(ValueError, match="no topic"):
        Settings(group="g").ready()
    with pytest.raises(ValueError, match="bootstrap_servers"):
        Settings(topics=["t"], group="g", bootstrap="not a host:x").ready()


def test_handler_refs() -> None:
    assert load_handler("tests.runtime.handlers:record").__name__ == "record"
    with pytest.raises(ValueError, match="MODULE:FUNCTION"):
        load_handler("nocolon")
    with pytest.raises(ValueError, match="cannot import module 'no_such_mod_x'"):
        load_handler("no_such_mod_x:f")
    with pytest.raises(ValueError, match="has no 'nope'"):
        load_handler("tests.runtime.handlers:nope")
    with pytest.raises(ValueError, match="module-level function"):
        handler_ref(lambda r: r)
    from tests.runtime.handlers import record

    assert handler_ref(record) == "tests.runtime.handlers:record"


@pytest.mark.parametrize("result, words", [
    ([True], "returned 1 results for 2 records"),
    (None, "returned NoneType, not a list"),
    ([True, 1], "returned 1 among its results"),
    # equal to True, but not True: the all-True shortcut must not take them
    ([1, True], "returned 1 among its results"),
    ([True, 1.0], "returned 1.0 among its results"),
])
def test_malformed_answers_fail_the_batch(result, words, caplog) -> None:
    errs = check_results(result, 2)
    assert errs == [f"the handler {errs[0][len('the handler '):]}"] * 2
    assert words in errs[0]
    assert words in caplog.text


def test_all_true_answers_are_every_record_done() -> None:
    assert check_results([True] * 500, 500) == [None] * 500
    assert check_results((True, True), 2) == [None, None]
    assert check_results([], 0) == []
    assert check_results([True, False, ValueError("x")], 3) == [
        None, "the handler returned False", "ValueError: x"]


def test_runner_sync_async_raise_and_deadline() -> None:
    r = Runner(lambda recs: [True, False], 5)
    r.start([1, 2])
    assert _wait(r) == [None, "the handler returned False"]

    def boom(recs):
        raise KeyError("x")
    r = Runner(boom, 5)
    r.start([1])
    assert _wait(r) == ["KeyError: 'x'"]

    async def slow(recs):
        await asyncio.sleep(10)
    r = Runner(slow, 0.2)
    r.start([1, 2])
    errs = _wait(r)
    assert "past its deadline of 0.2 s" in errs[0] and "cancelled" in errs[0]
    r.close()

    r = Runner(lambda recs: time.sleep(10), 0.2)
    r.start([1])
    with pytest.raises(Hung, match="past its deadline of 0.2 s"):
        _wait(r)


def test_a_record_handler_run_on_batches_is_told_the_flag(caplog) -> None:
    # the newcomer's first handler: one record a call, run with the default --handle batch
    def handle(msg):
        return msg.value
    r = Runner(handle, 5)
    with caplog.at_level("ERROR"):
        r.start([Message("t", 0, 5, 0, 0, None, b"v", [])])
        assert _wait(r) == ["AttributeError: 'list' object has no attribute 'value'"]
    assert "run with --handle record" in caplog.text

    def other(recs):
        raise AttributeError("no such thing")
    r = Runner(other, 5)
    caplog.clear()
    with caplog.at_level("ERROR"):
        r.start([1])
        _wait(r)
    assert "AttributeError: no such thing" in caplog.text
    assert "--handle record" not in caplog.text


def _wait(r: Runner) -> list:
    while True:
        got = r.wait(0.05)
        if got is not None:
            return got


def test_outcomes_retry_with_backoff_then_dead() -> None:
    assert [backoff_ms(n, 100, 1000) for n in (1, 2, 3, 4, 5)] == [100, 200, 400, 800, 1000]
    m = Message("t", 0, 5, 0, 0, None, b"v", [])
    now = int(time.time() * 1000)
    out = plan_outcome([m, m._replace(offset=6)], [None, "bad"], retries=2, base_ms=100,
                       cap_ms=1000)
    assert out.done == [0] and not out.dead
    (r,) = out.retry
    assert r.attempts == 1 and r.error == "bad" and now + 90 <= r.not_before <= now + 1000
    out = plan_outcome([r], ["bad"], 2, 100, 1000)
    assert out.retry[0].attempts == 2
    out = plan_outcome([out.retry[0]], ["worse"], 2, 100, 1000)
    assert not out.retry and out.dead[0].attempts == 3 and out.dead[0].error == "worse"
    assert plan_outcome([m], ["x"], 5, 1, 1, final=True).dead


def _run(r: Runner, recs: list) -> list:
    r.start(recs)
    while True:
        got = r.wait(0.05)
        if got is not None:
            return got


def test_per_record_handlers_fail_only_the_record_that_raised(caplog) -> None:
    from kcodec.runtime import per_record

    seen = []

    @per_record
    def each(m: Message) -> None:
        seen.append(m.offset)
        if m.offset in (1, 3):
            raise ValueError(f"bad {m.offset}")

    async def each_async(m: Message) -> None:
        await asyncio.sleep(0)
        if m.offset == 2:
            raise KeyError("gone")
    recs = [Message("t", 0, i, 0, 0, None, b"v", []) for i in range(5)]
    got = _run(Runner(each, 5), recs)
    assert seen == [0, 1, 2, 3, 4]
    assert got == [None, "ValueError: bad 1", None, "ValueError: bad 3", None]
    assert "raised on 2 of 5 records" in caplog.text and "bad 1" in caplog.text
    r = Runner(each_async, 5, record=True)      # --handle record, async
    try:
        assert _run(r, recs) == [None, None, "KeyError: 'gone'", None, None]
    finally:
        r.close()


def test_a_batch_handler_fails_single_records() -> None:
    from kcodec.runtime import Failed

    recs = [Message("t", 0, i, 0, 0, None, b"v", []) for i in range(4)]

    def named(rs: list) -> list:
        raise Failed({1: "no stock", 3: ValueError("bad sku")})
    assert _run(Runner(named, 5), recs) == [None, "RuntimeError: no stock", None,
                                            "ValueError: bad sku"]
    # exceptions in the results count as failures with their reason
    assert _run(Runner(lambda rs: [True, OSError("disk"), False, True], 5), recs) == \
        [None, "OSError: disk", "the handler returned False", None]

    def out_of_range(rs: list) -> list:
        raise Failed({9: "?"})
    errs = _run(Runner(out_of_range, 5), recs)
    assert len(set(errs)) == 1 and "naming index 9 of a batch of 4" in errs[0]


def test_next_offsets_is_the_offset_after_each_partitions_last_message() -> None:
    from kcodec.client import TopicPartition
    from kcodec.runtime.puller import next_offsets

    def m(t: str, p: int, off: int) -> Message:
        return Message(t, p, off, 0, 0, None, b"v", [], 0, None, 0)

    batch = [m("a", 0, 5), m("a", 1, 7), m("a", 0, 6), m("b", 0, 1), m("a", 1, 8), m("a", 0, 9)]
    got = next_offsets(batch)
    assert got == {TopicPartition("a", 0): 10, TopicPartition("a", 1): 9,
                   TopicPartition("b", 0): 2}
    assert all(type(k) is TopicPartition for k in got)
    assert next_offsets([]) == {}


def test_an_apps_record_handler_fails_only_the_record_that_raised() -> None:
    """``@app.record_handler``: the app runs the function one record a call, as
    ``per_record`` does (the function itself stays callable as written)."""
    from kcodec.runtime import App
    from kcodec.runtime.handler import is_per_record

    app = App(topics=["t"], group="g")

    @app.record_handler
    def each(m: Message) -> None:
        if m.offset == 1:
            raise ValueError("bad 1")
    assert each(Message("t", 0, 0, 0, 0, None, b"v", [])) is None    # undecorated
    handler = app._handler
    assert handler is each and is_per_record(handler)
    got = _run(Runner(handler, 5), [Message("t", 0, i, 0, 0, None, b"v", []) for i in range(3)])
    assert got == [None, "ValueError: bad 1", None]
