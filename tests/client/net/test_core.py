"""The sans-I/O core and the asyncio driver against misbehaving peers (no real broker)."""

from __future__ import annotations

import asyncio
import struct
import time

import pytest

from kcodec.client.config import ClientConfig
from kcodec.client.errors import BrokerNotAvailableError, KafkaTimeoutError
from kcodec.client.net.cluster import Cluster
from kcodec.client.net.conn import BrokerConnection
from kcodec.client.net.core import Connection
from kcodec.errors import ProtocolError
from kcodec.protocol import ApiVersionsResponse, MetadataRequest, MetadataResponse, encode_response


def _api_versions(cid: int) -> bytes:
    keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=0, max_version=12)
            for k in (0, 1, 2, 3, 18)]
    return encode_response(ApiVersionsResponse(error_code=0, api_keys=keys), 3, cid)


def _metadata(cid: int, version: int) -> bytes:
    return encode_response(MetadataResponse(brokers=[], topics=[]), version, cid)


# ------------------------------------------------------------------------------ sans-I/O core

def test_core_request_response_roundtrip() -> None:
    c = Connection("me")
    cid, frame = c.handshake()
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    assert c.in_flight == 1
    resp = _api_versions(cid)
    # byte by byte: nothing until the frame is complete
    events = []
    for i in range(len(resp)):
        events += c.receive(resp[i:i + 1])
    assert len(events) == 1 and events[0].correlation_id == cid
    assert c.on_api_versions(events[0])
    assert c.version(3) == 12 and c.in_flight == 0


def test_core_negotiation_limits() -> None:
    c = Connection()
    cid, _ = c.handshake()
    c.on_api_versions(c.receive(_api_versions(cid))[0])
    from kcodec.errors import UnsupportedVersionError
    with pytest.raises(UnsupportedVersionError):
        c.version(11)   # JoinGroup not advertised


def test_core_an_api_key_the_client_does_not_speak_is_a_clear_error() -> None:
    from kcodec.errors import UnsupportedVersionError
    with pytest.raises(UnsupportedVersionError, match="does not speak"):
        Connection().version(9999)        # not a KeyError


