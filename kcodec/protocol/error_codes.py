"""Kafka's broker error codes as an enum: name, short description, retriable flag.

Broker errors are data, not exceptions: responses carry ``error_code`` ints; a client
decides what to raise. ``ErrorCode(3).retriable`` is True; ``ErrorCode.of(9999)`` gives
UNKNOWN_SERVER_ERROR for codes this table does not know (``ErrorCode(9999)`` raises).

    >>> ErrorCode(3).name, ErrorCode(3).retriable
    ('UNKNOWN_TOPIC_OR_PARTITION', True)
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

__all__ = ["ErrorCode"]

# code  NAME  retriable(R)/not(-)  invalid-metadata(M)/not(-)  description
_TABLE = """
-1 UNKNOWN_SERVER_ERROR - - The broker hit an unexpected error.
0 NONE - - Success.
1 OFFSET_OUT_OF_RANGE - - The requested offset is outside the log's range.
2 CORRUPT_MESSAGE R - A record failed its CRC or is otherwise malformed.
3 UNKNOWN_TOPIC_OR_PARTITION R M The broker does not host this topic or partition.
4 INVALID_FETCH_SIZE - - The requested fetch size is invalid.
5 LEADER_NOT_AVAILABLE R M The partition has no leader right now (election in progress).
6 NOT_LEADER_OR_FOLLOWER R M This broker is not the leader or a follower of the partition.
7 REQUEST_TIMED_OUT R - The request timed out on the broker.
8 BROKER_NOT_AVAILABLE - - The broker is not available.
9 REPLICA_NOT_AVAILABLE R M The replica is not available for the partition.
10 MESSAGE_TOO_LARGE - - The request holds a message larger than the broker allows.
11 STALE_CONTROLLER_EPOCH - - The controller epoch is out of date.
12 OFFSET_METADATA_TOO_LARGE - - The commit metadata string is too large.
13 NETWORK_EXCEPTION R M The server disconnected before a response was received.
14 COORDINATOR_LOAD_IN_PROGRESS R - The coordinator is still loading its state.
15 COORDINATOR_NOT_AVAILABLE R - The coordinator is not available.
16 NOT_COORDINATOR R - This broker is not the coordinator for the group or transaction.
17 INVALID_TOPIC_EXCEPTION - - The topic name is invalid or the topic is internal.
18 RECORD_LIST_TOO_LARGE - - The batch is larger than the segment size.
19 NOT_ENOUGH_REPLICAS R - Fewer in-sync replicas than required.
20 NOT_ENOUGH_REPLICAS_AFTER_APPEND R - Written, but fewer in-sync replicas than required.
21 INVALID_REQUIRED_ACKS - - The acks value is invalid.
22 ILLEGAL_GENERATION - - The group generation id is not current.
23 INCONSISTENT_GROUP_PROTOCOL - - The member's protocols do not match the group's.
24 INVALID_GROUP_ID - - The group id is empty or invalid.
25 UNKNOWN_MEMBER_ID - - The coordinator does not know this member id.
26 INVALID_SESSION_TIMEOUT - - The session timeout is outside the allowed range.
27 REBALANCE_IN_PROGRESS - - The group is rebalancing; rejoin.
28 INVALID_COMMIT_OFFSET_SIZE - - The committed offset metadata is too large.
29 TOPIC_AUTHORIZATION_FAILED - - Not authorized for the topic.
30 GROUP_AUTHORIZATION_FAILED - - Not authorized for the group.
31 CLUSTER_AUTHORIZATION_FAILED - - Not authorized for the cluster.
32 INVALID_TIMESTAMP - - A record timestamp is out of the acceptable range.
33 UNSUPPORTED_SASL_MECHANISM - - The broker does not support the SASL mechanism.
34 ILLEGAL_SASL_STATE - - The request is not valid in the SASL state.
35 UNSUPPORTED_VERSION - - The broker does not support this API version.
36 TOPIC_ALREADY_EXISTS - - The topic already exists.
37 INVALID_PARTITIONS - - The number of partitions is invalid.
38 INVALID_REPLICATION_FACTOR - - The replication factor is invalid.
39 INVALID_REPLICA_ASSIGNMENT - - The replica assignment is invalid.
40 INVALID_CONFIG - - The configuration is invalid.
41 NOT_CONTROLLER R - This broker is not the controller.
42 INVALID_REQUEST - - The request is malformed or not allowed.
43 UNSUPPORTED_FOR_MESSAGE_FORMAT - - The message format version does not support this.
44 POLICY_VIOLATION - - The request breaks a broker policy.
45 OUT_OF_ORDER_SEQUENCE_NUMBER - - The broker saw an out of order producer sequence.
46 DUPLICATE_SEQUENCE_NUMBER - - The broker already has this producer sequence.
47 INVALID_PRODUCER_EPOCH - - The producer epoch is older than the broker's.
48 INVALID_TXN_STATE - - The transaction state does not allow this operation.
49 INVALID_PRODUCER_ID_MAPPING - - The producer id does not match the transactional id.
50 INVALID_TRANSACTION_TIMEOUT - - The transaction timeout is too large.
51 CONCURRENT_TRANSACTIONS R - Another transaction operation is in progress.
52 TRANSACTION_COORDINATOR_FENCED - - A newer transaction coordinator exists.
53 TRANSACTIONAL_ID_AUTHORIZATION_FAILED - - Not authorized for the transactional id.
54 SECURITY_DISABLED - - Security features are disabled.
55 OPERATION_NOT_ATTEMPTED - - Not attempted because another part of the batch failed.
56 KAFKA_STORAGE_ERROR R M A disk error on the broker.
57 LOG_DIR_NOT_FOUND - - The log directory does not exist.
58 SASL_AUTHENTICATION_FAILED - - SASL authentication failed.
59 UNKNOWN_PRODUCER_ID - - The broker has no state for this producer id.
60 REASSIGNMENT_IN_PROGRESS - - A partition reassignment is in progress.
61 DELEGATION_TOKEN_AUTH_DISABLED - - Delegation token authentication is disabled.
62 DELEGATION_TOKEN_NOT_FOUND - - The delegation token does not exist.
63 DELEGATION_TOKEN_OWNER_MISMATCH - - The principal does not own the delegation token.
64 DELEGATION_TOKEN_REQUEST_NOT_ALLOWED - - Delegation token requests are not allowed on this channel.
65 DELEGATION_TOKEN_AUTHORIZATION_FAILED - - Not authorized for the delegation token.
66 DELEGATION_TOKEN_EXPIRED - - The delegation token has expired.
67 INVALID_PRINCIPAL_TYPE - - The principal type is not supported.
68 NON_EMPTY_GROUP - - The group is not empty.
69 GROUP_ID_NOT_FOUND - - The group does not exist.
70 FETCH_SESSION_ID_NOT_FOUND R - The fetch session does not exist.
71 INVALID_FETCH_SESSION_EPOCH R - The fetch session epoch is wrong.
72 LISTENER_NOT_FOUND R M The leader has no endpoint for the listener.
73 TOPIC_DELETION_DISABLED - - Topic deletion is disabled.
74 FENCED_LEADER_EPOCH R M The leader epoch in the request is older than the broker's.
75 UNKNOWN_LEADER_EPOCH R - The leader epoch in the request is newer than the broker's.
76 UNSUPPORTED_COMPRESSION_TYPE - - The consumer does not support the compression type.
77 STALE_BROKER_EPOCH - - The broker epoch is out of date.
78 OFFSET_NOT_AVAILABLE R - The leader's high watermark is not caught up yet.
79 MEMBER_ID_REQUIRED - - Rejoin with the member id the broker gave.
80 PREFERRED_LEADER_NOT_AVAILABLE R M The preferred leader is not available.
81 GROUP_MAX_SIZE_REACHED - - The group is full.
82 FENCED_INSTANCE_ID - - Another member with this static instance id joined.
83 ELIGIBLE_LEADERS_NOT_AVAILABLE R M No eligible leader for the election.
84 ELECTION_NOT_NEEDED R M The leader is already the chosen one.
85 NO_REASSIGNMENT_IN_PROGRESS - - No partition reassignment is in progress.
86 GROUP_SUBSCRIBED_TO_TOPIC - - The group is still subscribed to the topic.
87 INVALID_RECORD - - A record failed the broker's validation.
88 UNSTABLE_OFFSET_COMMIT R - Offsets have pending transactional commits.
89 THROTTLING_QUOTA_EXCEEDED R - A throttling quota was exceeded.
90 PRODUCER_FENCED - - A newer producer with the same transactional id exists.
91 RESOURCE_NOT_FOUND - - The resource does not exist.
92 DUPLICATE_RESOURCE - - The resource is named twice in the request.
93 UNACCEPTABLE_CREDENTIAL - - The credential does not meet the broker's requirements.
94 INCONSISTENT_VOTER_SET - - The voter sets of the quorum do not match.
95 INVALID_UPDATE_VERSION - - The update version is invalid.
96 FEATURE_UPDATE_FAILED - - The feature update failed.
97 PRINCIPAL_DESERIALIZATION_FAILURE - - The forwarded principal could not be read.
98 SNAPSHOT_NOT_FOUND - - The snapshot does not exist.
99 POSITION_OUT_OF_RANGE - - The requested position is outside the snapshot.
100 UNKNOWN_TOPIC_ID R M The broker does not know this topic id.
101 DUPLICATE_BROKER_REGISTRATION - - The broker id is already registered.
102 BROKER_ID_NOT_REGISTERED - - The broker id is not registered.
103 INCONSISTENT_TOPIC_ID R M The topic id does not match the topic name.
104 INCONSISTENT_CLUSTER_ID - - The cluster id does not match.
105 TRANSACTIONAL_ID_NOT_FOUND - - The transactional id does not exist.
106 FETCH_SESSION_TOPIC_ID_ERROR R - The fetch session's topic ids are inconsistent.
107 INELIGIBLE_REPLICA - - The replica cannot join the in-sync set.
108 NEW_LEADER_ELECTED - - A new leader was elected while the request waited.
109 OFFSET_MOVED_TO_TIERED_STORAGE - - The offset is only in tiered storage.
110 FENCED_MEMBER_EPOCH - - The member epoch is fenced.
111 UNRELEASED_INSTANCE_ID - - The static instance id is still in use.
112 UNSUPPORTED_ASSIGNOR - - The assignor is not supported.
113 STALE_MEMBER_EPOCH - - The member epoch is out of date.
114 MISMATCHED_ENDPOINT_TYPE - - The request went to the wrong kind of endpoint.
115 UNSUPPORTED_ENDPOINT_TYPE - - The endpoint type does not support this request.
116 UNKNOWN_CONTROLLER_ID - - The controller id is unknown.
117 UNKNOWN_SUBSCRIPTION_ID - - The telemetry subscription id is unknown.
118 TELEMETRY_TOO_LARGE - - The telemetry payload is too large.
119 INVALID_REGISTRATION - - The broker registration is invalid.
120 TRANSACTION_ABORTABLE - - The transaction must be aborted.
121 INVALID_RECORD_STATE - - The record state is invalid for the operation.
122 SHARE_SESSION_NOT_FOUND R - The share session does not exist.
123 INVALID_SHARE_SESSION_EPOCH R - The share session epoch is wrong.
124 FENCED_STATE_EPOCH - - The share-state epoch is fenced.
125 INVALID_VOTER_KEY - - The voter key does not match.
126 DUPLICATE_VOTER - - The voter is already in the voter set.
127 VOTER_NOT_FOUND - - The voter is not in the voter set.
128 INVALID_REGULAR_EXPRESSION - - The subscription's regular expression is not valid.
129 REBOOTSTRAP_REQUIRED - - The client's metadata is stale: it must bootstrap again.
130 STREAMS_INVALID_TOPOLOGY - - The streams topology is invalid.
131 STREAMS_INVALID_TOPOLOGY_EPOCH - - The streams topology epoch is invalid.
132 STREAMS_TOPOLOGY_FENCED - - The streams topology epoch is out of date.
133 SHARE_SESSION_LIMIT_REACHED R - The broker's share session limit is reached.
"""


def _rows() -> list[tuple[int, str, bool, bool, str]]:
    rows = []
    for line in _TABLE.strip().splitlines():
        code, name, r, m, desc = line.split(" ", 4)
        rows.append((int(code), name, r == "R", m == "M", desc))
    return rows


class _Base(enum.IntEnum):
    """A Kafka error code with ``description``, ``retriable`` and ``invalid_metadata``.

    ``retriable``: the same request may succeed if retried (possibly after a backoff).
    ``invalid_metadata``: the client should refresh its metadata before retrying: the
    codes whose Java exception is an ``InvalidMetadataException`` (not
    UNKNOWN_LEADER_EPOCH, which Java retries without a refresh).
    """

    @classmethod
    def of(cls, code: int) -> ErrorCode:
        """The member for ``code``; UNKNOWN_SERVER_ERROR for codes not in the table."""
        try:
            return cls(code)  # type: ignore[return-value]
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR  # type: ignore[attr-defined,no-any-return]

    @property
    def ok(self) -> bool:
        """True for NONE (0)."""
        return self.value == 0

    @property
    def description(self) -> str:
        return _INFO[self.value][2]

    @property
    def retriable(self) -> bool:
        return _INFO[self.value][0]

    @property
    def invalid_metadata(self) -> bool:
        return _INFO[self.value][1]

    @property
    def coordinator_moved(self) -> bool:
        """The group or transaction coordinator asked is not (or no longer) the one: find
        it again (Java marks its coordinator unknown)."""
        return self.name in _COORDINATOR_MOVED

    @property
    def member_fenced(self) -> bool:
        """The group no longer knows this member at this generation or epoch: its partitions
        may be someone else's now (lost, not revoked), and it joins again as a new member."""
        return self.name in _MEMBER_FENCED

    @property
    def rejoin(self) -> bool:
        """A classic group member must join again (its generation is stale, or the group is
        rebalancing)."""
        return self.name in _REJOIN


