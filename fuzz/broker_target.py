"""The ``broker`` fuzz target: hostile bytes to kcodec's own broker over a real socket.

One broker (started on the first input, in this process, restarted every ``RESTART_EVERY``
inputs to drop what the inputs built up) with a PLAINTEXT listener, where the connection is
``User:ANONYMOUS`` with ACLs that allow most things and deny some, and a SASL_PLAINTEXT
listener (PLAIN and SCRAM-SHA-256), where the input must log in first. An input is::

    options u8       bit 0: the SASL listener; bit 1: re-frame (below); bits 2-3: how the
                     bytes go out (at once, the first 16 one by one, 7-byte or 64-byte
                     pieces; an expanded request's pieces cover its first
                     ``PIECED_BYTES``, the rest goes at once); bit 4: hang up at once
                     after sending, without reading;
                     bit 5: expand (below)
    payload          sent as it is, or (re-frame) read as [u16 length][frame] pieces, each
                     sent with a right int32 size in front (so mutations reach the body)
    expand           the payload starts with [u8 kind][u16 n]: a big request made from them
                     goes first: kind 0 an ApiVersions of n * 8 unknown tagged fields, 1 a
                     DescribeGroups of n * 16 empty group ids, 2 a Produce of a zstd batch
                     that expands to 8 MiB (a compression bomb), 3 a Metadata of n * 16
                     topics (counts past the broker's item bound are sent as they are, to be
                     refused at the count; counts within it at most SERVED_ITEMS, whose
                     handling stays within the deadline under coverage instrumentation);
                     then the rest of the payload as above

The bytes are sent, the write side is shut, and what comes back is read until the broker
closes the connection. A ``Finding`` is raised when

* the broker logs an error or a traceback (a handler or the network layer failed);
* it does not close the connection within ``DEADLINE_S`` (a hang);
* an answer is not for a request sent (correlation ids out of order), or the broker's own
  decoder refuses it at that request's API and version (a malformed answer);
* after the connection is gone, the request budget, the count of waiting requests or the
  open connections do not come back to zero (something kept), or open descriptors pile up;
* a new connection is not answered (ApiVersions) at once afterwards (the broker is stuck).

Waits a request may ask for (Fetch's max_wait_ms, a group's session and rebalance timeouts)
are clamped by a broker hook to a few hundred milliseconds, so an execution ends in bounded
time: what is fuzzed is the handling of the requests, not the waiting. This target is not
differential: the compiled or pure twins serve the whole process (``KCODEC_NO_EXTENSIONS``).
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import threading
import time
from typing import Any

# imported here, not when the broker starts: under atheris the modules imported while the
# harness is imported are the ones instrumented for coverage
from kcodec.broker import Cluster
from kcodec.broker.apis import VERSIONS
from kcodec.broker.authorizer import allow, deny
from kcodec.broker.security import (
    ListenerSecurity,
    PlainServer,
    ScramServer,
    make_scram_credential,
)
from kcodec.errors import KcodecError
from kcodec.protocol import (
    ApiVersionsRequest,
    decode_response,
    encode_request,
)

__all__ = ["target_broker", "broker_seeds", "shutdown", "DEADLINE_S", "RESTART_EVERY"]

DEADLINE_S = 8.0            # the broker must have closed the connection by then
SETTLE_S = 8.0              # ... and let go of everything it held by then (a request of
                            # 100,000 elements may still be handled after its client left)
# On a machine so loaded that a nice-19 broker gets a sliver of a core, both can be raised
# (KCODEC_FUZZ_BROKER_WAIT_S; with libFuzzer's -timeout above it): a campaign that does so
# records the value with its counts.
if os.environ.get("KCODEC_FUZZ_BROKER_WAIT_S"):
    DEADLINE_S = SETTLE_S = float(os.environ["KCODEC_FUZZ_BROKER_WAIT_S"])
RESTART_EVERY = 400
PIECED_BYTES = 4096         # an expanded request is sent in pieces this far, then at once:
                            # 7-byte pieces of a 500 KiB request were most of the harness's
                            # time (70,000 sendall calls), where the broker's reassembly of
                            # a frame is the same after its first pieces
USERS = {"alice": "alice-secret", "admin": "admin-secret"}
TOPICS = {"t0": 2, "t1": 1, "secret": 1}


def _finding(msg: str) -> AssertionError:
    from fuzz.targets import Finding  # the harness's class (imported here: no cycle)

    return Finding(msg)


class _Errors(logging.Handler):
    """Keeps what the broker logs at ERROR or with a traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[str] = []
        self._lock2 = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR or record.exc_info:
            text = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                text += f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
            with self._lock2:
                self.seen.append(text)

    def take(self) -> list[str]:
        with self._lock2:
            out, self.seen = self.seen, []
        return out


