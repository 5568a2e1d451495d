"""``kcodec quotas describe|alter`` against kcodec's broker."""

from __future__ import annotations

import json

from kcodec.broker import Cluster
from kcodec.cli import main


def test_alter_and_describe(capsys):
    with Cluster() as c:
        def quotas(*argv: str) -> tuple[int, str]:
            rc = main(["quotas", *argv, "-b", c.bootstrap, "--timeout", "10"])
            return rc, capsys.readouterr().out

        assert quotas("alter", "--user", "alice", "--add-config",
                      "producer_byte_rate=1048576,request_percentage=50") == (
            0, "user=alice: altered (2 quota(s))\n")
        assert quotas("alter", "--user-defaults", "--add-config", "consumer_byte_rate=10")[0] == 0
        rc, out = quotas("describe", "--user", "alice", "--json")
        assert rc == 0 and json.loads(out) == {
            "entity": {"user": "alice"},
            "quotas": {"producer_byte_rate": 1048576.0, "request_percentage": 50.0}}
        rc, out = quotas("describe")
        assert "user=<default>  consumer_byte_rate" in out
        rc, out = quotas("alter", "--ip", "127.0.0.1", "--add-config", "producer_byte_rate=1")
        assert rc == 1 and "Invalid configuration key producer_byte_rate" in out
        assert quotas("alter", "--user", "alice", "--delete-config", "request_percentage")[0] == 0
        rc, out = quotas("describe", "--user", "alice", "--json")
        assert json.loads(out)["quotas"] == {"producer_byte_rate": 1048576.0}
