"""``kcodec users list|set|delete`` against kcodec's broker."""

from __future__ import annotations

import io
import json

import pytest

from kcodec.broker import Cluster
from kcodec.cli import main


@pytest.fixture(scope="module")
def kb():
    with Cluster() as c:
        yield c


def users(capsys, kb, *argv: str) -> tuple[int, str, str]:
    rc = main(["users", *argv, "-b", kb.bootstrap, "--timeout", "10"])
    out, err = capsys.readouterr()
    return rc, out, err


def test_set_list_delete(capsys, monkeypatch, kb):
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret\n"))
    rc, out, err = users(capsys, kb, "set", "alice", "--password-stdin")
    assert (rc, out) == (0, "alice: set (SCRAM-SHA-256, SCRAM-SHA-512)\n"), err
    rc, out, _ = users(capsys, kb, "set", "bob", "--password", "pw", "--mechanism",
                       "SCRAM-SHA-512", "--iterations", "8192")
    assert rc == 0
    rc, out, _ = users(capsys, kb, "list", "--json")
    got = {r["user"]: r["credentials"] for r in map(json.loads, out.splitlines())}
    assert got["bob"] == [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]
    assert len(got["alice"]) == 2
    assert users(capsys, kb, "delete", "alice", "--mechanism", "SCRAM-SHA-256")[0] == 0
    rc, out, _ = users(capsys, kb, "list", "alice")
    assert rc == 0 and "SCRAM-SHA-256" not in out and "SCRAM-SHA-512" in out


def test_refusals(capsys, kb):
    rc, out, _ = users(capsys, kb, "set", "carol", "--password", "pw", "--iterations", "10")
    assert rc == 1 and "UNACCEPTABLE_CREDENTIAL: Too few iterations" in out
    rc, out, _ = users(capsys, kb, "delete", "nobody")
    assert rc == 1 and "RESOURCE_NOT_FOUND" in out
    rc, _, err = users(capsys, kb, "set", "carol")
    assert rc == 2 and "--password" in err