def _clamp(req: Any) -> None:
    """A broker hook: shorten the waits a request asks for (the input still says them)."""
    b = req.body
    if req.api_key == 1:
        b.max_wait_ms = min(b.max_wait_ms, 50)
    elif req.api_key == 11:
        b.session_timeout_ms = min(b.session_timeout_ms, 300)
        if req.api_version >= 1:
            b.rebalance_timeout_ms = min(b.rebalance_timeout_ms, 300)
    elif req.api_key == 68 and b.rebalance_timeout_ms > 300:
        b.rebalance_timeout_ms = 300
    return None


class _Broker:
    def __init__(self) -> None:
        creds = {u: make_scram_credential("SCRAM-SHA-256", p) for u, p in USERS.items()}
        sec = ListenerSecurity(sasl={"PLAIN": lambda: PlainServer(USERS),
                                     "SCRAM-SHA-256": lambda: ScramServer("SCRAM-SHA-256", creds)})
        self.cluster = Cluster(
            1, listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            listener_security={"SASL_PLAINTEXT": sec}, authorizer=True,
            super_users=["User:admin"], max_request_bytes=1 << 20, queued_max_bytes=4 << 20,
            failed_authentication_delay_ms=0, request_read_timeout_s=2.0, idle_timeout_s=30,
            num_partitions=1, processors=1, handlers=2)
        self.cluster.start()
        anyone = "User:ANONYMOUS"
        self.cluster.authorizer.add(
            allow(anyone, "all", "topic", "t", prefixed=True),
            allow(anyone, "all", "group", "*"),
            allow(anyone, "all", "transactional_id", "*"),
            allow(anyone, "all", "cluster"),
            deny(anyone, "all", "topic", "secret"),
            allow("User:alice", "all", "topic", "t0"),
            allow("User:alice", "read", "group", "g", prefixed=True))
        self.errors = _Errors()
        logging.getLogger("kcodec.broker").addHandler(self.errors)
        self.cluster.hook(None, _clamp)
        self.plain = self.cluster.bootstrap_for("PLAINTEXT")
        self.sasl = self.cluster.bootstrap_for("SASL_PLAINTEXT")
        self.runs = 0
        self.fds: int | None = None

    def reset_topics(self) -> None:
        state = self.cluster.state
        for name, parts in TOPICS.items():
            if name not in state.topics:
                self.cluster.create_topic(name, parts)

    def stop(self) -> None:
        logging.getLogger("kcodec.broker").removeHandler(self.errors)
        self.cluster.stop()


_broker: _Broker | None = None
_lock = threading.Lock()


def _the_broker() -> _Broker:
    global _broker
    if _broker is not None and (_broker.runs >= RESTART_EVERY
                                or len(_broker.cluster.state.topics) > 60):
        _broker.stop()
        _broker = None
    if _broker is None:
        _broker = _Broker()
    _broker.reset_topics()
    return _broker


def shutdown() -> None:
    """Stop the target's broker (the next input starts a new one)."""
    global _broker
    with _lock:
        if _broker is not None:
            _broker.stop()
            _broker = None


