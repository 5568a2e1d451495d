"""kcodec.broker: a single-process Kafka broker for development, tests, CI and demos.

Not a replacement for a production Kafka cluster: one process, partitions whose replicas
share one log (always in sync; racks and fetch from follower as Kafka's), TLS and SASL listeners (``security=``, see ``kcodec.broker.security``; several named
listeners per node with ``listeners=``, see ``kcodec.broker.listeners``). It speaks the real
protocol on real sockets, so any Kafka client works.

    from kcodec.broker import Cluster
    with Cluster() as broker:            # one node, memory storage, a free port
        ... broker.bootstrap ...

    cluster.py     ``Cluster``: broker nodes in this process, and the controls tests need
    node.py        one node: acceptors and processors per listener, a channel, a handler pool
    state.py       what the nodes share: topics, partition replicas and leaders, the logs
    listeners.py   several named endpoints per node, each with its own security protocol
    purgatory.py   delayed operations: answers that wait for an event or a deadline
    hooks.py       test hooks: see each request before its handler, change what happens
    metrics.py     the broker's metrics, one registry per node, named as Kafka's MBeans
    telemetry.py   KIP-714: client metrics subscriptions, and the metrics clients push
    testing.py     deprecated (removed in 0.3): the fixtures are ``kcodec.testing.fixtures``
    network/       acceptor, processors, request channel, handler pool
    apis/          one handler per API, chosen on the key and checked on the version
    log/           partition logs of segments, in memory or on disk: recovery, retention
    coordinator/   groups, producer ids, transactions
    share/         share groups on the share-partition leader (KIP-932)
    authorizer/    ACLs, as Kafka's broker decides them
    security/      TLS contexts and SASL mechanisms for listeners
    config/        the broker's configs by Kafka's names, with Kafka's defaults
"""

from kcodec import _moved
from kcodec.broker.cluster import Cluster, RecordedRequest
from kcodec.broker.config.broker import RACK_AWARE_SELECTOR
from kcodec.broker.hooks import DROP, LOSE_ANSWER, NEVER, Delay

# classic-protocol groups are ClassicGroup, as in Kafka (KIP-848's are consumer_group)
_moved.install({
    "kcodec.broker.coordinator.group": "kcodec.broker.coordinator.classic_group",
    "kcodec.broker.apis.groups": "kcodec.broker.apis.classic_groups",
}, removed_in="0.3")

__all__ = ["Cluster", "RecordedRequest", "Delay", "DROP", "LOSE_ANSWER", "NEVER",
           "RACK_AWARE_SELECTOR"]
