"""``Cluster``: one or more broker nodes in this process, and the controls tests need.

    from kcodec.broker import Cluster

    with Cluster(nodes=3) as c:                       # free loopback ports
        c.create_topic("events", partitions=6)
        print(c.bootstrap)                            # "127.0.0.1:41001,127.0.0.1:41002,..."
        c.move_leader("events", 0, 2)                 # partition 0 now led by node 2
        c.stop_node(1); c.restart_node(1)             # same port, log kept
        c.set_coordinator("my-group", 0)
        c.hook("Produce", lambda req: ErrorCode.NOT_LEADER_OR_FOLLOWER)   # see hooks.py
        c.push_errors("Fetch", [ErrorCode.UNKNOWN_SERVER_ERROR] * 2)
        c.cap_versions("Fetch", 11)
        c.record(); ...; c.requests                   # every request seen

    # several listeners with different protocols on every node (see listeners.py)
    Cluster(listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            listener_security={"SSL": ListenerSecurity(ssl_context=ctx),
                               "SASL_SSL": ListenerSecurity(ssl_context=ctx, sasl=mechs)})
    c.bootstrap_for("SSL")                            # the nodes' SSL addresses

    # racks and fetch from follower (KIP-392): each node's broker.rack, Kafka's selector
    from kcodec.broker import RACK_AWARE_SELECTOR
    Cluster(nodes=3, config={"broker.rack": "RACK{id}",     # RACK0, RACK1, RACK2
                             "replica.selector.class": RACK_AWARE_SELECTOR})
    Cluster(nodes=3, racks=["a", "a", "b"])               # or one rack per node

The nodes share one :class:`~kcodec.broker.state.ClusterState` (topics, their replica sets
and leaders, one log per partition that every replica shares), one group coordinator and
one producer-id table; a partition is written only through its leader and read from any of
its replicas (a follower when the consumer is sent there), a group served only by its
coordinator.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from kcodec.broker.authorizer import AclStore, Authorizer
from kcodec.broker.coordinator.classic_group import GroupCoordinator, coordinator_index
from kcodec.broker.coordinator.consumer_group import ConsumerGroupCoordinator
from kcodec.broker.coordinator.offsets import OffsetStore
from kcodec.broker.coordinator.producers import ProducerIds
from kcodec.broker.coordinator.share_group import ShareGroupCoordinator
from kcodec.broker.coordinator.txn import TxnCoordinator
from kcodec.broker.hooks import Hooks
from kcodec.broker.listeners import Listener, parse_listeners
from kcodec.broker.node import Node
from kcodec.broker.purgatory import Purgatory, Timer
from kcodec.broker.share.manager import SharePartitionManager
from kcodec.broker.state import ClusterState, now_ms
from kcodec.protocol import REQUESTS, ErrorCode

__all__ = ["Cluster", "RecordedRequest", "api_key_of"]


def api_key_of(api: int | str) -> int:
    """An API key from a key or a name (``"Produce"``, ``"ProduceRequest"``)."""
    if isinstance(api, int):
        return api
    for key, cls in REQUESTS.items():
        if cls.NAME in (api, api + "Request"):
            return key
    raise ValueError(f"no Kafka API named {api!r}")


@dataclass
class RecordedRequest:
    """A request the cluster kept while recording: its node, API key and version, header, body
    and time."""
    node_id: int
    api_key: int
    api_version: int
    header: Any
    body: Any
    time: float


class Cluster:
    """One or more broker nodes in this process: ``start()``/``stop()`` or a ``with`` block;
    ``bootstrap`` is ``host:port,...`` of the running nodes. Sizes in bytes, times as named.

    Args:
        nodes: how many broker nodes (each on its own port).
        data_dir: keep logs, topics, committed offsets, transactions and ACLs on disk here
            (a restart finds them again); None keeps everything in memory.
        host: the address the nodes listen on.
        ports: one port per node (None: free ports).
        num_partitions: partitions of an auto-created topic.
        auto_create_topics: create a topic when a client first names it.
        initial_rebalance_delay_ms: classic groups wait this long for more members before
            the first rebalance (Kafka's ``group.initial.rebalance.delay.ms``, 3000 as
            Kafka's; tests that form groups often pass 0).
        processors: network threads per node.
        handlers: request handler threads per node.
        max_request_bytes: the largest request frame (``socket.request.max.bytes``); a larger
            one closes the connection before it is read.
        queued_max_bytes: bytes of requests read and not yet answered, per node
            (``queued.max.request.bytes``); reading waits past it.
        idle_timeout_s: idle connections are closed after this (``connections.max.idle.ms``).
        retention_check_s: how often retention runs over the logs.
        cluster_id: the cluster id the nodes report (None: a new one, or the data dir's).
        security: the TLS/SASL settings of the single listener (``kcodec.broker.security``);
            use ``listeners`` for several.
        listeners: named listeners, as Kafka's ``listeners`` (``"PLAINTEXT://host:port,SSL://
            host:port"``) or ``Listener`` objects.
        listener_security_protocol_map: listener name to security protocol, as Kafka's
            ``listener.security.protocol.map``.
        advertised_listeners: the addresses clients are told, as Kafka's
            ``advertised.listeners``.
        listener_security: listener name to its ``ListenerSecurity`` (TLS context, SASL
            mechanisms).
        group_consumer_migration_policy: classic and consumer protocol group conversion:
            ``bidirectional``, ``upgrade``, ``downgrade`` or ``disabled``.
        max_unauthenticated_request_bytes: the largest frame before SASL authentication
            (``sasl.server.max.receive.size``).
        request_read_timeout_s: a frame's body must arrive within this of its size.
        failed_authentication_delay_ms: a failed SASL login is answered after this
            (``connection.failed.authentication.delay.ms``).
        max_connections: connections per node over all listeners (None: no limit).
        max_connections_per_ip: connections per client address (None: no limit).
        max_connections_per_ip_overrides: per-address limits, ``"host:N,host:N"`` or a dict.
        authorizer: True for Kafka's ACL model (an ``Authorizer``, or None: every request
            allowed).
        super_users: principals allowed everything (``"User:admin;User:ops"`` or a list).
        allow_everyone_if_no_acl_found: allow what no ACL names, instead of denying it.
        transaction_version: the finalized ``transaction.version`` (KIP-890): 2 serves
            transactions v2 beside the first generation; 0 and 1 the first only.
        transaction_two_phase_commit_enable: let InitProducerId ask for two-phase commit
            (KIP-939).
        share_group_configs: the broker's share-group defaults and bounds by Kafka's names
            (``{"group.share.record.lock.duration.ms": 15000}``).
        client_metrics: KIP-714 client metrics subscriptions, each
            ``"NAME:metrics=PREFIX,...;interval.ms=N;match=client_id=REGEX"``.
        racks: each node's ``broker.rack``, one per node (None: the ``broker.rack``
            config, in which ``{id}`` stands for the node's id, or no rack).
        config: broker configs by Kafka's names (``{"group.initial.rebalance.delay.ms":
            0}``), values typed or as text, checked as Kafka checks them
            (``kcodec.broker.config.broker`` lists them); a config and its keyword above
            are one setting, give one of them.

    ``Cluster.base_config`` holds configs under every cluster this process makes (below
    ``config`` and the keywords): a test suite's conftest may set
    ``Cluster.base_config["group.initial.rebalance.delay.ms"] = 0`` once, as Kafka's own
    integration tests do, so that classic groups form without the 3 s wait.
    """

    #: broker configs every Cluster of this process starts from (see the class docs)
    base_config: ClassVar[dict[str, Any]] = {}

    def __init__(self, nodes: int = 1, *, data_dir: str | os.PathLike | None = None,
                 host: str = "127.0.0.1", ports: list[int] | None = None,
                 num_partitions: int = 1, auto_create_topics: bool = True,
                 initial_rebalance_delay_ms: int = 3000, processors: int = 2, handlers: int = 4,
                 max_request_bytes: int = 100 * 1024 * 1024,
                 queued_max_bytes: int = 100 * 1024 * 1024, idle_timeout_s: float = 600.0,
                 retention_check_s: float = 300.0, cluster_id: str | None = None,
                 security: Any = None, listeners: str | list[Listener] | None = None,
                 listener_security_protocol_map: str | dict[str, str] | None = None,
                 advertised_listeners: str | None = None,
                 listener_security: dict[str, Any] | None = None,
                 group_consumer_migration_policy: str = "bidirectional",
                 max_unauthenticated_request_bytes: int = 512 * 1024,
                 request_read_timeout_s: float = 30.0,
                 failed_authentication_delay_ms: int = 100,
                 max_connections: int | None = None, max_connections_per_ip: int | None = None,
                 max_connections_per_ip_overrides: str | dict[str, int] | None = None,
                 authorizer: Any = None, super_users: Any = (),
                 allow_everyone_if_no_acl_found: bool = False,
                 transaction_version: int = 2,
                 transaction_two_phase_commit_enable: bool = False,
                 share_group_configs: dict[str, Any] | None = None,
                 client_metrics: Any = None, racks: list[str | None] | None = None,
                 config: dict[str, Any] | None = None) -> None:
        from kcodec.broker.config import settings_from

        kw = settings_from(Cluster.base_config, config, locals(), _KEYWORD_DEFAULTS)
        num_partitions, auto_create_topics = kw["num_partitions"], kw["auto_create_topics"]
        initial_rebalance_delay_ms = kw["initial_rebalance_delay_ms"]
        processors, handlers = kw["processors"], kw["handlers"]
        max_request_bytes, queued_max_bytes = kw["max_request_bytes"], kw["queued_max_bytes"]
        idle_timeout_s, retention_check_s = kw["idle_timeout_s"], kw["retention_check_s"]
        listeners, advertised_listeners = kw["listeners"], kw["advertised_listeners"]
        listener_security_protocol_map = kw["listener_security_protocol_map"]
        group_consumer_migration_policy = kw["group_consumer_migration_policy"]
        max_unauthenticated_request_bytes = kw["max_unauthenticated_request_bytes"]
        failed_authentication_delay_ms = kw["failed_authentication_delay_ms"]
        max_connections, max_connections_per_ip = kw["max_connections"], kw["max_connections_per_ip"]
        max_connections_per_ip_overrides = kw["max_connections_per_ip_overrides"]
        authorizer, super_users = kw["authorizer"], kw["super_users"]
        allow_everyone_if_no_acl_found = kw["allow_everyone_if_no_acl_found"]
        transaction_two_phase_commit_enable = kw["transaction_two_phase_commit_enable"]
        share_group_configs = kw["share_group_configs"]
        #: the broker configs by Kafka's names, typed (every one kcodec honours)
        self.config: dict[str, Any] = kw["config"]
        #: the names given (config= or a keyword) rather than left at their defaults
        self.config_given: set[str] = kw["given"]
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        if ports is not None and len(ports) != nodes:
            raise ValueError(f"{len(ports)} ports for {nodes} nodes")
        if isinstance(listeners, str):
            listeners = parse_listeners(listeners, protocol_map=listener_security_protocol_map,
                                        advertised=advertised_listeners,
                                        security=listener_security)
        elif listeners is not None and (listener_security_protocol_map or advertised_listeners
                                        or listener_security):
            raise ValueError("Listener objects carry their own protocol, security and "
                             "advertised address")
        if listeners is not None and (security is not None or ports is not None):
            raise ValueError("give either listeners= or security=/ports=, not both")
        if listeners is not None and nodes > 1:
            fixed = [(ls.host, ls.port + i) for i in range(nodes) for ls in listeners if ls.port]
            if len(fixed) != len(set(fixed)):
                raise ValueError(f"listeners: node i binds each fixed port plus i, so with "
                                 f"{nodes} nodes the listeners' ports must be at least {nodes} "
                                 f"apart")
        self.data_dir = None if data_dir is None else os.fspath(data_dir)
        from kcodec.broker.telemetry import ClientTelemetry, parse_subscription

        #: KIP-714: client metrics subscriptions (ClientMetricsSubscription or their text)
        self.telemetry = ClientTelemetry([parse_subscription(s) if isinstance(s, str) else s
                                          for s in client_metrics or ()])
        self.authorizer = _authorizer(authorizer, super_users, allow_everyone_if_no_acl_found)
        self.state = ClusterState(self.data_dir, cluster_id=cluster_id,
                                  num_partitions=num_partitions,
                                  auto_create_topics=auto_create_topics)
        self.state.nodes = list(range(nodes))
        from kcodec.broker.config.dynamic import DynamicConfigs, topic_defaults_of

        #: the dynamic broker configs (AlterConfigs on BROKER resources), over the static ones
        self.dynamic_configs = DynamicConfigs(self.data_dir)
        self.dynamic_configs.static = {n: self.config[n] for n in self.config_given}
        self.state.topic_defaults = topic_defaults_of(self)
        #: each node's broker.rack (None: no rack)
        self.racks = _racks(racks, self.config["broker.rack"], "broker.rack" in self.config_given,
                            nodes)
        self.dynamic_configs.static_per_broker = {
            i: {"broker.rack": r} for i, r in enumerate(self.racks) if r is not None}
        #: replica.selector.class is Kafka's rack-aware selector: fetch from follower
        self.rack_aware_selector = bool(self.config["replica.selector.class"])
        self.nodes: dict[int, Node] = {
            i: Node(self, i, host, (ports or [0] * nodes)[i], processors=processors,
                    handlers=handlers, max_request_bytes=max_request_bytes,
                    queued_max_bytes=queued_max_bytes, idle_timeout_s=idle_timeout_s,
                    security=security, listeners=_for_node(listeners, i),
                    max_unauthenticated_bytes=max_unauthenticated_request_bytes,
                    request_read_timeout_s=request_read_timeout_s,
                    failed_authentication_delay_ms=failed_authentication_delay_ms,
                    max_connections=max_connections, max_connections_per_ip=max_connections_per_ip,
                    max_connections_per_ip_overrides=max_connections_per_ip_overrides)
            for i in range(nodes)}
        from kcodec.broker.config.quotas import ClientQuotas
        from kcodec.broker.security.scram_store import ScramStore

        #: the client quotas of DescribeClientQuotas / AlterClientQuotas (enforced)
        self.client_quotas = ClientQuotas(self.data_dir, self.config["quota.window.num"],
                                          self.config["quota.window.size.seconds"],
                                          self.config["controller.quota.window.num"],
                                          self.config["controller.quota.window.size.seconds"])
        #: the SCRAM credentials (AlterUserScramCredentials changes them at run time)
        self.scram = ScramStore(self.data_dir)
        self._share_scram_store()
        self._session_lifetime()
        from kcodec.broker.coordinator.migration import check_policy

        #: Kafka's group.consumer.migration.policy: bidirectional, upgrade, downgrade, disabled
        self.group_consumer_migration_policy = check_policy(group_consumer_migration_policy)
        if transaction_version not in (0, 1, 2):
            raise ValueError(f"transaction_version must be 0, 1 or 2, got {transaction_version!r}")
        #: the finalized transaction.version feature (KIP-890): 2 serves transactions v2
        #: (epoch bump per transaction) beside the first generation; 0 and 1 only the first
        self.transaction_version = transaction_version
        #: transaction.two.phase.commit.enable (KIP-939): InitProducerId may ask for 2PC
        self.transaction_two_phase_commit_enable = bool(transaction_two_phase_commit_enable)
        from kcodec.broker.share.configs import ShareConfigs

        ShareConfigs(share_group_configs, None)   # the group.share.* names checked now
        #: the broker's group.share.* configs (kcodec.broker.share.configs)
        self.share_group_configs = dict(share_group_configs or {})
        self._initial_delay = initial_rebalance_delay_ms
        self._retention_s = retention_check_s
        self.version_caps: dict[int, int] = {}
        self.coordinators: dict[str, int] = {}
        self.requests: list[RecordedRequest] = []
        self.recording = False
        self._rec_lock = threading.Lock()
        self.timer: Timer | None = None
        self.started = False

    def _session_lifetime(self) -> None:
        """``connections.max.reauth.ms`` (KIP-368): given as a config it becomes the session
        lifetime of every SASL listener that has none of its own (``ListenerSecurity``);
        otherwise the one lifetime the SASL listeners were given, if they share one, is what
        the config shows (DescribeConfigs, as a static broker config)."""
        name = "connections.max.reauth.ms"
        secs = {id(ls.security): ls.security for n in self.nodes.values() for ls in n.listeners
                if ls.security is not None and ls.security.sasl}
        if name in self.config_given:
            for sec in secs.values():
                if not sec.connections_max_reauth_ms:
                    sec.connections_max_reauth_ms = self.config[name]
            return
        own = {sec.connections_max_reauth_ms for sec in secs.values()}
        if len(own) == 1 and 0 not in own:
            self.config[name] = own.pop()
            self.config_given.add(name)
            self.dynamic_configs.static[name] = self.config[name]

    def _share_scram_store(self) -> None:
        """Every listener's SCRAM logins look users up in ``self.scram``, which starts from
        the credentials the listeners were given."""
        seen: set[int] = set()
        for n in self.nodes.values():
            for ls in n.listeners:
                sec = ls.security
                if sec is None or not sec.sasl or id(sec) in seen:
                    continue
                seen.add(id(sec))
                for mech, factory in list(sec.sasl.items()):
                    if not mech.startswith("SCRAM-"):
                        continue
                    given = getattr(factory(), "credentials", None)
                    if given is not None:
                        self.scram.seed(mech, given)
                    sec.sasl[mech] = self._scram_factory(mech, factory)

    def _scram_factory(self, mech: str, factory: Callable[[], Any]) -> Callable[[], Any]:
        def make() -> Any:
            server = factory()
            server.use_lookup(self.scram.lookup(mech))
            return server
        return make

    # ------------------------------------------------------------------ life cycle
    def start(self) -> Cluster:
        """Start every node (``with`` calls it); returns the cluster."""
        if self.started:
            return self
        self.state.lock_data_dir()   # first: a data dir in use stops here, nothing started
        from kcodec.observe.log import Debug
        Debug(None)                  # KCODEC_DEBUG names contexts: DEBUG on, with a handler
        self.timer = Timer()
        self.purgatory = Purgatory(self.timer)
        self.hooks = Hooks(self.timer)
        self.producer_ids = ProducerIds()
        self.txns = TxnCoordinator(self)
        try:
            self.state.open()
        except BaseException:
            self.timer.stop()
            raise
        cfg = self.config
        self.offsets = OffsetStore(self.data_dir)   # every group's committed offsets
        self.groups = GroupCoordinator(self.timer, self.offsets,
                                       initial_rebalance_delay_ms=self._initial_delay,
                                       min_session_timeout_ms=cfg["group.min.session.timeout.ms"],
                                       max_session_timeout_ms=cfg["group.max.session.timeout.ms"])
        self.consumer_groups = ConsumerGroupCoordinator(   # KIP-848
            self.timer, self.state,
            session_timeout_ms=cfg["group.consumer.session.timeout.ms"],
            heartbeat_interval_ms=cfg["group.consumer.heartbeat.interval.ms"])
        self.consumer_groups.classic = self.groups
        if self.authorizer is not None:
            self.consumer_groups.describable = self._describable_topics
        self.consumer_groups.migration_policy = self.group_consumer_migration_policy
        from kcodec.broker.share.configs import CONSUMER_DEFAULTS, STREAMS_DEFAULTS

        group_configs = {**self.share_group_configs,
                         **{k: cfg[k] for k in CONSUMER_DEFAULTS},
                         **{k: cfg[k] for k in STREAMS_DEFAULTS}}
        self.share = SharePartitionManager(self.state, self.txns, self.data_dir, self.timer,
                                           self.purgatory, group_configs)
        #: the group configs (share.*, consumer.*) of each group, for the KIP-848 groups too
        self.consumer_groups.group_configs = self.share.configs
        self.share_groups = ShareGroupCoordinator(self.timer, self.state, self.share)
        self.share_groups.other_kinds = self._classic_or_consumer_group
        try:
            if self.authorizer is not None:   # its ACLs from the data dir, before any request
                self.authorizer.open(None if self.data_dir is None else AclStore(self.data_dir))
            self.txns.recover()     # producer state and open transactions, from the data dir
            self.timer.every(self._retention_s, lambda: self.state.logs.run_retention(now_ms()))
            if self.config["log.cleaner.enable"]:
                # as Kafka's cleaner threads: compacted logs every log.cleaner.backoff.ms,
                # apart from the (slower) retention check
                self.timer.every(max(self.config["log.cleaner.backoff.ms"], 100) / 1000,
                                 lambda: self.state.logs.run_cleaner(now_ms()))
            for n in self.nodes.values():
                n.start()
        except BaseException:
            # e.g. a port taken: let go of what was started (threads, sockets, the data dir)
            self.started = True
            self.stop()
            raise
        self.started = True
        return self

    def stop(self) -> None:
        """Stop every node, then flush and close the logs (a clean shutdown)."""
        if not self.started:
            return
        self.started = False
        for n in self.nodes.values():
            n.stop()
        self.groups.close()
        self.share.close()
        assert self.timer is not None
        self.timer.stop()
        self.txns.close()       # after the timer: no transaction expires past the snapshot
        self.state.close()

    close = stop

    def _describable_topics(self, principal: str, host: str, names: set[str]) -> set[str]:
        """The topics of ``names`` ``principal`` (from ``host``) may DESCRIBE."""
        auth = self.authorizer
        return names if auth is None else _describable(auth, principal, host, names)

    def _classic_or_consumer_group(self, group_id: str) -> bool:
        """Does a classic or consumer group use ``group_id`` (members or offsets)?"""
        if self.consumer_groups.is_consumer_group(group_id):
            return True
        with self.groups.lock:
            g = self.groups.groups.get(group_id)
            return g is not None and (bool(g.members) or self.offsets.has_offsets(group_id))

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of the running nodes (on their first listener)."""
        return ",".join(n.address for n in self.nodes.values() if n.running)

    def bootstrap_for(self, listener: str) -> str:
        """``host:port,...`` of the running nodes on the listener named ``listener``."""
        name = listener.upper()
        out = [n.addresses()[name] for n in self.nodes.values()
               if n.running and n.listener(name) is not None]
        if not out and all(n.listener(name) is None for n in self.nodes.values()):
            raise KeyError(f"no listener named {listener!r}")
        return ",".join(out)

    def live_nodes(self) -> list[Node]:
        """The nodes that are running."""
        return [n for n in self.nodes.values() if n.running]

    def alive_ids(self) -> set[int]:
        """The ids of the nodes that are running."""
        return {n.id for n in self.nodes.values() if n.running}

    def controller_id(self) -> int:
        """The id of the controller: the lowest running node (-1 if none runs)."""
        live = sorted(self.alive_ids())
        return live[0] if live else -1

    # ------------------------------------------------------------------ topics
    def create_topic(self, name: str, partitions: int = 1, *, configs: dict[str, str] | None = None,
                     leaders: dict[int, int] | list[int] | None = None,
                     replication_factor: int = -1) -> None:
        """Create a topic; ``leaders`` maps partition -> node id (or a list, one per partition),
        the first of its replicas, the others the nodes after it; ``replication_factor``
        -1 is ``default.replication.factor``. The configs are checked as CreateTopics checks
        them, except that ``segment.bytes`` may be below Kafka 4's 1 MiB minimum (down to
        14), as Kafka's own tests get with ``internal.segment.bytes``."""
        from kcodec.broker.apis.topics import create_topic

        if isinstance(leaders, list):
            leaders = dict(enumerate(leaders))
        code, msg = create_topic(self, name, partitions, replication_factor,
                                 dict(configs or {}), leaders, small_segments=True)
        if code:
            raise ValueError(f"cannot create topic {name!r}: {ErrorCode(code).name}: {msg}")

    def delete_topic(self, name: str) -> None:
        """Delete a topic, its logs, and the groups' and transactions' state of it."""
        self.state.delete_topic(name)
        self.offsets.delete_topic(name)
        self.txns.forget_topic(name)
        self.share.forget_topic(name)

    def leader_of(self, topic: str, partition: int) -> int:
        """The node id that leads ``topic``'s ``partition``."""
        p = self.state.partition(topic, partition)
        if p is None:
            raise KeyError(f"no partition {topic}-{partition}")
        return p.leader

    def replicas_of(self, topic: str, partition: int) -> list[int]:
        """The node ids of ``topic``'s ``partition``'s replica set (the preferred leader
        first)."""
        p = self.state.partition(topic, partition)
        if p is None:
            raise KeyError(f"no partition {topic}-{partition}")
        return list(p.replicas)

    def move_leader(self, topic: str, partition: int, node_id: int) -> None:
        """Make ``node_id`` the partition's leader (the leader epoch goes up by one). A node
        outside the replica set takes the old leader's place in it (a reassignment), so the
        replication factor stays."""
        if node_id not in self.nodes:
            raise KeyError(f"no node {node_id}")
        p = self.state.partition(topic, partition)
        if p is None:
            raise KeyError(f"no partition {topic}-{partition}")
        with p.lock:
            if node_id not in p.replicas:
                p.replicas = [node_id if r == p.leader else r for r in p.replicas]
            p.leader = node_id
            p.leader_epoch += 1
        self.state.save()
        self.purgatory.notify((topic, partition))

    # ------------------------------------------------------------------ nodes
    def stop_node(self, node_id: int) -> None:
        """Stop one node: its connections close and its port stops answering."""
        self.nodes[node_id].stop()

    def restart_node(self, node_id: int) -> None:
        """Start a stopped node again on the same port (its partitions' logs were kept)."""
        self.nodes[node_id].start()

    # ------------------------------------------------------------------ groups
    def coordinator_for(self, group_id: str) -> int | None:
        """The node coordinating ``group_id`` (None if that node is down)."""
        cid = self.coordinators.get(group_id)
        if cid is None:
            ids = sorted(self.nodes)
            cid = ids[coordinator_index(group_id, len(ids))]
        return cid if self.nodes[cid].running else None

    def set_coordinator(self, group_id: str, node_id: int) -> None:
        """Make ``node_id`` the coordinator of ``group_id``."""
        if node_id not in self.nodes:
            raise KeyError(f"no node {node_id}")
        self.coordinators[group_id] = node_id

    # ------------------------------------------------------------------ hooks
    def hook(self, api: int | str | None, fn: Callable[[Any], Any]) -> Callable[[], None]:
        """Call ``fn(request)`` for each request of ``api`` (None: all); see
        :mod:`kcodec.broker.hooks` for what it may return. Returns a remover."""
        return self.hooks.add(None if api is None else api_key_of(api), fn)

    def push_errors(self, api: int | str, codes: list[int]) -> None:
        """Answer the next ``len(codes)`` requests of ``api`` with these error codes in turn
        (0: answer normally)."""
        self.hooks.push_errors(api_key_of(api), codes)

    def clear_hooks(self) -> None:
        """Remove every hook and pushed error."""
        self.hooks.clear()

    def cap_versions(self, api: int | str, max_version: int | None) -> None:
        """Advertise at most ``max_version`` of ``api`` (None: no cap; below the minimum:
        the API is not advertised at all)."""
        key = api_key_of(api)
        if max_version is None:
            self.version_caps.pop(key, None)
        else:
            self.version_caps[key] = max_version

    # ------------------------------------------------------------------ recording
    def record(self, on: bool = True) -> list[RecordedRequest]:
        """Start (or stop) keeping every request in ``requests``."""
        self.recording = on
        return self.requests

    def record_request(self, node: Any, req: Any) -> None:
        """Keep one request (called by the nodes while recording)."""
        with self._rec_lock:
            self.requests.append(RecordedRequest(node.id, req.api_key, req.api_version,
                                                 req.header, req.body, time.time()))

    def recorded(self, api: int | str | None = None) -> list[RecordedRequest]:
        """The requests kept so far (of ``api`` only, if given)."""
        key = None if api is None else api_key_of(api)
        with self._rec_lock:
            return [r for r in self.requests if key is None or r.api_key == key]