def _split(payload: bytes, reframe: bool) -> bytes:
    if not reframe:
        return payload
    out = bytearray()
    pos = 0
    while pos + 2 <= len(payload):
        n = int.from_bytes(payload[pos:pos + 2], "big")
        piece = payload[pos + 2:pos + 2 + n]
        out += struct.pack(">i", len(piece)) + piece
        pos += 2 + n
    return bytes(out)


def _frames(data: bytes) -> tuple[list[bytes], int]:
    """Whole size-prefixed frames of ``data`` and the bytes left after them."""
    out = []
    pos = 0
    while pos + 4 <= len(data):
        size = int.from_bytes(data[pos:pos + 4], "big", signed=True)
        if size < 0 or pos + 4 + size > len(data):
            break
        out.append(data[pos + 4:pos + 4 + size])
        pos += 4 + size
    return out, len(data) - pos


def _uvar(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _flexible_frame(api_key: int, version: int, body: bytes) -> bytes:
    head = struct.pack(">hhih", api_key, version, 9000, 4) + b"fuzz" + _uvar(0)
    return struct.pack(">i", len(head) + len(body)) + head + body


_BOMB: bytes | None = None


def _bomb() -> bytes:
    """A zstd record batch of one record whose value is 8 MiB of zeros (made once)."""
    global _BOMB
    if _BOMB is None:
        from kcodec.records import RecordBatchBuilder

        b = RecordBatchBuilder(compression=4)      # zstd
        b.append(None, bytes(8 << 20), [], 1_700_000_000_000)
        _BOMB = b.build()
    return _BOMB


SERVED_ITEMS = 1_000        # each element of an array goes through the same handling code, so
                            # 1,000 reach what 10,000 do; at 10,000 the DescribeGroups and
                            # Metadata the fuzzer grew were most of a campaign's time (27
                            # executions a second a lane). What a big request the bound allows
                            # costs the others is the flood tests' question, with a canary


def _items(n: int) -> int:
    from kcodec.broker.apis import MAX_REQUEST_ITEMS

    return n if n > MAX_REQUEST_ITEMS else min(n, SERVED_ITEMS)


def _empty_tags(first: int, count: int) -> bytes:
    """``count`` empty tagged fields numbered from ``first`` (uvarint tag, size 0), built
    with numpy: a loop of ``_uvar`` calls under atheris's instrumentation took over 10 s
    for the 524,280 tags an expand header may ask for (the unit timed out in the harness)."""
    import numpy as np

    v = np.arange(first, first + count, dtype=np.uint32)
    assert first + count < 1 << 21          # three uvarint bytes at most
    two, three = v >= 0x80, v >= 0x4000
    zero = np.zeros(count, dtype=np.uint32)
    cols = np.stack([(v & 0x7F) | (two * 0x80), ((v >> 7) & 0x7F) | (three * 0x80),
                     v >> 14, zero], axis=1).astype(np.uint8)
    keep = np.stack([np.ones(count, dtype=bool), two, three, np.ones(count, dtype=bool)],
                    axis=1)
    return cols[keep].tobytes()


def _expand(payload: bytes) -> tuple[bytes, bytes]:
    """(the big request the expand header asks for, the rest of the payload)."""
    if len(payload) < 3:
        return b"", payload
    kind, n, rest = payload[0] & 3, int.from_bytes(payload[1:3], "big"), payload[3:]
    if kind == 0:
        tags = n * 8
        body = _uvar(5) + b"fuzz" + _uvar(2) + b"1" + _uvar(tags) + _empty_tags(64, tags)
        return _flexible_frame(18, 3, body), rest
    if kind == 1:
        ids = _items(n * 16)
        return _flexible_frame(15, 5, _uvar(ids + 1) + _uvar(1) * ids + b"\0" + _uvar(0)), rest
    if kind == 2:
        batch = _bomb()
        body = (_uvar(0) + struct.pack(">hi", -1, 5000) + _uvar(2)       # no txn id, acks, timeout
                + _uvar(3) + b"t0" + _uvar(2) + struct.pack(">i", n % 2)  # topic t0, partition
                + _uvar(len(batch) + 1) + batch + _uvar(0) + _uvar(0) + _uvar(0))
        return _flexible_frame(0, 9, body), rest
    topics = _items(n * 16)
    body = (_uvar(topics + 1) + (bytes(16) + _uvar(3) + b"t0" + _uvar(0)) * topics
            + b"\0" + b"\0" + _uvar(0))
    return _flexible_frame(3, 12, body), rest


def _send(sock: socket.socket, wire: bytes, mode: int, big: int = 0) -> None:
    """Send ``wire`` as ``mode`` says; the first ``big`` bytes (an expanded request) are
    sent in pieces over their first ``PIECED_BYTES`` only."""
    if mode == 0:
        sock.sendall(wire)
        return
    if mode == 1:
        for i in range(min(16, len(wire))):
            sock.sendall(wire[i:i + 1])
        sock.sendall(wire[16:])
        return
    step = 7 if mode == 2 else 64
    view = memoryview(wire)
    if big > PIECED_BYTES:
        _send(sock, wire[:PIECED_BYTES], mode)
        sock.sendall(view[PIECED_BYTES:big])
        view = view[big:]
    for i in range(0, len(view), step):
        sock.sendall(view[i:i + step])


def _read_all(sock: socket.socket, deadline: float) -> bytes:
    buf = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _finding(f"the broker neither answered nor closed within {DEADLINE_S} s "
                           f"({len(buf)} bytes read)")
        sock.settimeout(left)
        try:
            chunk = sock.recv(1 << 16)
        except TimeoutError:
            continue
        except OSError:        # reset: the broker hung up hard
            return bytes(buf)
        if not chunk:
            return bytes(buf)
        buf += chunk


def _check_answers(sent: bytes, got: bytes) -> None:
    """Answers in request order, for requests sent, each decodable at its request's
    version (ApiVersions at a version the broker does not know: a v0 answer)."""
    requests = []
    for f in _frames(sent)[0]:
        if len(f) >= 8:
            requests.append(struct.unpack(">hhi", f[:8]))
    answers, rest = _frames(got)
    if rest:
        raise _finding(f"the broker's last answer is cut: {rest} bytes after "
                       f"{len(answers)} whole frames")
    i = 0
    for a in answers:
        if len(a) < 4:
            raise _finding(f"an answer of {len(a)} bytes: no correlation id")
        cid = int.from_bytes(a[:4], "big", signed=True)
        while i < len(requests) and requests[i][2] != cid:
            i += 1
        if i == len(requests):
            raise _finding(f"an answer with correlation id {cid}, which no request (left) has; "
                           f"sent {[r[2] for r in requests]}")
        key, version, _ = requests[i]
        i += 1
        lo, hi = VERSIONS.get(key, (0, -1))
        if key == 18 and not lo <= version <= hi:
            version = 0
        try:
            decode_response(a, key, version, cid)
        except KcodecError as exc:
            raise _finding(f"the broker's answer to API {key} v{version} does not decode: "
                           f"{exc}") from exc


def _settled(b: _Broker) -> str | None:
    """None once the broker holds nothing for gone connections; else what it holds."""
    node = b.cluster.nodes[0]
    deadline = time.monotonic() + SETTLE_S
    while True:
        ch = node.channel
        state = (node.connections, ch.queued_bytes, ch.pending,
                 node.quotas.total if node.quotas else 0)
        if state == (0, 0, 0, 0):
            return None
        if time.monotonic() > deadline:
            return (f"{state[0]} connections, {state[1]} booked bytes, {state[2]} waiting "
                    f"requests, {state[3]} counted connections")
        time.sleep(0.001)


def _probe(address: str) -> None:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=3) as s:
            s.sendall(encode_request(ApiVersionsRequest(), 0, 77, "probe"))
            head = b""
            while len(head) < 4:
                chunk = s.recv(4 - len(head))
                if not chunk:
                    raise OSError("closed")
                head += chunk
            body = b""
            n = int.from_bytes(head, "big")
            while len(body) < n:
                chunk = s.recv(n - len(body))
                if not chunk:
                    raise OSError("closed")
                body += chunk
            decode_response(body, 18, 0, 77)
    except OSError as exc:
        raise _finding(f"a new connection was not answered after the input: {exc}") from exc


