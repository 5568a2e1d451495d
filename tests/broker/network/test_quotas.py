"""Connection limits as Kafka has them: max_connections (the node, every listener together),
max_connections_per_ip and its overrides by address or host name. A connection past a limit
is closed at once and the refusal is logged; closing a connection makes room again."""

from __future__ import annotations

import socket
import time

import pytest

from kcodec.broker import Cluster
from kcodec.broker.network.quotas import LOG_EVERY_S, ConnectionQuotas, parse_overrides
from kcodec.protocol import ApiVersionsRequest
from tests.support.broker_raw import Raw


def connect(address: str, source: str | None = None) -> Raw:
    host, port = address.rsplit(":", 1)
    raw = Raw.__new__(Raw)
    raw.sock = socket.create_connection((host, int(port)), timeout=5,
                                        source_address=(source, 0) if source else None)
    raw.cid = 0
    return raw


def served(raw: Raw) -> bool:
    try:
        return raw.call(ApiVersionsRequest(), 0).error_code == 0
    except OSError:
        return False


def wait_for(cond, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def test_per_ip_limit_refuses_the_next_connection_and_logs_it(caplog):
    with Cluster(1, max_connections_per_ip=2) as c:
        with caplog.at_level("INFO", logger="kcodec.broker"):
            a, b = connect(c.bootstrap), connect(c.bootstrap)
            assert served(a) and served(b)
            third = connect(c.bootstrap)
            assert third.closed(timeout=2)          # closed at once, nothing answered
            third.close()
        refused = [r for r in caplog.records if "refused a connection" in r.getMessage()]
        assert len(refused) == 1 and refused[0].levelname == "WARNING"
        assert "127.0.0.1" in refused[0].getMessage() and "limit is 2" in refused[0].getMessage()
        a.close()
        assert wait_for(lambda: c.nodes[0].quotas.by_host.get("127.0.0.1") == 1)
        again = connect(c.bootstrap)
        assert served(again) and served(b)
        again.close()
        b.close()
        assert wait_for(lambda: c.nodes[0].quotas.total == 0)


def test_max_connections_counts_every_listener():
    with Cluster(1, listeners="PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                 listener_security_protocol_map="PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                 max_connections=3) as c:
        one, two = c.bootstrap_for("PLAINTEXT"), c.bootstrap_for("INTERNAL")
        conns = [connect(one), connect(two), connect(one)]
        assert all(served(x) for x in conns)
        extra = connect(two)
        assert extra.closed(timeout=2)
        extra.close()
        conns.pop().close()
        assert wait_for(lambda: c.nodes[0].quotas.total == 2)
        late = connect(two)
        assert served(late)
        for x in conns + [late]:
            x.close()


def test_overrides_by_address_and_zero_for_everyone_else():
    # 127.0.0.2 is another loopback address on Linux: a second client host
    with Cluster(1, host="0.0.0.0", max_connections_per_ip=0,
                 max_connections_per_ip_overrides="127.0.0.1:2") as c:
        port = c.nodes[0].port
        mine = [connect(f"127.0.0.1:{port}") for _ in range(2)]
        assert all(served(x) for x in mine)
        assert connect(f"127.0.0.1:{port}").closed(timeout=2)
        try:
            other = connect(f"127.0.0.2:{port}", source="127.0.0.2")
        except OSError:
            pytest.skip("this machine cannot use 127.0.0.2 as a source address")
        assert other.closed(timeout=2)
        for x in mine:
            x.close()


def test_overrides_by_host_name():
    with Cluster(1, max_connections_per_ip=5,
                 max_connections_per_ip_overrides={"localhost": 1}) as c:
        first = connect(c.bootstrap)
        assert served(first)
        second = connect(c.bootstrap)
        assert second.closed(timeout=2)
        first.close()


def test_a_kcodec_client_past_the_limit_sees_a_closed_connection():
    from kcodec.client import Admin
    from kcodec.errors import KcodecError

    with Cluster(1, max_connections_per_ip=1) as c:
        holder = connect(c.bootstrap)
        assert served(holder)
        with pytest.raises(KcodecError):
            with Admin(bootstrap_servers=c.bootstrap, api_timeout_ms=1500,
                       request_timeout_ms=1000) as admin:
                admin.list_topics()
        holder.close()
        assert wait_for(lambda: c.nodes[0].quotas.total == 0)
        with Admin(bootstrap_servers=c.bootstrap, api_timeout_ms=5000) as admin:
            admin.list_topics()


def test_refusals_are_logged_at_most_once_per_interval_with_a_count():
    q = ConnectionQuotas(max_connections_per_ip=1)
    assert q.should_log("10.0.0.1", now=100.0) == 1
    assert q.should_log("10.0.0.1", now=101.0) is None
    assert q.should_log("10.0.0.1", now=102.0) is None
    assert q.should_log("10.0.0.2", now=102.0) == 1           # per host
    assert q.should_log("10.0.0.1", now=100.0 + LOG_EVERY_S) == 3


def test_admit_and_release_count_per_host():
    q = ConnectionQuotas(max_connections=3, max_connections_per_ip=2,
                         overrides={"10.0.0.9": 0})
    assert q.admit("10.0.0.1") is None and q.admit("10.0.0.1") is None
    assert "limit is 2" in (q.admit("10.0.0.1") or "")
    assert "limit is 0" in (q.admit("10.0.0.9") or "")
    assert q.admit("10.0.0.2") is None
    assert "max_connections=3" in (q.admit("10.0.0.3") or "")
    q.release("10.0.0.1")
    assert q.admit("10.0.0.3") is None
    assert q.total == 3 and q.by_host == {"10.0.0.1": 1, "10.0.0.2": 1, "10.0.0.3": 1}
    q.release("10.0.0.7")                 # never counted: nothing changes
    assert q.total == 3


@pytest.mark.parametrize("bad, match", [
    ("host", "not host:limit"),
    ("host:ten", "not a whole number"),
    ("host:-1", "negative"),
    (":5", "not host:limit"),
])
def test_bad_overrides_say_which_entry(bad, match):
    with pytest.raises(ValueError, match=match):
        parse_overrides(bad)


def test_overrides_parse_ipv6_and_spaces():
    assert parse_overrides(" ::1:5 , [fe80::1]:7,a.example:0") == {
        "::1": 5, "fe80::1": 7, "a.example": 0}


def test_bad_limits_are_refused_when_the_cluster_is_made():
    with pytest.raises(ValueError, match="admits nobody"):
        Cluster(1, max_connections_per_ip=0)
    with pytest.raises(ValueError, match="at least 1"):
        Cluster(1, max_connections=0)


@pytest.mark.parametrize("argv, message", [
    (["--super-users", "User:admin"], "need --authorizer"),
    (["--allow-everyone-if-no-acl-found"], "need --authorizer"),
    (["--max-connections-per-ip", "0"], "admits nobody"),
    (["--max-connections-per-ip-overrides", "host:lots"], "not a whole number"),
    (["--authorizer", "--super-users", "admin"], "Type:name"),
])
def test_broker_command_line_refuses_bad_limits_and_authorizer_options(argv, message, capsys):
    from kcodec.cli import main

    assert main(["broker", *argv]) == 2
    assert message in capsys.readouterr().err