def _keyword_defaults() -> dict[str, Any]:
    import inspect

    return {n: p.default for n, p in inspect.signature(Cluster.__init__).parameters.items()
            if p.default is not inspect.Parameter.empty}


_KEYWORD_DEFAULTS = _keyword_defaults()


def _describable(auth: Authorizer, principal: str, host: str, names: set[str]) -> set[str]:
    from kcodec.protocol.acl import AclOperation, ResourceType

    return {n for n in names if auth.authorize(principal, host, AclOperation.DESCRIBE,
                                               ResourceType.TOPIC, n, log_denial=False)}


def _authorizer(value: Any, super_users: Any, allow_everyone: bool) -> Authorizer | None:
    """The cluster's authorizer from its arguments: an Authorizer, True (a new one with
    ``super_users`` and ``allow_everyone_if_no_acl_found``), or None/False (no
    authorization: every request is allowed, as a Kafka broker without an authorizer)."""
    if isinstance(value, Authorizer):
        if super_users or allow_everyone:
            raise ValueError("super_users and allow_everyone_if_no_acl_found belong to the "
                             "Authorizer given; set them there")
        return value
    if value is None or value is False:
        if super_users or allow_everyone:
            raise ValueError("super_users and allow_everyone_if_no_acl_found need "
                             "authorizer=True (or an Authorizer)")
        return None
    if value is True:
        if isinstance(super_users, str):
            super_users = super_users.split(";")    # Kafka's super.users: User:a;User:b
        return Authorizer(super_users, allow_everyone)
    raise TypeError(f"authorizer must be True, False, None or an Authorizer, not {value!r}")


