"""SCRAM must not tell which user names exist: an unknown name is answered with a salt and
iteration count a stranger cannot tell from a real user's (derived from a broker secret, not
from the name alone), the same each time; the exchange then fails at the proof, like a wrong
password. Malformed SCRAM messages fail the authentication (never another exception)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import stat

import pytest

from kcodec.broker.security import (
    SaslAuthenticationFailed,
    ScramServer,
    broker_secret,
    fake_scram_credential,
    make_scram_credential,
)

MECHS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]
HASH = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def server_first(server: ScramServer, user: str) -> dict[str, str]:
    out = server.step(f"n,,n={user},r=clientnonce".encode()).decode()
    return dict(part.split("=", 1) for part in out.split(","))


def client_final(mech: str, user: str, password: str, first: bytes) -> bytes:
    """A client's final message for the server's first (RFC 5802, written out here)."""
    h = HASH[mech]
    text = first.decode()
    attrs = dict(part.split("=", 1) for part in text.split(","))
    salted = hashlib.pbkdf2_hmac(h, password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", h).digest()
    stored = hashlib.new(h, client_key).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth = f"n={user},r=clientnonce,{text},{without_proof}".encode()
    proof = bytes(a ^ b for a, b in zip(client_key, hmac.new(stored, auth, h).digest(), strict=False))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


@pytest.mark.parametrize("mech", MECHS)
def test_the_salt_of_an_unknown_name_is_not_computable_from_the_name(mech):
    creds = {"alice": make_scram_credential(mech, "pw")}
    first = server_first(ScramServer(mech, creds), "mallory")
    salt = base64.b64decode(first["s"])
    assert salt != hashlib.sha256(b"mallory").digest()
    assert salt != hashlib.sha512(b"mallory").digest()[:len(salt)]


@pytest.mark.parametrize("mech", MECHS)
def test_real_and_unknown_names_look_alike(mech):
    secret = os.urandom(32)
    creds = {u: make_scram_credential(mech, "pw", iterations=8192) for u in ("alice", "bob")}
    real = server_first(ScramServer(mech, creds, secret=secret), "alice")
    fake = server_first(ScramServer(mech, creds, secret=secret), "mallory")
    assert fake["i"] == real["i"] == "8192"                  # the iterations of real ones
    assert len(base64.b64decode(fake["s"])) == len(base64.b64decode(real["s"]))
    # stable for the same secret (a second look gives nothing away), different for another
    again = server_first(ScramServer(mech, creds, secret=secret), "mallory")
    other = server_first(ScramServer(mech, creds, secret=os.urandom(32)), "mallory")
    assert again["s"] == fake["s"] and other["s"] != fake["s"]
    # and per mechanism
    other_mech = [m for m in MECHS if m != mech][0]
    assert server_first(ScramServer(other_mech, {}, secret=secret), "mallory")["s"] != fake["s"]


@pytest.mark.parametrize("mech", MECHS)
def test_an_unknown_name_never_logs_in(mech):
    """The client computes a proof from the fake salt with some password: refused at the
    final step, with the same message as a wrong password for a real user."""
    secret = os.urandom(32)
    messages = []
    for user in ("alice", "mallory"):
        server = ScramServer(mech, {"alice": make_scram_credential(mech, "right")},
                             secret=secret)
        first = server.step(f"n,,n={user},r=clientnonce".encode())
        with pytest.raises(SaslAuthenticationFailed) as ei:
            server.step(client_final(mech, user, "guess", first))
        messages.append(str(ei.value))
    assert messages[0] == messages[1]
    # (the helper is right: the real password logs alice in)
    server = ScramServer(mech, {"alice": make_scram_credential(mech, "right")})
    first = server.step(b"n,,n=alice,r=clientnonce")
    assert server.step(client_final(mech, "alice", "right", first)).startswith(b"v=")
    assert server.principal == "alice"


def test_fake_credentials_cannot_be_used_even_with_the_right_keys():
    """Whatever the proof, a fake credential never authenticates."""
    secret = os.urandom(32)
    fake = fake_scram_credential("SCRAM-SHA-256", "mallory", secret)
    server = ScramServer("SCRAM-SHA-256", {}, secret=secret)
    first = server_first(server, "mallory")
    assert base64.b64decode(first["s"]) == fake.salt
    nonce = first["r"]
    with pytest.raises(SaslAuthenticationFailed):
        server.step(f"c=biws,r={nonce},p={base64.b64encode(b'x' * 32).decode()}".encode())


@pytest.mark.parametrize("message", [
    b"n,,garbage",                 # an attribute without '='
    b"n,,n=alice,r=x,=",
    b"\xff\xfe",
])
def test_malformed_client_first_fails_the_authentication(message):
    with pytest.raises(SaslAuthenticationFailed):
        ScramServer("SCRAM-SHA-256", {}).step(message)


@pytest.mark.parametrize("final", [
    b"p=AAAA,c=biws,r=NONCE",      # proof first: valid attributes, wrong order
    b"c=biws,r=NONCE,p=%%%",
    b"c=biws,,r=NONCE",
    b"\xff",
])
def test_malformed_client_final_fails_the_authentication(final):
    server = ScramServer("SCRAM-SHA-256", {"alice": make_scram_credential("SCRAM-SHA-256", "x")})
    nonce = server_first(server, "alice")["r"]
    with pytest.raises(SaslAuthenticationFailed):
        server.step(final.replace(b"NONCE", nonce.encode()))


def test_broker_secret_is_kept_in_the_data_dir(tmp_path):
    a = broker_secret(tmp_path)
    b = broker_secret(tmp_path)
    assert a == b and len(a) == 32
    path = tmp_path / "broker.secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert broker_secret(None) != broker_secret(None)
    path.write_bytes(b"short")
    with pytest.raises(ValueError, match="damaged"):
        broker_secret(tmp_path)


def _cli_first(args: list[str], user: str) -> str:
    from kcodec.cli import build_parser
    from kcodec.cli._security import broker_security

    sec = broker_security(build_parser().parse_args(["broker", *args]))
    return server_first(sec.sasl["SCRAM-SHA-256"](), user)["s"]


def test_command_line_salts_of_real_and_unknown_names_change_together(tmp_path):
    """``--data-dir``: both kept across restarts; memory: both new at each start. (A fake
    salt that stayed while real ones changed, or the reverse, would tell names apart.)"""
    users = tmp_path / "users"
    users.write_text("alice:alice-secret\n")
    data = tmp_path / "data"
    disk = ["--sasl-users", str(users), "--data-dir", str(data)]
    assert _cli_first(disk, "alice") == _cli_first(disk, "alice")
    assert _cli_first(disk, "mallory") == _cli_first(disk, "mallory")
    memory = ["--sasl-users", str(users)]
    assert _cli_first(memory, "alice") != _cli_first(memory, "alice")
    assert _cli_first(memory, "mallory") != _cli_first(memory, "mallory")
