"""kcodec.broker: a single-process Kafka broker for development, tests, CI and demos.

Not a replacement for a production Kafka cluster: one process, single-replica partitions,
TLS and SASL listeners (``security=``, see ``kcodec.broker.security``; several named
listeners per node with ``listeners=``, see ``kcodec.broker.listeners``). It speaks the real
protocol on real sockets, so any Kafka client works.

    from kcodec.broker import Cluster
    with Cluster() as broker:            # one node, memory storage, a free port
        ... broker.bootstrap ...

Layout: ``network`` (acceptor, processors, request channel, handler pool), ``apis`` (one
handler per API), ``log`` (partition logs of segments, recovery, retention),
``coordinator`` (groups, producer ids, transactions), ``authorizer`` (ACLs), ``security``
(TLS, SASL), ``listeners``, ``hooks`` (test fault injection), ``cluster``
(nodes and test controls), ``state`` (what the nodes share).
"""

from kcodec import _moved
from kcodec.broker.cluster import Cluster, RecordedRequest
from kcodec.broker.hooks import DROP, LOSE_ANSWER, NEVER, Delay

# classic-protocol groups are ClassicGroup, as in Kafka (KIP-848's are consumer_group)
_moved.install({
    "kcodec.broker.coordinator.group": "kcodec.broker.coordinator.classic_group",
    "kcodec.broker.apis.groups": "kcodec.broker.apis.classic_groups",
}, removed_in="0.3")

__all__ = ["Cluster", "RecordedRequest", "Delay", "DROP", "LOSE_ANSWER", "NEVER"]
