"""Admin and CLI answers that need a broker with a full group coordinator and request
recording: the kcodec broker (Tansu's DescribeGroups has no client ids, hosts or
assignments). These ran on the scriptable fake before."""

from __future__ import annotations

import json
import time

from kcodec.broker import Cluster
from kcodec.client import Admin, Consumer
from kcodec.client.admin import MemberDescription
from kcodec.protocol import JoinGroupRequest, SyncGroupRequest
from kcodec.protocol.consumer import ConsumerProtocolSubscription, encode_versioned
from tests.support.broker_raw import Raw


def test_describe_groups_decodes_members_and_assignments() -> None:
    with Cluster(1) as c:
        c.create_topic("t", 2)
        c.create_topic("u", 3)
        member = Consumer(bootstrap_servers=c.bootstrap, group_id="g1", client_id="app-a",
                          group_instance_id="static-1", partition_assignment_strategy="range",
                          auto_offset_reset="earliest", group_protocol="classic")
        members = [member]
        try:
            member.subscribe(["t", "u"])
            deadline = time.monotonic() + 20
            while len(member.assignment()) < 5 and time.monotonic() < deadline:
                member.poll(0.05)
            # a member whose assignment is not the consumer protocol's (shown empty)
            with Raw(c.bootstrap) as raw:
                sub = encode_versioned(ConsumerProtocolSubscription(topics=["t"]), 0)
                J, S = JoinGroupRequest, SyncGroupRequest
                join = raw.call(J(group_id="g2", session_timeout_ms=30000, member_id="",
                                  protocol_type="consumer",
                                  protocols=[J.JoinGroupRequestProtocol(name="range", metadata=sub)]), 0)
                assert join.error_code == 0
                sync = raw.call(S(group_id="g2", generation_id=join.generation_id,
                                  member_id=join.member_id, assignments=[S.SyncGroupRequestAssignment(
                                      member_id=join.member_id, assignment=b"\x00\x01garbage")]), 0)
                assert sync.error_code == 0
                with Admin(bootstrap_servers=c.bootstrap) as admin:
                    g1, g2, nope = admin.describe_groups(["g1", "g2", "nope"])
        finally:
            for m in members:
                m.close()
    assert (g1.group_id, g1.state, g1.protocol_type, g1.protocol) == ("g1", "Stable", "consumer", "range")
    [m] = g1.members
    assert (m.client_id, m.group_instance_id) == ("app-a", "static-1")
    assert m.host == "/127.0.0.1" and m.member_id.startswith("static-1-")  # as Kafka names it
    assert {t: sorted(p) for t, p in m.assignment.items()} == {"t": [0, 1], "u": [0, 1, 2]}
    assert g2.members == [MemberDescription(g2.members[0].member_id, "raw", g2.members[0].host, {})]
    assert (nope.group_id, nope.state, nope.members) == ("nope", "Dead", [])


def test_cli_client_id_and_bootstrap_reach_the_broker(capsys, monkeypatch) -> None:
    """--client-id is what the broker sees in every request header; the default is
    kcodec-cli; the address comes from $KCODEC_BOOTSTRAP when -b is not given."""
    from kcodec.cli import main

    with Cluster(2) as c:
        c.create_topic("t", 2, leaders=[0, 1])
        c.record()
        monkeypatch.setenv("KCODEC_BOOTSTRAP", c.bootstrap)
        assert main(["topics", "list", "--json", "--client-id", "my-tool"]) == 0
        assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == \
            [{"topic": "t", "partitions": 2}]
        assert {r.header.client_id for r in c.recorded()} == {"my-tool"}
        c.requests.clear()
        assert main(["metadata", "brokers", "-b", c.bootstrap.split(",")[1]]) == 0
        assert {r.header.client_id for r in c.recorded()} == {"kcodec-cli"}
        assert {r.node_id for r in c.recorded()} == {1}