@pytest.mark.parametrize("junk", [b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x02ab"])
def test_core_garbage(junk: bytes) -> None:
    c = Connection()
    c.handshake()
    with pytest.raises(ProtocolError):
        c.receive(junk)
    assert c.closed


def test_core_wrong_correlation_id() -> None:
    c = Connection()
    cid, _ = c.handshake()
    with pytest.raises(ProtocolError, match="correlation id"):
        c.receive(_api_versions(cid + 7))


def test_core_unsolicited_response() -> None:
    c = Connection()
    with pytest.raises(ProtocolError, match="no request in flight"):
        c.receive(_api_versions(0))


def test_core_refuses_a_frame_over_the_cap_from_its_size_alone() -> None:
    from kcodec.client.errors import ResponseTooLargeError

    c = Connection(max_frame=1000)
    c.handshake()
    with pytest.raises(ResponseTooLargeError, match="receive_message_max_bytes") as e:
        c.receive((500 * 1024 * 1024).to_bytes(4, "big"))   # four bytes, no body yet
    assert (e.value.size, e.value.limit) == (500 * 1024 * 1024, 1000)
    assert c.closed and c.pending == 0
    assert isinstance(e.value, ProtocolError)


def test_core_default_cap_is_librdkafkas() -> None:
    assert Connection().max_frame == 100_000_000


def test_core_holds_only_what_arrived_and_decodes_in_place() -> None:
    c = Connection()
    cid, _ = c.handshake()
    frame = _api_versions(cid)
    c.receive(frame[:2])
    c.receive(frame[2:9])
    assert c.pending == 5   # the 5 body bytes that came: nothing allocated ahead of them
    got = []
    for i in range(9, len(frame)):  # byte by byte, as a drip-feeding peer sends it
        got += c.receive(frame[i:i + 1])
    assert len(got) == 1 and c.pending == 0


def test_core_release_drops_a_partial_frame() -> None:
    c = Connection()
    cid, _ = c.handshake()
    c.receive(_api_versions(cid)[:30])
    assert c.pending == 26   # the body bytes after the 4 size bytes
    c.release()
    assert c.pending == 0


def test_core_undecodable_body() -> None:
    c = Connection()
    cid, _ = c.handshake()
    bad = _api_versions(cid)
    bad = bad[:-6] + b"\xff" * 6
    with pytest.raises(ProtocolError):
        c.receive(bad)


def test_core_truncated_at_eof() -> None:
    c = Connection()
    cid, _ = c.handshake()
    c.receive(_api_versions(cid)[:10])
    with pytest.raises(ProtocolError, match="middle of a frame"):
        c.eof()


# ------------------------------------------------------------------------------ fake peers

async def _serve(behaviour):
    """A fake broker: ``behaviour(reader, writer)`` after a correct ApiVersions answer."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            req = await reader.readexactly(size)
            cid = struct.unpack(">i", req[4:8])[0]
            writer.write(_api_versions(cid))
            await writer.drain()
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            req = await reader.readexactly(size)
            cid = struct.unpack(">i", req[4:8])[0]
            await behaviour(cid, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def _garbage(cid: int, w: asyncio.StreamWriter) -> None:
    w.write(b"\x00\x00\x00\x08\xde\xad\xbe\xef\x00\x01\x02\x03")
    await w.drain()
    await asyncio.sleep(5)


async def _truncated(cid: int, w: asyncio.StreamWriter) -> None:
    w.write(_metadata(cid, 12)[:9])
    await w.drain()


async def _wrong_cid(cid: int, w: asyncio.StreamWriter) -> None:
    w.write(_metadata(cid + 1, 12))
    await w.drain()
    await asyncio.sleep(5)


async def _silent(cid: int, w: asyncio.StreamWriter) -> None:
    await asyncio.sleep(5)


@pytest.mark.parametrize("behaviour,exc,match", [
    (_garbage, ProtocolError, ""),
    (_truncated, ProtocolError, "middle of a frame"),
    (_wrong_cid, ProtocolError, "correlation id"),
    (_silent, KafkaTimeoutError, "timed out"),
])
def test_fake_peer_fails_pending_requests(behaviour, exc, match) -> None:
    async def main() -> None:
        server, port = await _serve(behaviour)
        async with server:
            conn = await BrokerConnection("127.0.0.1", port, 0, "t", 1.0).connect(2.0)
            # two requests in flight: both fail, neither hangs
            reqs = [asyncio.ensure_future(conn.request(MetadataRequest(topics=[]))) for _ in range(2)]
            t0 = time.monotonic()
            results = await asyncio.wait_for(asyncio.gather(*reqs, return_exceptions=True), 5)
            assert time.monotonic() - t0 < 3
            for r in results:
                assert isinstance(r, (exc, ProtocolError, KafkaTimeoutError)), r
            assert isinstance(results[0], exc) and match in str(results[0])
            assert not conn.alive
            with pytest.raises((ProtocolError, KafkaTimeoutError, BrokerNotAvailableError)):
                await conn.request(MetadataRequest(topics=[]))

    asyncio.run(main())


def test_unreachable_bootstrap_fails_at_once_naming_the_cause() -> None:
    """A client that never reached a broker stops when every address refused."""
    from kcodec.testing.net import free_port

    async def main() -> None:
        port = free_port()
        cluster = Cluster(ClientConfig(bootstrap_servers=f"127.0.0.1:{port}", api_timeout_ms=5000))
        t0 = time.monotonic()
        with pytest.raises(BrokerNotAvailableError, match=f"127.0.0.1:{port}: Connection refused"):
            await cluster.refresh()
        assert time.monotonic() - t0 < 1
        await cluster.close()

    asyncio.run(main())


def test_lost_broker_is_retried_until_the_timeout_then_named() -> None:
    """Once a broker answered, a refused reconnect may be a restart: retry until the
    timeout, then say so with the last error."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            req = await reader.readexactly(size)
            writer.write(_api_versions(struct.unpack(">hhi", req[:8])[2]))
            await writer.drain()
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        cluster = Cluster(ClientConfig(bootstrap_servers=f"127.0.0.1:{port}", api_timeout_ms=600))
        await cluster.any_connection()
        server.close()
        await server.wait_closed()
        t0 = time.monotonic()
        with pytest.raises(BrokerNotAvailableError, match=rf"within \d\.\d s .*127.0.0.1:{port}"):
            await cluster.refresh()
        assert 0.4 < time.monotonic() - t0 < 3
        await cluster.close()

    asyncio.run(main())


def test_retriable_error_is_retried_with_backoff() -> None:
    """A fake broker answers Metadata with LEADER_NOT_AVAILABLE twice, then with a leader."""
    answers = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        port = writer.get_extra_info("sockname")[1]
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                req = await reader.readexactly(size)
                api_key, version, cid = struct.unpack(">hhi", req[:8])
                if api_key == 18:
                    writer.write(_api_versions(cid))
                    continue
                code = 5 if len(answers) < 2 else 0
                answers.append(code)
                md = MetadataResponse(
                    brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=port)],
                    topics=[MetadataResponse.MetadataResponseTopic(
                        error_code=code, name="t",
                        partitions=[] if code else [MetadataResponse.MetadataResponsePartition(
                            partition_index=0, leader_id=1, replica_nodes=[1], isr_nodes=[1])])])
                writer.write(encode_response(md, version, cid))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            from kcodec.testing.net import free_port
            # the first bootstrap address is dead: the second one is used
            cluster = Cluster(ClientConfig(bootstrap_servers=f"127.0.0.1:{free_port()},127.0.0.1:{port}",
                                           retry_backoff_ms=50, api_timeout_ms=5000))
            t0 = time.monotonic()
            info = await cluster.topic("t")
            assert info.partitions == {0: 1} and answers == [5, 5, 0]
            assert time.monotonic() - t0 >= 0.1     # two backoffs
            await cluster.close()

    asyncio.run(main())


def test_a_finished_connect_is_seen_by_the_next_caller_at_once() -> None:
    """When a connect ends, the connection is the node's for every later caller before the
    first caller's coroutine resumes. It was registered only when that coroutine resumed, a
    few loop steps later; a caller in between opened a second connection to the same node,
    and an idempotent producer's batches of one partition went out on both, out of order."""
    from kcodec.broker import Cluster as BrokerCluster

    async def main(bootstrap: str) -> None:
        cluster = Cluster(ClientConfig(bootstrap_servers=bootstrap, api_timeout_ms=5000))
        first = asyncio.get_running_loop().create_task(cluster.connection(-1))
        await asyncio.sleep(0)                 # the first caller starts the connect
        connecting = cluster._connecting[-1]
        seen: list = []
        second: list = []

        def right_after(task: asyncio.Task) -> None:
            # runs after the cluster's own callback, before the first caller resumes
            seen.append(cluster._conns.get(-1))
            second.append(asyncio.get_running_loop().create_task(cluster.connection(-1)))

        connecting.add_done_callback(right_after)
        conn = await first
        assert seen == [conn]
        assert await second[0] is conn
        assert len(cluster._made) == 1
        await cluster.close()

    with BrokerCluster(1) as broker:
        asyncio.run(main(broker.bootstrap))
