"""TLS and SASL options of the client sub-commands (``kcodec.client.net.security``).

Secrets never go on the command line (other users see it in ``ps``): the SASL password
comes from ``$KCODEC_SASL_PASSWORD`` or ``--sasl-password-file``, the private key's from
``$KCODEC_SSL_PASSWORD``, an OAUTHBEARER token from ``--sasl-oauth-token-file`` (read again
whenever the client refreshes it). Every option also has a ``$KCODEC_...`` default.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

__all__ = ["add_security", "security_config"]


def add_security(parser: argparse.ArgumentParser) -> None:
    """The TLS and SASL options; described one by one under ``--help-all`` only (``--help``
    names them in one line), as every client command has them."""
    from kcodec.cli import _client
    from kcodec.client.net.sasl import MECHANISMS
    from kcodec.client.net.security import PROTOCOLS

    env = os.environ.get
    if _client.FULL_HELP:
        g = parser.add_argument_group("security (TLS and SASL)")
    else:
        g = parser.add_argument_group(
            "security (TLS and SASL)",
            "--security-protocol, --ssl-cafile, --ssl-certfile, --ssl-keyfile, "
            "--ssl-no-hostname-check, --sasl-mechanism, --sasl-username, --sasl-password-file, "
            "--sasl-oauth-token-file: each with a $KCODEC_... default; --help-all describes them")
        g.add_argument = _quiet(g.add_argument)  # type: ignore[method-assign]
    g.add_argument("--security-protocol", type=str.upper, choices=PROTOCOLS,
                   default=env("KCODEC_SECURITY_PROTOCOL", "PLAINTEXT").upper(),
                   help="PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL "
                        "($KCODEC_SECURITY_PROTOCOL)")
    g.add_argument("--ssl-cafile", metavar="PEM", default=env("KCODEC_SSL_CAFILE"),
                   help="CA certificates to trust (default: the system's)")
    g.add_argument("--ssl-certfile", metavar="PEM", default=env("KCODEC_SSL_CERTFILE"),
                   help="client certificate (mutual TLS)")
    g.add_argument("--ssl-keyfile", metavar="PEM", default=env("KCODEC_SSL_KEYFILE"),
                   help="client private key; its password from $KCODEC_SSL_PASSWORD")
    g.add_argument("--ssl-no-hostname-check", action="store_true",
                   help="accept a certificate that does not name the broker's host")
    g.add_argument("--sasl-mechanism", type=str.upper, choices=MECHANISMS,
                   default=env("KCODEC_SASL_MECHANISM", "PLAIN").upper(),
                   help="PLAIN (default), SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
    g.add_argument("--sasl-username", default=env("KCODEC_SASL_USERNAME"),
                   help="SASL user; the password from $KCODEC_SASL_PASSWORD or "
                        "--sasl-password-file")
    g.add_argument("--sasl-password-file", metavar="FILE",
                   help="read the SASL password from the first line of FILE")
    g.add_argument("--sasl-oauth-token-file", metavar="FILE",
                   default=env("KCODEC_SASL_OAUTH_TOKEN_FILE"),
                   help="OAUTHBEARER: the token (a JWT's exp is honoured), read again on refresh")


def _quiet(add: Any) -> Any:
    def add_without_help(*args: Any, **kwargs: Any) -> Any:
        kwargs["help"] = argparse.SUPPRESS
        return add(*args, **kwargs)
    return add_without_help


def _first_line(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().strip()
    except OSError as exc:
        raise ValueError(f"{what}: cannot read {path!r}: {exc.strerror or exc}") from None


def security_config(args: argparse.Namespace) -> dict[str, Any]:
    """Config entries for the client from the parsed options (nothing for PLAINTEXT)."""
    proto = getattr(args, "security_protocol", "PLAINTEXT")
    if proto == "PLAINTEXT":
        return {}
    cfg: dict[str, Any] = {"security_protocol": proto}
    if proto in ("SSL", "SASL_SSL"):
        cfg.update(ssl_cafile=args.ssl_cafile, ssl_certfile=args.ssl_certfile,
                   ssl_keyfile=args.ssl_keyfile, ssl_password=os.environ.get("KCODEC_SSL_PASSWORD"))
        if args.ssl_no_hostname_check:
            cfg["ssl_endpoint_identification_algorithm"] = ""
    if proto.startswith("SASL_"):
        mech = args.sasl_mechanism
        cfg["sasl_mechanism"] = mech
        if mech == "OAUTHBEARER":
            path = args.sasl_oauth_token_file
            if not path:
                raise ValueError("--sasl-mechanism OAUTHBEARER needs --sasl-oauth-token-file")
            _first_line(path, "--sasl-oauth-token-file")
            cfg["sasl_oauth_token_provider"] = lambda: _first_line(path, "--sasl-oauth-token-file")
        else:
            password = os.environ.get("KCODEC_SASL_PASSWORD")
            if args.sasl_password_file:
                password = _first_line(args.sasl_password_file, "--sasl-password-file")
            if not args.sasl_username or not password:
                raise ValueError(f"SASL {mech} needs --sasl-username and a password "
                                 "($KCODEC_SASL_PASSWORD or --sasl-password-file)")
            cfg.update(sasl_username=args.sasl_username, sasl_password=password)
    return cfg


# ------------------------------------------------------------------ `kcodec broker`
def add_broker_security(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("security (TLS and SASL listeners)")
    g.add_argument("--ssl-certfile", metavar="PEM", help="serve TLS with this certificate chain")
    g.add_argument("--ssl-keyfile", metavar="PEM", help="its private key ($KCODEC_SSL_PASSWORD)")
    g.add_argument("--ssl-client-auth", choices=("none", "requested", "required"),
                   default="none",
                   help="ask TLS clients for a certificate (Kafka's ssl.client.auth; default "
                        "none); its subject becomes the principal")
    g.add_argument("--ssl-cafile", metavar="PEM",
                   help="CA certificates client certificates are checked against")
    g.add_argument("--ssl-principal-mapping-rules", metavar="RULES", default="DEFAULT",
                   help="how a client certificate's RFC 2253 name becomes the principal "
                        "(Kafka's ssl.principal.mapping.rules, e.g. "
                        "'RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT')")
    g.add_argument("--sasl-users", metavar="FILE",
                   help="require SASL: 'user:password' lines; PLAIN and SCRAM-SHA-256/512 "
                        "(salted credentials made at start, PLAIN checked against a salted "
                        "SCRAM-SHA-512 hash; no password is kept)")
    g.add_argument("--sasl-mechanisms", default="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                   help="comma-separated mechanisms: PLAIN and SCRAM-SHA-* with "
                        "--sasl-users, OAUTHBEARER with --config "
                        "sasl.oauthbearer.jwks.endpoint.url=URL (OIDC)")
    g.add_argument("--connections-max-reauth-ms", type=int, default=0,
                   help="SASL session lifetime; clients re-authenticate (KIP-368; 0: none)")


def listener_securities(args: argparse.Namespace) -> dict[str, Any]:
    """For ``--listeners``: each listener's ``ListenerSecurity`` from the one set of TLS and
    SASL options, by the protocol of the listener (PLAINTEXT listeners get none)."""
    from kcodec.broker.listeners import listener_protocols
    from kcodec.broker.security import ListenerSecurity

    protos = listener_protocols(args.listeners, args.listener_security_protocol_map)
    both = broker_security(args)
    ctx = both.ssl_context if both is not None else None
    sasl = both.sasl if both is not None else {}
    reauth = args.connections_max_reauth_ms
    out: dict[str, Any] = {}
    for name, proto in protos.items():
        if proto == "PLAINTEXT":
            continue
        if "SSL" in proto and ctx is None:
            raise ValueError(f"listener {name} is {proto}: give --ssl-certfile/--ssl-keyfile")
        if proto.startswith("SASL") and not sasl:
            raise ValueError(f"listener {name} is {proto}: give --sasl-users (or "
                             "--sasl-mechanisms OAUTHBEARER and --config "
                             "sasl.oauthbearer.jwks.endpoint.url=URL)")
        out[name] = ListenerSecurity(ssl_context=ctx if "SSL" in proto else None,
                                     sasl=sasl if proto.startswith("SASL") else {},
                                     connections_max_reauth_ms=reauth,
                                     ssl_principal_mapping_rules=both.ssl_principal_mapping_rules
                                     if both is not None else "DEFAULT")
    return out


def broker_security(args: argparse.Namespace) -> Any:
    """A ``ListenerSecurity`` from the options, or None for PLAINTEXT."""
    from kcodec.broker.security import (
        ListenerSecurity,
        PlainServer,
        ScramServer,
        broker_secret,
        make_scram_credential,
        plain_check,
        scram_salt,
        server_context,
    )

    ctx = None
    if args.ssl_certfile:
        ctx = server_context(args.ssl_certfile, args.ssl_keyfile,
                             os.environ.get("KCODEC_SSL_PASSWORD"),
                             cafile=getattr(args, "ssl_cafile", None),
                             client_auth=getattr(args, "ssl_client_auth", "none"))
    elif args.ssl_keyfile:
        raise ValueError("--ssl-keyfile needs --ssl-certfile")
    sasl: dict[str, Any] = {}
    mechs = [m.strip().upper() for m in args.sasl_mechanisms.split(",") if m.strip()]
    for mech in mechs:
        if mech not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"):
            raise ValueError(f"--sasl-mechanisms: {mech!r} is not one of PLAIN, "
                             "SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER")
    if "OAUTHBEARER" in mechs:
        sasl["OAUTHBEARER"] = _oauthbearer(args)
        mechs.remove("OAUTHBEARER")
        if mechs and not args.sasl_users:
            raise ValueError(f"--sasl-mechanisms {','.join(mechs)} need --sasl-users")
    if args.sasl_users:
        users: dict[str, str] = {}
        try:
            with open(args.sasl_users, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    line = line.strip()
                    if not line or line.startswith("#"):
                        continue
                    user, sep, pw = line.partition(":")
                    if not sep or not user or not pw:
                        raise ValueError(f"--sasl-users {args.sasl_users}:{n}: expected "
                                         "user:password")
                    users[user] = pw
        except OSError as exc:
            raise ValueError(f"--sasl-users: cannot read {args.sasl_users!r}: "
                             f"{exc.strerror or exc}") from None
        # salts (real users' and unknown names' fake ones) from one secret, kept in the data
        # dir: restarts keep both or change both, so they never tell the names apart
        secret = broker_secret(getattr(args, "data_dir", None))
        # only salted credentials are kept, never a password: PLAIN checks a password
        # against the SCRAM-SHA-512 credential (made for it if SCRAM-SHA-512 is not enabled)
        creds = {mech: {u: make_scram_credential(mech, p, salt=scram_salt(secret, mech, u))
                        for u, p in users.items()}
                 for mech in {*(m for m in mechs if m != "PLAIN"),
                              *(["SCRAM-SHA-512"] if "PLAIN" in mechs else [])}}
        users.clear()
        for mech in mechs:
            if mech == "PLAIN":
                check = plain_check(creds["SCRAM-SHA-512"], "SCRAM-SHA-512", secret=secret)
                sasl[mech] = lambda check=check: PlainServer(check)
            else:
                sasl[mech] = lambda mech=mech, c=creds[mech]: ScramServer(mech, c,
                                                                          secret=secret)
    if ctx is None and not sasl:
        return None
    return ListenerSecurity(ssl_context=ctx, sasl=sasl,
                            connections_max_reauth_ms=args.connections_max_reauth_ms,
                            ssl_principal_mapping_rules=getattr(
                                args, "ssl_principal_mapping_rules", "DEFAULT"))


def _oauthbearer(args: argparse.Namespace) -> Any:
    """OAUTHBEARER's mechanism factory: tokens checked as Kafka's OIDC validation does,
    configured by the ``sasl.oauthbearer.*`` names among ``--config``."""
    from kcodec.broker.security import OAuthBearerServer
    from kcodec.broker.security.oidc import JWKS_URL, OIDC_CONFIGS, JwksValidator

    given = dict(item.partition("=")[::2] for item in getattr(args, "config", None) or [])
    config = {k.strip(): v for k, v in given.items() if k.strip() in OIDC_CONFIGS}
    if not config.get(JWKS_URL):
        raise ValueError(f"--sasl-mechanisms OAUTHBEARER needs --config {JWKS_URL}=URL (the "
                         "identity provider's JWKS, against which tokens are checked)")
    validator = JwksValidator(config)
    return lambda: OAuthBearerServer(validator)