# The group and transaction protocols' kinds of codes, as Java's coordinators and members
# treat them (one place: the client derives its sets from these flags).
_COORDINATOR_MOVED = frozenset(("COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"))
_MEMBER_FENCED = frozenset(("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "FENCED_MEMBER_EPOCH"))
_REJOIN = frozenset(("ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS",
                     "MEMBER_ID_REQUIRED"))


_ROWS = _rows()
_INFO = {code: (r, m, desc) for code, _name, r, m, desc in _ROWS}
if TYPE_CHECKING:
    # The members are made from the table at import time, which type checkers cannot
    # follow; this class tells them the members (tests/protocol/test_protocol_errors.py keeps it
    # equal to the table).
    class ErrorCode(_Base):
        UNKNOWN_SERVER_ERROR = -1
        NONE = 0
        OFFSET_OUT_OF_RANGE = 1
        CORRUPT_MESSAGE = 2
        UNKNOWN_TOPIC_OR_PARTITION = 3
        INVALID_FETCH_SIZE = 4
        LEADER_NOT_AVAILABLE = 5
        NOT_LEADER_OR_FOLLOWER = 6
        REQUEST_TIMED_OUT = 7
        BROKER_NOT_AVAILABLE = 8
        REPLICA_NOT_AVAILABLE = 9
        MESSAGE_TOO_LARGE = 10
        STALE_CONTROLLER_EPOCH = 11
        OFFSET_METADATA_TOO_LARGE = 12
        NETWORK_EXCEPTION = 13
        COORDINATOR_LOAD_IN_PROGRESS = 14
        COORDINATOR_NOT_AVAILABLE = 15
        NOT_COORDINATOR = 16
        INVALID_TOPIC_EXCEPTION = 17
        RECORD_LIST_TOO_LARGE = 18
        NOT_ENOUGH_REPLICAS = 19
        NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
        INVALID_REQUIRED_ACKS = 21
        ILLEGAL_GENERATION = 22
        INCONSISTENT_GROUP_PROTOCOL = 23
        INVALID_GROUP_ID = 24
        UNKNOWN_MEMBER_ID = 25
        INVALID_SESSION_TIMEOUT = 26
        REBALANCE_IN_PROGRESS = 27
        INVALID_COMMIT_OFFSET_SIZE = 28
        TOPIC_AUTHORIZATION_FAILED = 29
        GROUP_AUTHORIZATION_FAILED = 30
        CLUSTER_AUTHORIZATION_FAILED = 31
        INVALID_TIMESTAMP = 32
        UNSUPPORTED_SASL_MECHANISM = 33
        ILLEGAL_SASL_STATE = 34
        UNSUPPORTED_VERSION = 35
        TOPIC_ALREADY_EXISTS = 36
        INVALID_PARTITIONS = 37
        INVALID_REPLICATION_FACTOR = 38
        INVALID_REPLICA_ASSIGNMENT = 39
        INVALID_CONFIG = 40
        NOT_CONTROLLER = 41
        INVALID_REQUEST = 42
        UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
        POLICY_VIOLATION = 44
        OUT_OF_ORDER_SEQUENCE_NUMBER = 45
        DUPLICATE_SEQUENCE_NUMBER = 46
        INVALID_PRODUCER_EPOCH = 47
        INVALID_TXN_STATE = 48
        INVALID_PRODUCER_ID_MAPPING = 49
        INVALID_TRANSACTION_TIMEOUT = 50
        CONCURRENT_TRANSACTIONS = 51
        TRANSACTION_COORDINATOR_FENCED = 52
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
        SECURITY_DISABLED = 54
        OPERATION_NOT_ATTEMPTED = 55
        KAFKA_STORAGE_ERROR = 56
        LOG_DIR_NOT_FOUND = 57
        SASL_AUTHENTICATION_FAILED = 58
        UNKNOWN_PRODUCER_ID = 59
        REASSIGNMENT_IN_PROGRESS = 60
        DELEGATION_TOKEN_AUTH_DISABLED = 61
        DELEGATION_TOKEN_NOT_FOUND = 62
        DELEGATION_TOKEN_OWNER_MISMATCH = 63
        DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
        DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
        DELEGATION_TOKEN_EXPIRED = 66
        INVALID_PRINCIPAL_TYPE = 67
        NON_EMPTY_GROUP = 68
        GROUP_ID_NOT_FOUND = 69
        FETCH_SESSION_ID_NOT_FOUND = 70
        INVALID_FETCH_SESSION_EPOCH = 71
        LISTENER_NOT_FOUND = 72
        TOPIC_DELETION_DISABLED = 73
        FENCED_LEADER_EPOCH = 74
        UNKNOWN_LEADER_EPOCH = 75
        UNSUPPORTED_COMPRESSION_TYPE = 76
        STALE_BROKER_EPOCH = 77
        OFFSET_NOT_AVAILABLE = 78
        MEMBER_ID_REQUIRED = 79
        PREFERRED_LEADER_NOT_AVAILABLE = 80
        GROUP_MAX_SIZE_REACHED = 81
        FENCED_INSTANCE_ID = 82
        ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
        ELECTION_NOT_NEEDED = 84
        NO_REASSIGNMENT_IN_PROGRESS = 85
        GROUP_SUBSCRIBED_TO_TOPIC = 86
        INVALID_RECORD = 87
        UNSTABLE_OFFSET_COMMIT = 88
        THROTTLING_QUOTA_EXCEEDED = 89
        PRODUCER_FENCED = 90
        RESOURCE_NOT_FOUND = 91
        DUPLICATE_RESOURCE = 92
        UNACCEPTABLE_CREDENTIAL = 93
        INCONSISTENT_VOTER_SET = 94
        INVALID_UPDATE_VERSION = 95
        FEATURE_UPDATE_FAILED = 96
        PRINCIPAL_DESERIALIZATION_FAILURE = 97
        SNAPSHOT_NOT_FOUND = 98
        POSITION_OUT_OF_RANGE = 99
        UNKNOWN_TOPIC_ID = 100
        DUPLICATE_BROKER_REGISTRATION = 101
        BROKER_ID_NOT_REGISTERED = 102
        INCONSISTENT_TOPIC_ID = 103
        INCONSISTENT_CLUSTER_ID = 104
        TRANSACTIONAL_ID_NOT_FOUND = 105
        FETCH_SESSION_TOPIC_ID_ERROR = 106
        INELIGIBLE_REPLICA = 107
        NEW_LEADER_ELECTED = 108
        OFFSET_MOVED_TO_TIERED_STORAGE = 109
        FENCED_MEMBER_EPOCH = 110
        UNRELEASED_INSTANCE_ID = 111
        UNSUPPORTED_ASSIGNOR = 112
        STALE_MEMBER_EPOCH = 113
        MISMATCHED_ENDPOINT_TYPE = 114
        UNSUPPORTED_ENDPOINT_TYPE = 115
        UNKNOWN_CONTROLLER_ID = 116
        UNKNOWN_SUBSCRIPTION_ID = 117
        TELEMETRY_TOO_LARGE = 118
        INVALID_REGISTRATION = 119
        TRANSACTION_ABORTABLE = 120
        INVALID_RECORD_STATE = 121
        SHARE_SESSION_NOT_FOUND = 122
        INVALID_SHARE_SESSION_EPOCH = 123
        FENCED_STATE_EPOCH = 124
        INVALID_VOTER_KEY = 125
        DUPLICATE_VOTER = 126
        VOTER_NOT_FOUND = 127
        INVALID_REGULAR_EXPRESSION = 128
        REBOOTSTRAP_REQUIRED = 129
        STREAMS_INVALID_TOPOLOGY = 130
        STREAMS_INVALID_TOPOLOGY_EPOCH = 131
        STREAMS_TOPOLOGY_FENCED = 132
        SHARE_SESSION_LIMIT_REACHED = 133
else:
    ErrorCode = _Base("ErrorCode", [(name, code) for code, name, _r, _m, _d in _ROWS],
                      module=__name__)
    ErrorCode.__doc__ = _Base.__doc__