def _fd_count() -> int | None:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


def target_broker(data: bytes) -> None:
    """Send the input to the broker (see the module's docstring); raise Finding on a
    failure the broker logged, a hang, a bad answer, something kept or a stuck broker."""
    with _lock:
        b = _the_broker()
        b.runs += 1
        o = data[0] if data else 0
        big, payload = _expand(data[1:]) if o & 0x20 else (b"", data[1:])
        wire = big + _split(payload, bool(o & 2))
        address = b.sasl if o & 1 else b.plain
        host, port = address.rsplit(":", 1)
        b.errors.take()
        sock = socket.create_connection((host, int(port)), timeout=5)
        got = b""
        try:
            try:
                _send(sock, wire, (o >> 2) & 3, len(big))
                if not o & 0x10:
                    sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass     # the broker hung up while we sent: a refusal, checked below
            if not o & 0x10:
                got = _read_all(sock, time.monotonic() + DEADLINE_S)
        finally:
            sock.close()
        if got:
            _check_answers(wire, got)
        held = _settled(b)
        errors = b.errors.take()
        if errors:
            raise _finding("the broker logged a failure: " + " | ".join(errors[:3]))
        if held is not None:
            raise _finding(f"after the connection went the broker still holds {held}")
        _probe(b.plain)
        n = _fd_count()
        if n is not None:
            if b.fds is None:
                b.fds = n
            elif n > b.fds + 16:
                raise _finding(f"{n - b.fds} more descriptors open than after the first input")


