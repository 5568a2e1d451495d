"""A throw-away public key infrastructure for the SSL tests of librdkafka's suite.

``make(directory)`` writes, with the ``cryptography`` package:

- a root CA (PEM and DER) and a second, unrelated CA; ``all-cas.pem`` holds both, a
  bundle of several CAs of which one is the broker's;
- an intermediate CA signed by the root, which signs the broker's certificate (SAN
  ``127.0.0.1`` and ``localhost``); the broker serves its certificate and the intermediate
  (``broker-chain.pem``) and checks client certificates against the root;
- a client key and certificate signed by the root in every form librdkafka's tests load:
  PEM (the key encrypted with :data:`PASSWORD`), DER (the key unencrypted, as DER keys are
  read without a password), and a PKCS#12 file with the key, the certificate and the root
  CA under the same password.

``Certs.env()`` names them as librdkafka's tests expect them in the environment
(``SSL_pkcs``, ``SSL_pub_pem`` ...: the names its test clusters export), and
``Certs.client_conf()`` is the ``ssl.*`` part of its ``test.conf``.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Certs", "make", "PASSWORD", "CLIENT_AUTH"]

PASSWORD = "kcodec-conformance"
#: the broker requires client certificates, as librdkafka's SSL test clusters do
CLIENT_AUTH = "required"
_PEM = serialization.Encoding.PEM
_DER = serialization.Encoding.DER


@dataclass(frozen=True)
class Certs:
    """Where :func:`make` put each file."""

    directory: Path
    client_auth: str = CLIENT_AUTH

    def path(self, name: str) -> Path:
        return self.directory / name

    @property
    def broker_certfile(self) -> Path:
        return self.path("broker-chain.pem")

    @property
    def broker_keyfile(self) -> Path:
        return self.path("broker-key.pem")

    @property
    def cafile(self) -> Path:
        return self.path("ca.pem")

    def env(self) -> dict[str, str]:
        """The ``SSL_*`` variables librdkafka's SSL tests read."""
        p = self.path
        return {"SSL_pkcs": str(p("client.p12")), "SSL_password": PASSWORD,
                "SSL_pub_pem": str(p("client-pub.pem")), "SSL_pub_der": str(p("client-pub.der")),
                "SSL_priv_pem": str(p("client-priv.pem")),
                "SSL_priv_der": str(p("client-priv.der")),
                "SSL_ca_pem": str(p("ca.pem")), "SSL_ca_der": str(p("ca.der")),
                "SSL_unused_ca_pem": str(p("unused-ca.pem")),
                "SSL_unused_ca_der": str(p("unused-ca.der")),
                "SSL_all_cas_pem": str(p("all-cas.pem")),
                "SSL_client_auth": self.client_auth}

    def client_conf(self) -> str:
        """``test.conf`` lines: trust the root CA, log in with the client certificate."""
        return (f"ssl.ca.location={self.cafile}\n"
                f"ssl.certificate.location={self.path('client-pub.pem')}\n"
                f"ssl.key.location={self.path('client-priv.pem')}\n"
                f"ssl.key.password={PASSWORD}\n")


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kcodec conformance"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _cert(subject: str, key: rsa.RSAPrivateKey, issuer: x509.Certificate | None,
          issuer_key: rsa.RSAPrivateKey, *, ca: bool, path_length: int | None = None,
          server: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder()
         .subject_name(_name(subject))
         .issuer_name(issuer.subject if issuer is not None else _name(subject))
         .public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=path_length), critical=True)
         .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                        critical=False))
    if issuer is not None:
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
            issuer_key.public_key()), critical=False)
    if ca:
        b = b.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        b = b.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if server:
        b = b.add_extension(x509.SubjectAlternativeName([
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def make(directory: Path, client_cn: str = "librdkafka") -> Certs:
    """Generate the whole set in ``directory`` (created if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    out = Certs(directory)
    root_key, other_key, inter_key, broker_key, client_key = (_key() for _ in range(5))
    root = _cert("kcodec root CA", root_key, None, root_key, ca=True)
    other = _cert("kcodec unused CA", other_key, None, other_key, ca=True)
    inter = _cert("kcodec intermediate CA", inter_key, root, root_key, ca=True, path_length=0)
    broker = _cert("localhost", broker_key, inter, inter_key, ca=False, server=True)
    client = _cert(client_cn, client_key, root, root_key, ca=False)

    for name, cert in (("ca", root), ("unused-ca", other), ("intermediate-ca", inter),
                       ("client-pub", client)):
        _write(out.path(f"{name}.pem"), cert.public_bytes(_PEM))
        _write(out.path(f"{name}.der"), cert.public_bytes(_DER))
    _write(out.path("all-cas.pem"), root.public_bytes(_PEM) + other.public_bytes(_PEM))
    _write(out.broker_certfile, broker.public_bytes(_PEM) + inter.public_bytes(_PEM))
    _write(out.broker_keyfile, broker_key.private_bytes(
        _PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    _write(out.path("client-priv.pem"), client_key.private_bytes(
        _PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(PASSWORD.encode())))
    _write(out.path("client-priv.der"), client_key.private_bytes(
        _DER, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))
    _write(out.path("client.p12"), pkcs12.serialize_key_and_certificates(
        client_cn.encode(), client_key, client, [root],
        serialization.BestAvailableEncryption(PASSWORD.encode())))
    return out
