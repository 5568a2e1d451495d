"""Spark's ``kafka.*`` security options, as Java's Kafka client reads them, turned into
kcodec's client settings (``kcodec.client.net.security``).

    kafka.security.protocol                 PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    kafka.sasl.mechanism                    PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 | OAUTHBEARER
    kafka.sasl.jaas.config                  <LoginModule> required key="value" ... ;
        PlainLoginModule / ScramLoginModule: username, password
        OAuthBearerLoginModule: no options needed (the token comes from the file below)
    kafka.sasl.oauthbearer.token.endpoint.url   file:///path/to/token (read again on
                                            every refresh, as Java reads a file: URL)
    kafka.ssl.truststore.location           PEM file of the CAs to trust (truststore.type PEM)
    kafka.ssl.truststore.certificates       the same as PEM text
    kafka.ssl.keystore.location             PEM file with the client's key and certificate
    kafka.ssl.keystore.certificate.chain    / kafka.ssl.keystore.key: the same as PEM text
    kafka.ssl.key.password                  the private key's password
    kafka.ssl.endpoint.identification.algorithm   https (default) or empty: no host check

JKS and PKCS12 stores cannot be read by Python's ssl module: they are refused with the
command that converts them to PEM. PEM given as text is written to private files on the
machine that opens the connection (a Spark worker may not see the driver's files).
Secrets are never put in error messages.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from typing import Any

__all__ = ["SECURITY_NAMES", "security_config", "materialize"]

SECURITY_NAMES = {
    "security.protocol", "sasl.mechanism", "sasl.jaas.config",
    "sasl.oauthbearer.token.endpoint.url", "sasl.login.refresh.window.factor",
    "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.certificates",
    "ssl.truststore.password", "ssl.keystore.location", "ssl.keystore.type",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.password",
    "ssl.key.password", "ssl.endpoint.identification.algorithm",
}

_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256",
                                                                "SCRAM-SHA-512"),
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": ("OAUTHBEARER",),
}
_JAAS = re.compile(r'^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)'
                   r'(?P<opts>(?:\s+[\w.]+\s*=\s*(?:"(?:[^"\\]|\\.)*"|[^\s";]+))*)\s*;\s*$',
                   re.DOTALL)
_JAAS_OPT = re.compile(r'([\w.]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')
_CONVERT = ("convert it to PEM, e.g. keytool -importkeystore -srckeystore STORE "
            "-destkeystore store.p12 -deststoretype PKCS12, then openssl pkcs12 -in store.p12 "
            "-out store.pem -nodes")


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """``(login module, options)`` of one JAAS entry; the text is never echoed (it holds
    the password)."""
    m = _JAAS.match(text)
    if not m:
        raise ValueError('kafka.sasl.jaas.config is not a JAAS entry of the form '
                         '<LoginModule class> required key="value" ... ; (value not shown)')
    opts = {}
    for k, quoted, bare in _JAAS_OPT.findall(m.group("opts")):
        opts[k] = re.sub(r"\\(.)", r"\1", quoted) if quoted or not bare else bare
    return m.group("module"), opts


class TokenFile:
    """An OAUTHBEARER token provider reading the token from a file each time it is asked
    (picklable, so it travels to Spark's workers with the reader)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self) -> str:
        try:
            with open(self.path, encoding="utf-8") as f:
                token = f.readline().strip()
        except OSError as exc:
            raise ValueError(f"cannot read the OAUTHBEARER token file {self.path}: "
                             f"{exc.strerror}") from None
        if not token:
            raise ValueError(f"the OAUTHBEARER token file {self.path} is empty")
        return token

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TokenFile) and other.path == self.path

    def __repr__(self) -> str:
        return f"TokenFile({self.path!r})"


def security_config(settings: dict[str, str]) -> dict[str, Any]:
    """kcodec client keyword arguments from the security settings (``kafka.`` already
    cut off the names). Raises ``ValueError`` naming the setting that is wrong."""
    out: dict[str, Any] = {}
    s = {k: v for k, v in settings.items() if k in SECURITY_NAMES}
    if not s:
        return out
    proto = s.get("security.protocol", "PLAINTEXT").strip().upper()
    if proto not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ValueError("kafka.security.protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or "
                         f"SASL_SSL, got {s['security.protocol']!r}")
    out["security_protocol"] = proto
    sasl = proto.startswith("SASL")
    tls = proto.endswith("SSL")
    given_sasl = sorted(k for k in s if k.startswith("sasl."))
    given_ssl = sorted(k for k in s if k.startswith("ssl.") and k != "ssl.endpoint."
                       "identification.algorithm")
    if given_sasl and not sasl:
        raise ValueError(f"kafka.{given_sasl[0]} is set but kafka.security.protocol is {proto}:"
                         " use SASL_PLAINTEXT or SASL_SSL")
    if given_ssl and not tls:
        raise ValueError(f"kafka.{given_ssl[0]} is set but kafka.security.protocol is {proto}:"
                         " use SSL or SASL_SSL")
    if sasl:
        out.update(_sasl(s))
    if tls:
        out.update(_ssl(s))
    return out


