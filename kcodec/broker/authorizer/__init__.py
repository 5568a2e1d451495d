"""Authorization as Kafka's broker does it: ACLs on topics, groups, the cluster and
transactional ids (allow and deny, literal and prefixed names, principals and hosts), super
users, and the rule for resources nobody wrote an ACL for.

    from kcodec.broker import Cluster
    from kcodec.broker.authorizer import Authorizer, allow

    with Cluster(authorizer=Authorizer(super_users=["User:admin"]), ...) as c:
        c.authorizer.add(allow("User:alice", "READ", "TOPIC", "orders-", prefixed=True))

    standard.py   the ``Authorizer``: the decisions (Kafka's StandardAuthorizer's), the ACL table
    store.py      the ACLs in ``acls.json`` of the data dir, written before a change is answered
                  (so they survive a restart or a kill)

The ACL model itself (resource types, operations, :class:`~kcodec.protocol.acl.AclBinding`,
filters) lives in :mod:`kcodec.protocol.acl`, where clients find it too. Which operation on
which resource each API needs is decided by the API handlers (``kcodec.broker.apis``).
"""

from kcodec.broker.authorizer.standard import (
    SUPPORTED_OPERATIONS,
    Authorizer,
    all_operations,
    allow,
    deny,
)
from kcodec.broker.authorizer.store import ACL_FILE, AclStore

__all__ = ["Authorizer", "AclStore", "ACL_FILE", "SUPPORTED_OPERATIONS", "allow", "deny",
           "all_operations"]
