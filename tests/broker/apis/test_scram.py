"""DescribeUserScramCredentials / AlterUserScramCredentials (KIP-554) through Admin: Kafka's
errors, logins with a credential at once, deletions, and the credentials kept in the data
dir."""

from __future__ import annotations

import pytest

from kcodec.broker import Cluster
from kcodec.broker.security import ListenerSecurity, ScramServer, make_scram_credential
from kcodec.client import Admin, KafkaError
from kcodec.client.admin import ScramDeletion, ScramUpsertion
from kcodec.errors import KcodecError
from kcodec.protocol import AlterUserScramCredentialsRequest, ErrorCode
from tests.support.broker_raw import Raw

E = ErrorCode
M = "SCRAM-SHA-256"


def security() -> ListenerSecurity:
    creds = {"admin": make_scram_credential(M, "admin-pw")}
    return ListenerSecurity(sasl={M: lambda: ScramServer(M, creds)})


def admin_as(c: Cluster, user: str, password: str) -> Admin:
    return Admin(bootstrap_servers=c.bootstrap, security_protocol="SASL_PLAINTEXT",
                 sasl_mechanism=M, sasl_username=user, sasl_password=password,
                 api_timeout_ms=5000)


def logs_in(c: Cluster, user: str, password: str) -> bool:
    try:
        with admin_as(c, user, password) as a:
            a.list_topics()
        return True
    except KcodecError:      # SaslAuthenticationError
        return False


def test_users_are_added_used_described_and_deleted(tmp_path):
    with Cluster(data_dir=tmp_path, security=security()) as c:
        with admin_as(c, "admin", "admin-pw") as admin:
            assert admin.describe_user_scram_credentials() == {"admin": [(M, 4096)]}
            assert admin.alter_user_scram_credentials([
                ScramUpsertion("alice", M, "alice-pw", iterations=8192),
                ScramUpsertion("bob", "SCRAM-SHA-512", "bob-pw")]) == {"alice": None,
                                                                       "bob": None}
            assert logs_in(c, "alice", "alice-pw") and not logs_in(c, "alice", "wrong")
            got = admin.describe_user_scram_credentials(["alice", "bob"])
            assert got == {"alice": [(M, 8192)], "bob": [("SCRAM-SHA-512", 4096)]}
            assert admin.alter_user_scram_credentials([ScramDeletion("admin", M)]) == {
                "admin": None}
            assert not logs_in(c, "admin", "admin-pw")      # gone for the next login
    with Cluster(data_dir=tmp_path, security=security()) as c:    # kept; admin stays gone
        assert logs_in(c, "alice", "alice-pw") and not logs_in(c, "admin", "admin-pw")


def test_kafkas_errors():
    with Cluster(security=security()) as c, admin_as(c, "admin", "admin-pw") as admin:
        got = admin.alter_user_scram_credentials([
            ScramUpsertion("few", M, "pw", iterations=1000),
            ScramUpsertion("many", M, "pw", iterations=20000),
            ScramUpsertion("", M, "pw"),
            ScramDeletion("nobody", M),
            ScramUpsertion("twice", M, "pw"), ScramDeletion("twice", M)])
        codes = {u: (e.code, e.message) for u, e in got.items()}
        assert codes == {
            "few": (E.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            "many": (E.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
            "": (E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
            "nobody": (E.RESOURCE_NOT_FOUND,
                       "Attempt to delete a user credential that does not exist"),
            "twice": (E.DUPLICATE_RESOURCE,
                      "A user credential cannot be altered twice in the same request")}
        with pytest.raises(KafkaError) as err:
            admin.describe_user_scram_credentials(["nobody"])
        assert err.value.code == E.RESOURCE_NOT_FOUND
        with pytest.raises(KafkaError) as err:
            admin.describe_user_scram_credentials(["admin", "admin"])
        assert err.value.code == E.DUPLICATE_RESOURCE


def test_an_unknown_mechanism_and_authorization():
    A = AlterUserScramCredentialsRequest
    with Cluster() as c, Raw(c.bootstrap) as raw:
        r = raw.call(A(deletions=[A.ScramCredentialDeletion(name="x", mechanism=7)],
                       upsertions=[]), 0).results[0]
        assert (r.error_code, r.error_message) == (E.UNSUPPORTED_SASL_MECHANISM,
                                                   "Unknown SCRAM mechanism")
    with Cluster(authorizer=True) as c, Raw(c.bootstrap) as raw:     # ANONYMOUS: no ACL
        r = raw.call(A(deletions=[A.ScramCredentialDeletion(name="x", mechanism=1)],
                       upsertions=[]), 0).results[0]
        assert r.error_code == E.CLUSTER_AUTHORIZATION_FAILED