def _sasl(s: dict[str, str]) -> dict[str, Any]:
    mech = s.get("sasl.mechanism", "GSSAPI").strip().upper()   # Java's default
    if mech not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"):
        raise ValueError(f"kafka.sasl.mechanism {mech} is not supported by kcodec (PLAIN, "
                         "SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER)"
                         + ("; Java's default GSSAPI (Kerberos) needs a JVM client"
                            if mech == "GSSAPI" else ""))
    out: dict[str, Any] = {"sasl_mechanism": mech}
    jaas = s.get("sasl.jaas.config")
    if jaas is None:
        raise ValueError(f"kafka.sasl.jaas.config is required for SASL {mech} (e.g. "
                         'org.apache.kafka.common.security.plain.PlainLoginModule required '
                         'username="USER" password="PASSWORD";)')
    module, opts = parse_jaas(jaas)
    if module not in _MODULES:
        raise ValueError(f"kafka.sasl.jaas.config: login module {module} is not supported "
                         f"(one of {', '.join(sorted(_MODULES))})")
    if mech not in _MODULES[module]:
        raise ValueError(f"kafka.sasl.jaas.config uses {module.rsplit('.', 1)[-1]}, which "
                         f"does not do kafka.sasl.mechanism {mech}")
    if mech == "OAUTHBEARER":
        url = s.get("sasl.oauthbearer.token.endpoint.url", "").strip()
        if not url.startswith("file:"):
            raise ValueError("SASL OAUTHBEARER needs kafka.sasl.oauthbearer.token.endpoint.url"
                             " set to a file: URL of the token (kcodec reads tokens from a "
                             "file, read again on each refresh)")
        from urllib.parse import unquote, urlparse

        out["sasl_oauth_token_provider"] = TokenFile(unquote(urlparse(url).path))
    else:
        user, password = opts.get("username"), opts.get("password")
        if not user or password is None:
            raise ValueError(f"kafka.sasl.jaas.config for {mech} needs username and password"
                             " options")
        out.update(sasl_username=user, sasl_password=password)
    if "sasl.login.refresh.window.factor" in s:
        try:
            out["sasl_login_refresh_window_factor"] = float(
                s["sasl.login.refresh.window.factor"])
        except ValueError:
            raise ValueError("kafka.sasl.login.refresh.window.factor must be a number") from None
    return out


def _ssl(s: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for which in ("truststore", "keystore"):
        typ = s.get(f"ssl.{which}.type", "").strip().upper()
        loc = s.get(f"ssl.{which}.location")
        if typ in ("JKS", "PKCS12") or (loc and not typ and
                                        loc.lower().endswith((".jks", ".p12", ".pfx"))):
            raise ValueError(f"kafka.ssl.{which}: {typ or 'JKS/PKCS12'} stores cannot be read "
                             f"by kcodec: {_CONVERT}, and set kafka.ssl.{which}.type=PEM")
        if typ not in ("", "PEM"):
            raise ValueError(f"kafka.ssl.{which}.type must be PEM, got {typ!r}")
    if "ssl.truststore.password" in s:
        raise ValueError("kafka.ssl.truststore.password is for JKS/PKCS12 truststores; a PEM "
                         "truststore has none")
    if "ssl.keystore.password" in s:
        raise ValueError("kafka.ssl.keystore.password is for JKS/PKCS12 keystores; give the "
                         "PEM key's password as kafka.ssl.key.password")
    if "ssl.truststore.location" in s and "ssl.truststore.certificates" in s:
        raise ValueError("give either kafka.ssl.truststore.location or "
                         "kafka.ssl.truststore.certificates, not both")
    if "ssl.truststore.location" in s:
        out["ssl_cafile"] = s["ssl.truststore.location"]
    elif "ssl.truststore.certificates" in s:
        out["ssl_cafile_pem"] = s["ssl.truststore.certificates"]
    if "ssl.keystore.location" in s:
        if "ssl.keystore.key" in s or "ssl.keystore.certificate.chain" in s:
            raise ValueError("give either kafka.ssl.keystore.location or the PEM text options "
                             "kafka.ssl.keystore.key and kafka.ssl.keystore.certificate.chain")
        out["ssl_certfile"] = s["ssl.keystore.location"]
    elif "ssl.keystore.key" in s or "ssl.keystore.certificate.chain" in s:
        if "ssl.keystore.key" not in s or "ssl.keystore.certificate.chain" not in s:
            raise ValueError("kafka.ssl.keystore.key and kafka.ssl.keystore.certificate.chain "
                             "go together")
        out["ssl_certfile_pem"] = (s["ssl.keystore.certificate.chain"].strip() + "\n"
                                   + s["ssl.keystore.key"].strip() + "\n")
    if "ssl.key.password" in s:
        out["ssl_password"] = s["ssl.key.password"]
    alg = s.get("ssl.endpoint.identification.algorithm")
    if alg is not None:
        alg = alg.strip().lower()
        if alg not in ("", "https"):
            raise ValueError("kafka.ssl.endpoint.identification.algorithm must be https or "
                             f"empty, got {alg!r}")
        out["ssl_endpoint_identification_algorithm"] = alg
    return out


def materialize(kw: dict[str, Any]) -> dict[str, Any]:
    """The client keyword arguments with PEM text options written to private files on
    this machine (once per content), as the client wants file names."""
    if "ssl_cafile_pem" not in kw and "ssl_certfile_pem" not in kw:
        return kw
    kw = dict(kw)
    for key, target in (("ssl_cafile_pem", "ssl_cafile"), ("ssl_certfile_pem", "ssl_certfile")):
        text = kw.pop(key, None)
        if text is not None:
            kw[target] = _pem_file(text)
    return kw


def _pem_file(text: str) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()[:24]
    uid = getattr(os, "getuid", lambda: 0)()
    d = os.path.join(tempfile.gettempdir(), f"kcodec-spark-pem-{uid}")
    os.makedirs(d, mode=0o700, exist_ok=True)
    path = os.path.join(d, f"{digest}.pem")
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text if text.endswith("\n") else text + "\n")
        os.replace(tmp, path)
    return path