def _racks(racks: list[str | None] | None, pattern: str | None, pattern_given: bool,
           nodes: int) -> list[str | None]:
    """Each node's rack: from ``racks`` (one per node), else the ``broker.rack`` config with
    ``{id}`` replaced by the node's id."""
    if racks is not None:
        if pattern_given:
            raise ValueError("give the nodes' racks either as racks= or as the broker.rack "
                             "config, not both")
        if isinstance(racks, str) or len(racks) != nodes:
            raise ValueError(f"racks: give one rack per node ({nodes}), got {racks!r}")
        out = [None if r is None else str(r).strip() for r in racks]
        if any(r == "" for r in out):
            raise ValueError(f"racks: a rack name cannot be empty (None: no rack), got {racks!r}")
        return out
    if not pattern:
        return [None] * nodes
    return [pattern.replace("{id}", str(i)) for i in range(nodes)]


def _for_node(listeners: list[Listener] | None, index: int) -> list[Listener] | None:
    """Node ``index``'s copy of the listeners: fixed ports (bound and advertised) plus index."""
    if listeners is None:
        return None
    return [dataclasses.replace(ls, port=ls.port + index if ls.port else 0,
                                advertised_port=ls.advertised_port + index
                                if ls.advertised_port else 0) for ls in listeners]
