"""A TLS client certificate's principal: RFC 2253 with escaping, as Kafka's default principal
builder, and Kafka's ssl.principal.mapping.rules; a certificate whose common name carries a
comma cannot pose as another subject (and so not as a super user)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from kcodec.broker import Cluster
from kcodec.broker.security import ListenerSecurity, peer_principal, server_context
from kcodec.broker.security.principal import NoMatchingRule, PrincipalMapper, distinguished_name
from kcodec.client import Admin
from kcodec.client.errors import BrokerNotAvailableError, KafkaError


def _cert(*rdns: tuple[tuple[str, str], ...]) -> dict:
    """getpeercert()'s dict for a subject given least specific RDN first, as X.509 does."""
    return {"subject": tuple(rdns)}


class _Ssl:
    def __init__(self, cert: dict) -> None:
        self.cert = cert

    def getpeercert(self) -> dict:
        return self.cert


def test_a_comma_in_the_common_name_is_escaped():
    evil = _cert((("organizationName", "Corp"),), (("commonName", "admin,O=Corp"),))
    real = _cert((("organizationName", "Corp"),), (("commonName", "admin"),))
    assert distinguished_name(real) == "CN=admin,O=Corp"
    assert distinguished_name(evil) == "CN=admin\\,O\\=Corp,O=Corp"
    assert peer_principal(_Ssl(evil)) != peer_principal(_Ssl(real))


def test_rfc2253_escapes_and_types():
    cert = _cert((("countryName", "DE"),), (("organizationalUnitName", " a+b "),),
                 (("commonName", 'x"<>;#\\'), ("userId", "u1")),
                 (("emailAddress", "a@b.c"),))
    assert distinguished_name(cert) == (
        "1.2.840.113549.1.9.1=#1605614062 2e63".replace(" ", "")
        + ',CN=x\\"\\<\\>\\;\\#\\\\+UID=u1,OU=\\ a\\+b\\ ,C=DE')
    assert distinguished_name(_cert((("commonName", "a\0b"),))) == "CN=a\\00b"
    assert peer_principal(None) == "ANONYMOUS"
    assert peer_principal(_Ssl({})) == "ANONYMOUS"


def test_mapping_rules_as_kafka():
    rules = PrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
                            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
                            "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT")
    assert rules.name("CN=kafka1,OU=ServiceUsers,O=Org") == "kafka1"
    assert rules.name("CN=Duke,OU=JavaSoft,O=Sun,L=Cupertino,ST=CA,C=US") == "duke@javasoft"
    assert rules.name("OU=x,cn=alice.b,O=y") == "ALICE.B"
    assert rules.name("O=nobody") == "O=nobody"
    # a group number the pattern does not have stays literal, as Java's replacement does
    assert PrincipalMapper("RULE:^CN=(.*)$/$1-$2/").name("CN=a") == "a-$2"
    assert PrincipalMapper(r"RULE:^CN=(.*)$/\$1\/x/").name("CN=a") == "$1/x"
    with pytest.raises(NoMatchingRule):
        PrincipalMapper("RULE:^CN=(.*)$/$1/").name("O=x")
    for bad in ("RULE:^CN=(.*)$/$1/Lx", "NOPE", "RULE:(/x/"):
        with pytest.raises(ValueError):
            PrincipalMapper(bad)
    with pytest.raises(ValueError):
        ListenerSecurity(ssl_principal_mapping_rules="NOPE")
    # the escaped comma keeps a forged common name from matching a rule meant for another
    rule = PrincipalMapper("RULE:^CN=([^,]*),O=Corp$/$1/,DEFAULT")
    assert rule.name("CN=admin,O=Corp") == "admin"
    assert rule.name(distinguished_name(_cert((("organizationName", "Corp"),),
                                              (("commonName", "admin,O=Corp"),)))) \
        == "CN=admin\\,O\\=Corp,O=Corp"


@pytest.fixture(scope="module")
def pki():
    """A CA, the broker's certificate and two client certificates: the super user's
    ``CN=admin,O=Corp`` and a forged one whose common name is ``admin,O=Corp``."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    d = tempfile.TemporaryDirectory(prefix="kcodec-principal-")
    root = Path(d.name)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    files = {"ca": str(root / "ca.pem")}
    Path(files["ca"]).write_bytes(ca.public_bytes(serialization.Encoding.PEM))

    def issue(name: str, subject: list, san: list | None = None) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        b = (x509.CertificateBuilder()
             .subject_name(x509.Name([x509.NameAttribute(o, v) for o, v in subject]))
             .issuer_name(ca_name).public_key(key.public_key())
             .serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(hours=1))
             .not_valid_after(now + datetime.timedelta(days=1)))
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        files[name] = str(root / f"{name}.pem")
        files[name + "-key"] = str(root / f"{name}.key")
        Path(files[name]).write_bytes(b.sign(ca_key, hashes.SHA256()).public_bytes(
            serialization.Encoding.PEM))
        Path(files[name + "-key"]).write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))

    issue("server", [(NameOID.COMMON_NAME, "localhost")], [x509.DNSName("localhost")])
    issue("admin", [(NameOID.ORGANIZATION_NAME, "Corp"), (NameOID.COMMON_NAME, "admin")])
    issue("forged", [(NameOID.COMMON_NAME, "admin,O=Corp")])
    yield files
    d.cleanup()


def _admin(broker: Cluster, pki: dict, who: str) -> Admin:
    return Admin(bootstrap_servers=broker.bootstrap, security_protocol="SSL",
                 ssl_cafile=pki["ca"], ssl_certfile=pki[who], ssl_keyfile=pki[who + "-key"],
                 api_timeout_ms=10000, request_timeout_ms=5000)


def test_a_forged_common_name_is_not_the_super_user(pki):
    ctx = server_context(pki["server"], pki["server-key"], cafile=pki["ca"],
                         client_auth="required")
    # without escaping, the forged certificate's subject was written as this one
    with Cluster(1, host="localhost", security=ListenerSecurity(ssl_context=ctx),
                 authorizer=True, super_users=["User:CN=admin,O=Corp"]) as broker:
        admin = _admin(broker, pki, "admin")
        try:
            assert admin.describe_acls() == []
        finally:
            admin.close()
        forged = _admin(broker, pki, "forged")
        try:
            with pytest.raises(KafkaError) as err:
                forged.describe_acls()
            assert "CLUSTER_AUTHORIZATION_FAILED" in str(err.value)
        finally:
            forged.close()


def test_mapping_rules_on_a_listener(pki, caplog):
    ctx = server_context(pki["server"], pki["server-key"], cafile=pki["ca"],
                         client_auth="required")
    sec = ListenerSecurity(ssl_context=ctx,
                           ssl_principal_mapping_rules="RULE:^CN=([^,]*),O=Corp$/$1/U")
    with Cluster(1, host="localhost", security=sec, authorizer=True,
                 super_users=["User:ADMIN"]) as broker:
        admin = _admin(broker, pki, "admin")
        try:
            assert admin.describe_acls() == []
        finally:
            admin.close()
        forged = _admin(broker, pki, "forged")      # no rule applies: refused
        try:
            with caplog.at_level("WARNING", "kcodec.broker.security"):
                with pytest.raises(BrokerNotAvailableError):
                    forged.describe_acls()
        finally:
            forged.close()
        assert any("no ssl.principal.mapping.rules rule applies" in r.getMessage()
                   for r in caplog.records)
