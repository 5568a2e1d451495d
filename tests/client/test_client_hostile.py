"""A hostile or broken broker cannot exhaust the client nor keep it silent.

The broker (tests/support/hostile_broker.py) answers the handshake and Metadata well and
Fetch badly; the consumer runs in a process of its own (tests/support/hostile_client.py),
so its resident memory is its own and is measured from /proc.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kcodec.client import ConsumerConfig
from tests.support.hostile_broker import HostileBroker

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20


def _run_client(broker: HostileBroker, seconds: float, **settings) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "tests.support.hostile_client", broker.bootstrap, str(seconds),
         json.dumps(settings)], capture_output=True, text=True, timeout=seconds + 60, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_huge_answer_is_refused_from_its_size_and_costs_no_memory() -> None:
    # before: 500 MiB announced and sent on each reconnect grew the client by 1.5 GB in
    # 10 s (the frame gathered, sliced and copied), and poll() said nothing
    with HostileBroker("huge", size=500 * MiB) as hb:
        r = _run_client(hb, 3, api_timeout_ms=10000)
    growth = r["peak"] - r["base"]
    assert growth < 48 * MiB, f"the client grew by {growth / MiB:.0f} MiB"
    first = r["raised"][0]
    assert first[1] == "ResponseTooLargeError" and first[0] < 2, r["raised"]
    assert "524288000 bytes, more than receive_message_max_bytes (100000000)" in first[2]
    # reported again at most once per api_timeout_ms, not on every retry
    assert len(r["raised"]) == 1, r["raised"]


def test_a_frame_under_the_cap_is_held_once() -> None:
    # 90 MiB frames of garbage under a good correlation id, again on every reconnect:
    # before, the client peaked at ~3.8 times a frame's size (gathered, sliced, copied);
    # now a frame exists once and is freed with its dead connection (the margin: a
    # random header can declare an unknown tagged field, which the decoder keeps as a
    # copy of that part of the frame -- up to the frame again, for a moment)
    size = 90 * MiB
    with HostileBroker("badbody", size=size) as hb:
        r = _run_client(hb, 4, api_timeout_ms=10000)
        assert hb.fetches >= 3      # several frames came and went
    growth = r["peak"] - r["base"]
    # the bound: that frame and that copy (2x), plus slack for the allocator; the regression
    # it guards against was 3.8x
    assert growth < 2.5 * size, f"the client grew by {growth / MiB:.0f} MiB for 90 MiB frames"


def test_receive_cap_is_a_setting() -> None:
    with HostileBroker("huge", size=2 * MiB) as hb:
        r = _run_client(hb, 1.5, receive_message_max_bytes=1 * MiB, fetch_max_bytes=MiB // 2)
    assert r["raised"] and r["raised"][0][1] == "ResponseTooLargeError"
    assert f"more than receive_message_max_bytes ({MiB})" in r["raised"][0][2]


@pytest.mark.parametrize(("mode", "why"), [
    ("silent", r"a Fetch to 127\.0\.0\.1:\d+ unanswered for [123]\.\d s"),
    ("stall", r"a Fetch to 127\.0\.0\.1:\d+ unanswered for [123]\.\d s"),
    ("drip", r"a Fetch to 127\.0\.0\.1:\d+ unanswered for [123]\.\d s"),
    ("garbage", r"last error: 127\.0\.0\.1:\d+: response with correlation id"),
])
def test_poll_reports_a_broker_that_stops_answering_within_api_timeout(mode: str,
                                                                       why: str) -> None:
    # before: 45 s and more of empty polls (the Fetch timed out only after
    # request_timeout_ms, and a broker answering Metadata counted as alive). The Fetch's
    # own age is below api_timeout_ms when it went out a little after the last progress
    # (the position lookup's answer): 1.9 s under load
    import re

    with HostileBroker(mode, size=1000, interval=0.5) as hb:
        r = _run_client(hb, 4.5, api_timeout_ms=2000)
    lost = [e for e in r["raised"] if e[1] == "BrokerNotAvailableError"]
    assert lost, r
    t, _, text = lost[0]
    assert 2.0 <= t < 3.0, lost
    assert text.startswith("no broker answered for 2.0 s; ")
    assert re.search(why, text), text
    assert len(lost) == 2 and lost[1][0] >= 4.0      # and again after another api_timeout


def test_error_cb_gets_the_report_and_poll_goes_on() -> None:
    with HostileBroker("silent") as hb:
        r = _run_client(hb, 3.5, api_timeout_ms=1000, fetch_max_wait_ms=100, error_cb=True)
    assert r["raised"] == []
    assert [e[1] for e in r["called"]][:2] == ["BrokerNotAvailableError"] * 2
    assert 1.0 <= r["called"][0][0] < 2.0


def test_a_good_broker_is_never_reported() -> None:
    with HostileBroker("good") as hb:
        r = _run_client(hb, 2.5, api_timeout_ms=1000, fetch_max_wait_ms=100)
    assert r["raised"] == [] and hb.fetches > 5


def test_settings_of_the_cap() -> None:
    cfg = ConsumerConfig.from_kwargs({"receive.message.max.bytes": "2000000",
                                      "fetch.max.bytes": "1000000"})
    assert cfg.receive_message_max_bytes == 2_000_000
    with pytest.raises(ValueError, match=r"fetch_max_bytes \(52428800\) must be at most "
                                         r"receive_message_max_bytes - 512"):
        ConsumerConfig(receive_message_max_bytes=50_000_000)
    with pytest.raises(ValueError, match="receive_message_max_bytes must be at least 1000"):
        ConsumerConfig(receive_message_max_bytes=10, fetch_max_bytes=1)
    with pytest.raises(ValueError, match="error_cb must be a callable"):
        ConsumerConfig(error_cb="print")


def test_a_group_member_reports_a_sigstopped_broker_within_api_timeout() -> None:
    # before: a member of a group polled 59 s before its first error; the broker here is
    # a real one, stopped with SIGSTOP (it keeps its connections and answers nothing)
    import os
    import signal
    import time

    from kcodec.client import BrokerNotAvailableError, Consumer, KafkaTimeoutError, Producer

    raised: list[tuple[float, str]] = []
    broker = subprocess.Popen([sys.executable, "-m", "kcodec", "broker", "--port", "0", "--json"],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert broker.stdout is not None
        boot = json.loads(broker.stdout.readline())["bootstrap"]
        with Producer(bootstrap_servers=boot) as p:
            p.send("t", b"x").result(10)
        c = Consumer(bootstrap_servers=boot, group_id="g", api_timeout_ms=2000,
                     session_timeout_ms=6000, heartbeat_interval_ms=1000,
                     auto_offset_reset="earliest")
        try:
            c.subscribe(["t"])
            deadline = time.monotonic() + 20
            while not c.poll(0.2) and time.monotonic() < deadline:
                pass
            os.kill(broker.pid, signal.SIGSTOP)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 4.5:
                try:
                    c.poll(0.2)
                except BrokerNotAvailableError as exc:
                    raised.append((time.monotonic() - t0, str(exc)))
        finally:
            broker.kill()
            try:
                c.close()
            except KafkaTimeoutError:     # the broker is gone: close says so, as documented
                pass
        assert raised and 2.0 <= raised[0][0] < 3.0, raised
        assert raised[0][1].startswith("no broker answered for 2.0 s"), raised
    finally:
        broker.kill()
        broker.wait(10)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def test_an_undecodable_frame_is_not_copied_twice_by_the_second_attempt() -> None:
    """A frame that fails to decode is tried once more leniently (bytes left after the
    response ignored). The first attempt's copy of a huge unknown tagged field must be
    gone by then: its traceback held it in the pure twin, so the two together peaked at
    twice the field over the frame (three frames' worth with the header's and a body's)."""
    import tracemalloc

    from kcodec.client.net import wire
    from kcodec.errors import ProtocolError
    from kcodec.protocol import ApiKey

    field = 40 * MiB
    payload = (b"\x00\x00\x00\x07" + _uvarint(1) + _uvarint(1234) + _uvarint(field)
               + bytes(field) + b"\xff" * 16)              # the header's tag, a broken body
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError, match="undecodable FetchResponse v16"):
            wire.decode_response(ApiKey.FETCH, 16, memoryview(payload).toreadonly())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.5 * field, f"{peak / MiB:.0f} MiB at the peak for a {field // MiB} MiB field"
