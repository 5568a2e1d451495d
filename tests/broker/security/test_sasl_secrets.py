"""What the broker's SASL mechanisms keep and tell: ``--sasl-users`` keeps no password in
memory (PLAIN is checked against a salted hash), SCRAM does the same work for real and
unknown names, and an OAUTHBEARER validator's reason is logged, never sent to the client."""

from __future__ import annotations

import gc
import sys
import types

import pytest

from kcodec.broker.security import (
    OAuthBearerServer,
    PlainServer,
    SaslAuthenticationFailed,
    SaslAuthenticator,
    ScramServer,
    make_scram_credential,
    plain_check,
)
from kcodec.broker.security import sasl as sasl_module

PASSWORD = "pw-only-alice-knows-41"


def _reachable(root: object, limit: int = 200_000) -> list[object]:
    """Every object reachable from ``root`` (closures, defaults, dicts, instances), short
    of modules and their globals (which hold this file's own constants)."""
    stop = {id(m.__dict__) for m in list(sys.modules.values()) if m is not None}
    seen: dict[int, object] = {}
    todo = [root]
    while todo and len(seen) < limit:
        obj = todo.pop()
        if (id(obj) in seen or id(obj) in stop or isinstance(obj, (type, types.ModuleType))
                or isinstance(obj, types.CodeType)):
            continue
        seen[id(obj)] = obj
        todo.extend(gc.get_referents(obj))
    return list(seen.values())


def _broker_security(tmp_path, mechanisms: str):
    from kcodec.cli import build_parser
    from kcodec.cli._security import broker_security

    users = tmp_path / "users"
    users.write_text(f"alice:{PASSWORD}\n")
    return broker_security(build_parser().parse_args(
        ["broker", "--sasl-users", str(users), "--sasl-mechanisms", mechanisms]))


@pytest.mark.parametrize("mechanisms", ["PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", "PLAIN",
                                        "PLAIN,SCRAM-SHA-256"])
def test_sasl_users_keep_no_password(tmp_path, mechanisms):
    sec = _broker_security(tmp_path, mechanisms)
    servers = [factory() for factory in sec.sasl.values()]
    found = [o for o in _reachable((sec, servers))
             if isinstance(o, (str, bytes)) and PASSWORD in (o if isinstance(o, str)
                                                             else o.decode("latin-1"))]
    assert found == []
    plain = sec.sasl["PLAIN"]
    assert plain().step(f"\0alice\0{PASSWORD}".encode()) == b""
    for user, password in (("alice", "wrong"), ("mallory", PASSWORD)):
        with pytest.raises(SaslAuthenticationFailed):
            plain().step(f"\0{user}\0{password}".encode())


def test_plain_check_against_salted_credentials():
    check = plain_check({"alice": make_scram_credential("SCRAM-SHA-256", PASSWORD)},
                        "SCRAM-SHA-256")
    assert check("alice", PASSWORD)
    assert not check("alice", PASSWORD + "x")
    assert not check("bob", PASSWORD)
    assert PlainServer(check).step(f"\0alice\0{PASSWORD}".encode()) == b""


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_does_the_same_work_for_real_and_unknown_names(mech, monkeypatch):
    creds = {"alice": make_scram_credential(mech, PASSWORD)}
    calls: list[str] = []
    derive = sasl_module._derive

    def counting(secret: bytes, label: str, mechanism: str, user: str, length: int) -> bytes:
        calls.append(label)
        return derive(secret, label, mechanism, user, length)
    monkeypatch.setattr(sasl_module, "_derive", counting)
    work = {}
    for user in ("alice", "mallory"):
        calls.clear()
        ScramServer(mech, creds).step(f"n,,n={user},r=clientnonce".encode())
        work[user] = sorted(calls)
    assert work["alice"] == work["mallory"] and work["alice"]


def _token_exchange(validator) -> tuple[dict, SaslAuthenticator]:
    auth = SaslAuthenticator({"OAUTHBEARER": lambda: OAuthBearerServer(validator)})
    assert auth.handshake({"mechanism": "OAUTHBEARER"})["error_code"] == 0
    first = auth.authenticate({"auth_bytes": b"n,,\x01auth=Bearer tok\x01\x01"})
    assert first["error_code"] == 0 and b"invalid_token" in first["auth_bytes"]
    return auth.authenticate({"auth_bytes": b"\x01"}), auth


def test_the_validator_reason_is_logged_not_sent():
    def validator(token: str, extensions: dict):
        raise ValueError("kid 7f3a unknown at https://idp.internal/jwks")
    last, auth = _token_exchange(validator)
    assert last["error_code"] == 58
    assert "idp.internal" not in last["error_message"] and "7f3a" not in last["error_message"]
    assert "the token is not valid" in last["error_message"]
    assert auth.failure is not None and "idp.internal" in auth.failure
