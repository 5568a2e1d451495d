"""Admin.remove_members: a member taken out of its group on its behalf (LeaveGroup for the
classic protocol, a heartbeat at epoch -1 for the consumer protocol), its partitions handed
to the others at once; an unknown member is an error of its own."""

from __future__ import annotations

import time

import pytest

from kcodec.broker import Cluster
from kcodec.client import Admin, Consumer, KafkaError


def joined(c: Consumer, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.05)
    assert c.assignment()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_member_is_removed_on_its_behalf(protocol) -> None:
    with Cluster(1) as c:
        c.create_topic("t", 2)
        a_member = Consumer(bootstrap_servers=c.bootstrap, group_id="g", group_protocol=protocol,
                            session_timeout_ms=45000)
        try:
            a_member.subscribe(["t"])
            joined(a_member)
            mid = a_member.group_metadata().member_id
            with Admin(bootstrap_servers=c.bootstrap) as a:
                assert [m.member_id for m in a.describe_groups(["g"])[0].members] == [mid]
                assert a.remove_members("g", {mid: protocol}) == {mid: None}
                assert a.describe_groups(["g"])[0].members == []
                got = a.remove_members("g", {"no-such-member": protocol})["no-such-member"]
                assert isinstance(got, KafkaError) and "UNKNOWN_MEMBER_ID" in str(got)
                with pytest.raises(ValueError, match="classic or consumer"):
                    a.remove_members("g", {mid: "share"})
        finally:
            a_member.close()