# ---------------------------------------------------------------------------- seeds
def _piece(frame: bytes) -> bytes:
    """One request frame (its int32 size dropped) as a re-frame piece."""
    body = frame[4:]
    return len(body).to_bytes(2, "big") + body


def broker_seeds() -> list[bytes]:
    """Requests of most APIs the broker serves, on both listeners, re-framed or raw."""
    from kcodec.protocol import messages_index as mi
    from kcodec.records import RecordBatchBuilder

    R = mi.CLASSES
    b = RecordBatchBuilder()
    for i in range(3):
        b.append(b"k%d" % i, b"v%d" % i, [("h", b"x")], 1_700_000_000_000 + i)
    recs = b.build()
    P, F, M = R["ProduceRequest"], R["FetchRequest"], R["MetadataRequest"]
    J, OC = R["JoinGroupRequest"], R["OffsetCommitRequest"]
    C, D = R["CreateTopicsRequest"], R["DescribeAclsRequest"]
    CA = R["CreateAclsRequest"]
    calls: list[tuple[Any, int]] = [
        (R["ApiVersionsRequest"](client_software_name="fuzz", client_software_version="1"), 3),
        (M(topics=None), 1),
        (M(topics=[M.MetadataRequestTopic(name="t0"), M.MetadataRequestTopic(name="secret")],
           allow_auto_topic_creation=True, include_topic_authorized_operations=True), 9),
        (P(acks=-1, timeout_ms=1000, topic_data=[P.TopicProduceData(name="t0", partition_data=[
            P.PartitionProduceData(index=0, records=recs)])]), 9),
        (P(acks=0, timeout_ms=1000, topic_data=[P.TopicProduceData(name="secret", partition_data=[
            P.PartitionProduceData(index=0, records=recs)])]), 3),
        (F(replica_id=-1, max_wait_ms=10, min_bytes=1, max_bytes=1 << 16, session_id=0,
           session_epoch=0, topics=[F.FetchTopic(topic="t0", partitions=[
               F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 16)])]), 11),
        (R["ListOffsetsRequest"](replica_id=-1, topics=[
            R["ListOffsetsRequest"].ListOffsetsTopic(name="t1", partitions=[
                R["ListOffsetsRequest"].ListOffsetsPartition(partition_index=0, timestamp=-2)])]), 5),
        (R["FindCoordinatorRequest"](key="g0", key_type=0), 2),
        (J(group_id="g0", session_timeout_ms=6000, rebalance_timeout_ms=300, member_id="",
           protocol_type="consumer", protocols=[J.JoinGroupRequestProtocol(
               name="range", metadata=b"\x00\x01\x00\x00\x00\x01\x00\x02t0\xff\xff\xff\xff")]), 5),
        (OC(group_id="g0", generation_id_or_member_epoch=-1, member_id="", topics=[
            OC.OffsetCommitRequestTopic(name="t0", partitions=[
                OC.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]), 7),
        (R["OffsetFetchRequest"](group_id="g0", topics=None), 7),
        (R["DescribeGroupsRequest"](groups=["g0"], include_authorized_operations=True), 5),
        (R["ListGroupsRequest"](), 3),
        (C(topics=[C.CreatableTopic(name="t-new", num_partitions=1, replication_factor=1)],
           timeout_ms=1000), 5),
        (R["InitProducerIdRequest"](transactional_id=None, transaction_timeout_ms=60000), 4),
        (R["InitProducerIdRequest"](transactional_id="tx0", transaction_timeout_ms=60000), 4),
        (D(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
           principal_filter=None, host_filter=None, operation=1, permission_type=1), 2),
        (CA(creations=[CA.AclCreation(resource_type=2, resource_name="t9",
                                      resource_pattern_type=3, principal="User:x", host="*",
                                      operation=3, permission_type=3)]), 2),
        (R["DescribeConfigsRequest"](resources=[R["DescribeConfigsRequest"].DescribeConfigsResource(
            resource_type=2, resource_name="t0")]), 1),
        (R["DescribeClusterRequest"](include_cluster_authorized_operations=True), 0),
    ]
    frames = [encode_request(msg, v, cid + 1, "fuzz") for cid, (msg, v) in enumerate(calls)]
    sasl = [encode_request(R["SaslHandshakeRequest"](mechanism="PLAIN"), 1, 100, "fuzz"),
            encode_request(R["SaslAuthenticateRequest"](auth_bytes=b"\0alice\0alice-secret"),
                           2, 101, "fuzz"),
            encode_request(R["SaslHandshakeRequest"](mechanism="SCRAM-SHA-256"), 1, 102, "fuzz"),
            encode_request(R["SaslAuthenticateRequest"](auth_bytes=b"n,,n=alice,r=abc"),
                           2, 103, "fuzz")]
    out = []
    for i in range(0, len(frames), 3):
        group = frames[i:i + 3]
        out.append(bytes([0x02]) + b"".join(_piece(f) for f in group))      # re-framed
        out.append(bytes([0x00 | ((i % 4) << 2)]) + b"".join(group))         # raw
    out.append(bytes([0x03]) + b"".join(_piece(f) for f in sasl[:2] + frames[1:4]))
    out.append(bytes([0x01]) + sasl[0] + sasl[1] + frames[5])
    out.append(bytes([0x03]) + b"".join(_piece(f) for f in sasl[2:]))
    out.append(bytes([0x01]) + frames[1])                          # before logging in: refused
    out.append(bytes([0x01]) + struct.pack(">i", 600_000) + b"\x00" * 32)   # over the pre-auth cap
    out.append(bytes([0x00]) + struct.pack(">i", 1 << 20) + b"\x00\x03")   # a body that stops
    out.append(bytes([0x12]) + _piece(frames[3]))                  # send and hang up
    # expanded: huge tagged sections before and after login, huge arrays, a bomb
    for o, kind, n in ((0x21, 0, 16_000), (0x20, 0, 200), (0x20, 1, 62_500), (0x20, 1, 100),
                       (0x22, 2, 0), (0x20, 3, 7_000), (0x21, 1, 1_000)):
        out.append(bytes([o, kind]) + n.to_bytes(2, "big") + _piece(frames[0]))
    return out
