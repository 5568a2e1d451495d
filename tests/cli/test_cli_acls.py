"""``kcodec acls`` against ``kcodec broker --authorizer`` (kafka-acls.sh's options)."""

from __future__ import annotations

import json

import pytest

from tests.cli.harness import CliBroker, run


@pytest.fixture(scope="module")
def abroker():
    # a PLAINTEXT listener: every client is User:ANONYMOUS, made a super user here
    b = CliBroker("--authorizer", "--super-users", "User:ANONYMOUS")
    yield b
    b.stop()


def acls(b: CliBroker, *argv: str) -> tuple[int, str, str]:
    rc, out, err, _ = run("acls", *argv, "-b", b.bootstrap, "--timeout", "10")
    return rc, out, err


def rows(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def test_add_list_remove(abroker) -> None:
    rc, out, err = acls(abroker, "add", "--allow-principal", "User:alice", "--operation", "read",
                        "--operation", "describe", "--topic", "orders", "--group", "reports")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["PRINCIPAL", "HOST", "PERMISSION", "OPERATION", "RESOURCE",
                                "TYPE", "PATTERN", "RESOURCE", "RESULT"]
    assert len(lines) == 1 + 4 and all(line.endswith("ok") for line in lines[1:])
    assert "User:alice  *     allow       read       topic" in out

    rc, out, err = acls(abroker, "add", "--deny-principal", "User:bob", "--deny-host",
                        "10.0.0.1", "--producer", "--topic", "orders-",
                        "--resource-pattern-type", "prefixed", "--json")
    assert rc == 0, err
    added = rows(out)
    assert {(r["operation"], r["resource_type"], r["pattern_type"]) for r in added} == {
        ("write", "topic", "prefixed"), ("describe", "topic", "prefixed"),
        ("create", "topic", "prefixed"), ("idempotent-write", "cluster", "literal")}
    assert all(r["permission"] == "deny" and r["host"] == "10.0.0.1" and r["error"] is None
               for r in added)

    rc, out, err = acls(abroker, "list", "--json")
    assert rc == 0, err
    assert len(rows(out)) == 8

    # match: everything that applies to topic orders-eu (bob's prefixed denials), not alice's
    rc, out, err = acls(abroker, "list", "--topic", "orders-eu", "--resource-pattern-type",
                        "match", "--json")
    assert rc == 0, err
    assert {(r["principal"], r["operation"]) for r in rows(out)} == {
        ("User:bob", "write"), ("User:bob", "describe"), ("User:bob", "create")}

    rc, out, err = acls(abroker, "list", "--principal", "User:alice")
    assert rc == 0 and len(out.splitlines()) == 1 + 4, out

    rc, out, err = acls(abroker, "remove", "--allow-principal", "User:alice", "--topic", "orders")
    assert rc == 0, err
    assert "removed 2 ACLs" in err
    rc, out, err = acls(abroker, "list", "--principal", "User:alice", "--json")
    assert {(r["resource_type"], r["operation"]) for r in rows(out)} == {
        ("group", "read"), ("group", "describe")}

    rc, out, err = acls(abroker, "remove", "--principal", "User:bob", "--json")
    assert rc == 0 and len(rows(out)) == 4
    rc, out, err = acls(abroker, "remove", "--principal", "User:alice", "--json")
    assert rc == 0 and len(rows(out)) == 2
    rc, out, err = acls(abroker, "list", "--json")
    assert (rc, out) == (0, "")


@pytest.mark.parametrize(("argv", "message"), [
    (("add", "--topic", "t"), "add needs --allow-principal or --deny-principal"),
    (("add", "--allow-principal", "User:a"), "add needs a resource"),
    (("add", "--allow-principal", "alice", "--topic", "t"),
     "principal 'alice' is not Type:name"),
    (("add", "--allow-principal", "User:a", "--topic", "t", "--operation", "fly"),
     "--operation: 'fly' is not a AclOperation"),
    (("add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"),
     "--resource-pattern-type match is not for add"),
    (("add", "--allow-principal", "User:a", "--consumer", "--topic", "t"),
     "--consumer needs --group"),
    (("remove",), "remove needs a resource or a principal"),
    (("add", "--allow-host", "h", "--topic", "t"), "--allow-host needs --allow-principal"),
])
def test_usage_errors(abroker, argv: tuple[str, ...], message: str) -> None:
    rc, _, err = acls(abroker, *argv)
    assert rc == 2 and message in err, err


def test_a_broker_without_authorizer_says_so(kbroker) -> None:
    rc, out, err, _ = run("acls", "list", "-b", kbroker.bootstrap, "--timeout", "10")
    assert rc == 1 and "SECURITY_DISABLED" in err, err
