"""Admin answers the real broker leaves empty (Tansu's DescribeGroups has no client ids,
hosts or assignments), against the scriptable fake cluster."""

from __future__ import annotations

import asyncio

from kcodec.client import AsyncAdmin
from kcodec.client.admin import GroupDescription, MemberDescription
from kcodec.client.assignors import Assignment
from kcodec.protocol import DescribeGroupsResponse
from tests.fake_kafka import FakeKafka

D = DescribeGroupsResponse


def test_describe_groups_decodes_members_and_assignments() -> None:
    async def main() -> list[GroupDescription]:
        fake = await FakeKafka().start()
        fake.groups["g1"] = D.DescribedGroup(
            group_id="g1", group_state="Stable", protocol_type="consumer", protocol_data="range",
            members=[
                D.DescribedGroupMember(member_id="m-2", client_id="app-b", client_host="/10.0.0.2",
                                       member_assignment=Assignment({"u": [1, 0]}).encode()),
                D.DescribedGroupMember(member_id="m-1", client_id="app-a", client_host="/10.0.0.1",
                                       group_instance_id="static-1",
                                       member_assignment=Assignment({"t": [0, 1], "u": [2]}).encode()),
                D.DescribedGroupMember(member_id="m-3", client_id="app-c", client_host="/10.0.0.3",
                                       member_assignment=b"\x00\x01garbage")])
        try:
            async with AsyncAdmin(bootstrap_servers=fake.bootstrap) as admin:
                return await admin.describe_groups(["g1", "nope"])
        finally:
            await fake.stop()

    g1, nope = asyncio.run(main())
    assert g1 == GroupDescription("g1", "Stable", "consumer", "range", [
        MemberDescription("m-1", "app-a", "/10.0.0.1", {"t": [0, 1], "u": [2]}, "static-1"),
        MemberDescription("m-2", "app-b", "/10.0.0.2", {"u": [0, 1]}),
        MemberDescription("m-3", "app-c", "/10.0.0.3", {})])   # undecodable: shown empty
    assert (nope.group_id, nope.state, nope.members) == ("nope", "Dead", [])


def test_cli_client_id_and_bootstrap_reach_the_broker(capsys, monkeypatch) -> None:
    """--client-id is what the broker sees in every request header; the default is
    kcodec-cli; the address comes from $KCODEC_BOOTSTRAP when -b is not given."""
    import json

    from kcodec.cli import main
    from kcodec.client._sync import LoopThread

    lt = LoopThread("fake-broker")
    fake = lt.run(FakeKafka(topics={"t": {0: 0, 1: 1}}).start(), 5)
    try:
        monkeypatch.setenv("KCODEC_BOOTSTRAP", fake.bootstrap)
        assert main(["topics", "list", "--json", "--client-id", "my-tool"]) == 0
        assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == \
            [{"topic": "t", "partitions": 2}]
        assert {h.client_id for _n, _k, h, _b in fake.requests} == {"my-tool"}
        fake.requests.clear()
        assert main(["metadata", "brokers", "-b", fake.bootstrap.split(",")[1]]) == 0
        assert {h.client_id for _n, _k, h, _b in fake.requests} == {"kcodec-cli"}
    finally:
        lt.run(fake.stop(), 5)
        lt.loop.call_soon_threadsafe(lt.loop.stop)
