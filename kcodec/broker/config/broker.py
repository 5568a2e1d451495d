"""The broker configs kcodec's broker honours: Kafka 4.x's names, types and defaults.

Given as ``Cluster(config={"group.initial.rebalance.delay.ms": 0})`` or
``kcodec broker --config group.initial.rebalance.delay.ms=0`` (Kafka's ``--override``).
Each entry says which ``Cluster`` keyword it sets (the keyword and the config are two
spellings of one setting; giving both is an error) and Kafka's dynamic update mode
(``read-only``: fixed at start; ``per-broker`` / ``cluster-wide``: changed at run time by
AlterConfigs on a BROKER resource).

Where kcodec's default differs from Kafka's, ``KCODEC_DEFAULTS`` holds it and ``REASONS``
says why (the config reference prints both).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kcodec.broker.config.types import (
    INT_MAX,
    ConfigDef,
    ConfigError,
    at_least,
    between,
    one_of,
)

__all__ = ["BROKER_CONFIGS", "BrokerSetting", "KCODEC_DEFAULTS", "RACK_AWARE_SELECTOR", "REASONS",
           "resolve"]

RO, PER_BROKER, CLUSTER = "read-only", "per-broker", "cluster-wide"


@dataclass(frozen=True)
class BrokerSetting:
    """A broker config, the ``Cluster`` keyword it sets (None: read from ``Cluster.config``
    by its owner) and how the keyword's value follows from the config's."""

    definition: ConfigDef
    keyword: str | None
    mode: str = RO
    to_keyword: Callable[[Any], Any] | None = None
    from_keyword: Callable[[Any], Any] | None = None

    def keyword_value(self, value: Any) -> Any:
        """The ``Cluster`` keyword's value for the config's typed ``value``."""
        return value if self.to_keyword is None else self.to_keyword(value)

    def config_value(self, keyword_value: Any) -> Any:
        """The config's typed value for a ``Cluster`` keyword's value."""
        return keyword_value if self.from_keyword is None else self.from_keyword(keyword_value)

    @property
    def name(self) -> str:
        return self.definition.name


def _ms_to_s(v: int) -> float:
    return v / 1000


def _s_to_ms(v: float) -> int:
    return int(round(v * 1000))


def _limit(v: int | None) -> int:
    return INT_MAX if v is None else v


def _overrides(v: Any) -> str:
    return "" if not v else ",".join(f"{k}:{n}" for k, n in dict(v).items())


def _unlimited(v: int) -> int | None:
    return None if v == INT_MAX else v


def _users(v: str) -> list[str]:
    return [u.strip() for u in v.split(";") if u.strip()]


_AUTHORIZERS = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "kafka.security.authorizer.AclAuthorizer")


def _authorizer(v: str) -> bool:
    if v and v not in _AUTHORIZERS:
        raise ConfigError(f"Invalid value {v} for configuration authorizer.class.name: kcodec's "
                          f"broker has Kafka's StandardAuthorizer only ({_AUTHORIZERS[0]})")
    return bool(v)


#: Kafka's rack-aware replica selector (KIP-392), the one replica.selector.class kcodec has
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _replica_selector(name: str, v: Any) -> None:
    # Kafka loads the class at start and fails without it; kcodec has Kafka's one selector
    if v and v != RACK_AWARE_SELECTOR:
        raise ConfigError(f"Invalid value {v} for configuration {name}: Class {v} cannot be "
                          f"found (kcodec's broker has Kafka's {RACK_AWARE_SELECTOR} only)")


def _d(name: str, type_: str, default: Any, doc: str, validator: Any = None) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, validator)


_S = BrokerSetting
_SETTINGS: list[BrokerSetting] = [
    # ---------------------------------------------------------------- topics and logs
    _S(_d("num.partitions", "INT", 1, "partitions of an auto-created topic", at_least(1)),
       "num_partitions", RO),
    _S(_d("auto.create.topics.enable", "BOOLEAN", True,
          "create a topic when a client first names it"), "auto_create_topics", RO),
    _S(_d("log.retention.check.interval.ms", "LONG", 300000,
          "how often retention runs over the logs", at_least(1)),
       "retention_check_s", RO, _ms_to_s, _s_to_ms),
    _S(_d("log.cleaner.enable", "BOOLEAN", True,
          "compact the logs of compacted topics (cleanup.policy=compact)"), None, RO),
    _S(_d("log.cleaner.backoff.ms", "LONG", 15000,
          "how often the cleaner looks for compacted logs with records to clean",
          at_least(0)), None, RO),
    _S(_d("default.replication.factor", "INT", 1,
          "replicas of a topic created without a replication factor (auto-created ones "
          "too), capped at the node count"), None, RO),
    # ---------------------------------------------------------------- racks (KIP-36, KIP-392)
    _S(_d("broker.rack", "STRING", None,
          "the node's rack; {id} in the value is replaced by each node's id "
          "(broker.rack=RACK{id}), or give Cluster(racks=[...]) / --racks for a list"),
       None, RO),
    _S(_d("replica.selector.class", "STRING", None,
          "the replica a consumer's fetch is sent to: " + RACK_AWARE_SELECTOR
          + " sends a consumer with client.rack to a replica in its rack (fetch from "
          "follower, KIP-392); unset: the leader only", _replica_selector), None, RO),
    # ---------------------------------------------------------------- client quotas
    _S(_d("quota.window.num", "INT", 11, "samples a client's byte rate is measured over",
          at_least(1)), None, RO),
    _S(_d("quota.window.size.seconds", "INT", 1, "the length of one of those samples",
          at_least(1)), None, RO),
    _S(_d("controller.quota.window.num", "INT", 11,
          "samples of the controller mutation quota: its bucket holds this many windows",
          at_least(1)), None, RO),
    _S(_d("controller.quota.window.size.seconds", "INT", 1,
          "the length of one of those samples", at_least(1)), None, RO),
    # ---------------------------------------------------------------- groups
    _S(_d("group.initial.rebalance.delay.ms", "INT", 3000,
          "a new classic group waits this long for more members before its first rebalance",
          at_least(0)), "initial_rebalance_delay_ms", RO),
    _S(_d("group.min.session.timeout.ms", "INT", 6000,
          "the smallest session timeout a classic group member may ask for"), None, RO),
    _S(_d("group.max.session.timeout.ms", "INT", 1800000,
          "the largest session timeout a classic group member may ask for"), None, RO),
    _S(_d("group.consumer.session.timeout.ms", "INT", 45000,
          "consumer protocol groups: a member's session timeout", at_least(1)), None, RO),
    _S(_d("group.consumer.min.session.timeout.ms", "INT", 45000,
          "consumer protocol groups: the smallest group session timeout", at_least(1)),
       None, RO),
    _S(_d("group.consumer.max.session.timeout.ms", "INT", 60000,
          "consumer protocol groups: the largest group session timeout", at_least(1)),
       None, RO),
    _S(_d("group.consumer.heartbeat.interval.ms", "INT", 5000,
          "consumer protocol groups: a member's heartbeat interval", at_least(1)), None, RO),
    _S(_d("group.consumer.min.heartbeat.interval.ms", "INT", 5000,
          "consumer protocol groups: the smallest group heartbeat interval", at_least(1)),
       None, RO),
    _S(_d("group.consumer.max.heartbeat.interval.ms", "INT", 15000,
          "consumer protocol groups: the largest group heartbeat interval", at_least(1)),
       None, RO),
    _S(_d("group.consumer.migration.policy", "STRING", "bidirectional",
          "classic <-> consumer protocol group conversion",
          one_of("disabled", "downgrade", "upgrade", "bidirectional", case_sensitive=False)),
       "group_consumer_migration_policy", RO, str.lower),
    # group.share.* are listed from kcodec.broker.share.configs below
    # ---------------------------------------------------------------- network
    _S(_d("num.network.threads", "INT", 3, "network threads per node", at_least(1)),
       "processors", RO),
    _S(_d("num.io.threads", "INT", 8, "request handler threads per node", at_least(1)),
       "handlers", RO),
    _S(_d("network.inline.requests", "BOOLEAN", True,
          "small Produce and Fetch requests are handled on the network thread that read them, "
          "not handed to the request handler threads and back (kcodec's own: the two thread "
          "switches took ~40% of a small produce's time; false: every request goes through "
          "the handlers, as in Kafka)"), None, RO),
    _S(_d("socket.request.max.bytes", "INT", 104857600,
          "the largest request frame; a larger one closes the connection", at_least(1)),
       "max_request_bytes", RO),
    _S(_d("queued.max.request.bytes", "LONG", -1,
          "bytes of requests read and not yet answered per node (-1: no limit)"),
       "queued_max_bytes", RO, lambda v: 1 << 62 if v < 0 else v),
    _S(_d("connections.max.idle.ms", "LONG", 600000, "idle connections are closed after this"),
       "idle_timeout_s", RO, _ms_to_s, _s_to_ms),
    _S(_d("max.connections", "INT", INT_MAX, "connections per node over all listeners",
          at_least(0)), "max_connections", RO, _unlimited, _limit),
    _S(_d("max.connections.per.ip", "INT", INT_MAX, "connections per client address",
          at_least(0)), "max_connections_per_ip", RO, _unlimited, _limit),
    _S(_d("max.connections.per.user", "INT", 1000,
          "connections per node of one authenticated principal (SASL or a TLS certificate; "
          "kcodec's own, ANONYMOUS is bounded by max.connections.per.ip)", at_least(1)),
       None, RO),
    _S(_d("queued.max.request.bytes.per.user", "LONG", -1,
          "the most of queued.max.request.bytes one principal (or, not logged in, one "
          "client address) holds while a request of its own waits (kcodec's own; -1: half "
          "of it)"), None, RO),
    _S(_d("max.connections.per.ip.overrides", "STRING", "",
          "per-address limits, host:N,host:N"), "max_connections_per_ip_overrides", RO,
       lambda v: v or None, lambda v: v if isinstance(v, str) else _overrides(v)),
    _S(_d("listeners", "STRING", "PLAINTEXT://:9092", "the listeners, NAME://host:port,..."),
       "listeners", RO),
    _S(_d("advertised.listeners", "STRING", None, "the addresses clients are told"),
       "advertised_listeners", RO),
    _S(_d("listener.security.protocol.map", "STRING",
          "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
          "listener name to security protocol"), "listener_security_protocol_map", RO),
    # ---------------------------------------------------------------- security
    _S(_d("sasl.server.max.receive.size", "INT", 524288,
          "the largest frame before SASL authentication", at_least(1)),
       "max_unauthenticated_request_bytes", RO),
    _S(_d("connections.max.reauth.ms", "LONG", 0,
          "a SASL session's longest life: clients re-authenticate before it ends (KIP-368; "
          "0: no limit); applies to every SASL listener not given its own", at_least(0)),
       None, RO),
    _S(_d("connection.failed.authentication.delay.ms", "INT", 100,
          "a failed SASL login is answered after this", at_least(0)),
       "failed_authentication_delay_ms", RO),
    _S(_d("authorizer.class.name", "STRING", "", "the authorizer (Kafka's StandardAuthorizer "
          "for ACLs; empty: every request allowed)"), "authorizer", RO, _authorizer,
       lambda v: _AUTHORIZERS[0] if v else ""),
    _S(_d("super.users", "STRING", "", "principals allowed everything, User:a;User:b"),
       "super_users", RO, _users, lambda v: v if isinstance(v, str) else ";".join(v)),
    _S(_d("allow.everyone.if.no.acl.found", "BOOLEAN", False,
          "allow what no ACL names a resource for"), "allow_everyone_if_no_acl_found", RO),
    # ---------------------------------------------------------------- transactions
    _S(_d("transaction.two.phase.commit.enable", "BOOLEAN", False,
          "InitProducerId may ask for two-phase commit (KIP-939)"),
       "transaction_two_phase_commit_enable", RO),
]


def _share_settings() -> list[BrokerSetting]:
    from kcodec.broker.share.configs import BROKER_DEFAULTS

    return [_S(_d(name, "INT", default, "share groups (kcodec.broker.share.configs)",
                  between(1, INT_MAX)), None, RO)
            for name, default in BROKER_DEFAULTS.items()]


def _streams_settings() -> list[BrokerSetting]:
    from kcodec.broker.share.configs import STREAMS_DEFAULTS, STREAMS_ZERO_OK

    return [_S(_d(name, "INT", default, "streams groups (KIP-1071): the bounds and defaults "
                  "of the streams.* group configs; inert here (no streams groups)",
                  between(0 if name in STREAMS_ZERO_OK else 1, INT_MAX)), None, RO)
            for name, default in STREAMS_DEFAULTS.items()]


def _topic_default_settings() -> list[BrokerSetting]:
    """The broker configs that give topic configs their defaults (``log.retention.ms`` for
    ``retention.ms``), typed and checked as the topic config; cluster-wide dynamic."""
    from kcodec.broker.config.topic import TOPIC_CONFIGS

    out = []
    for c in TOPIC_CONFIGS.values():
        if c.server_default is None:
            continue
        d = c.definition
        out.append(_S(ConfigDef(c.server_default, d.type, d.default,
                                f"the default of topic config {d.name}", d.validator),
                      None, CLUSTER))
    # the coarser spellings of log.retention.ms and log.roll.ms (ms wins, then minutes)
    out.append(_S(_d("log.retention.minutes", "INT", None, "retention.ms's default in "
                     "minutes, below log.retention.ms"), None, RO))
    out.append(_S(_d("log.retention.hours", "INT", 168, "retention.ms's default in hours, "
                     "below log.retention.minutes"), None, RO))
    out.append(_S(_d("log.roll.hours", "INT", 168, "segment.ms's default in hours, below "
                     "log.roll.ms", at_least(1)), None, RO))
    return out


#: Kafka broker configs that a Kafka test cluster's server.properties commonly sets and that
#: mean nothing on this broker: accepted (typed and checked), shown, inert; why
INERT: dict[str, str] = {
    "node.id": "nodes are numbered 0..N-1 by the order they are started in",
    "broker.id": "as node.id",
    "log.dir": "the logs go to --data-dir (or memory)",
    "log.dirs": "as log.dir",
    "process.roles": "every node is broker and controller in one process",
    "controller.quorum.voters": "no KRaft quorum: the nodes share their metadata in-process",
    "controller.quorum.bootstrap.servers": "as controller.quorum.voters",
    "controller.listener.names": "as controller.quorum.voters",
    "inter.broker.listener.name": "the nodes do not replicate over the network",
    "offsets.topic.replication.factor": "committed offsets are not kept in a topic here "
                                        "(consumer_offsets.jsonl of the data dir)",
    "offsets.topic.num.partitions": "as offsets.topic.replication.factor",
    "transaction.state.log.replication.factor": "transaction state is not kept in a topic "
                                                "here",
    "transaction.state.log.min.isr": "as transaction.state.log.replication.factor",
    "transaction.state.log.num.partitions": "as transaction.state.log.replication.factor",
    "group.coordinator.rebalance.protocols": "the classic and consumer protocols are always "
                                             "served",
    "num.recovery.threads.per.data.dir": "recovery is one thread",
}


#: what each OIDC validation config does (KIP-768), for the config reference
_OIDC_DOCS = {
    "sasl.oauthbearer.jwks.endpoint.url": "OAUTHBEARER tokens are signed JWTs checked against "
    "the JWKS at this http(s):// or file: URL (kcodec.broker.security.JwksValidator; "
    "kcodec broker: with --sasl-mechanisms OAUTHBEARER)",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "a fetched JWKS is fetched again after this",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "the least time between JWKS fetches "
    "for tokens naming an unknown key id, or after a failed fetch",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "the most time between them (the "
    "wait doubles after each failed fetch)",
    "sasl.oauthbearer.clock.skew.seconds": "the leeway given to a token's exp, nbf and iat",
    "sasl.oauthbearer.expected.audience": "a token's aud must hold one of these (if set)",
    "sasl.oauthbearer.expected.issuer": "a token's iss must be this (if set)",
    "sasl.oauthbearer.sub.claim.name": "the claim the principal is taken from",
    "sasl.oauthbearer.scope.claim.name": "the claim a token's scopes are read from",
}


def _oidc_settings() -> list[BrokerSetting]:
    from kcodec.broker.security.oidc import OIDC_CONFIGS

    return [_S(_d(name, t, dflt, _OIDC_DOCS[name]), None, RO)
            for name, (t, dflt) in OIDC_CONFIGS.items()]


def _inert_settings() -> list[BrokerSetting]:
    kinds = {"node.id": ("INT", -1), "broker.id": ("INT", -1),
             "log.dir": ("STRING", "/tmp/kafka-logs"), "log.dirs": ("STRING", None),
             "process.roles": ("LIST", []), "controller.quorum.voters": ("LIST", []),
             "controller.quorum.bootstrap.servers": ("LIST", []),
             "controller.listener.names": ("STRING", None),
             "inter.broker.listener.name": ("STRING", None),
             "offsets.topic.replication.factor": ("SHORT", 3),
             "offsets.topic.num.partitions": ("INT", 50),
             "transaction.state.log.replication.factor": ("SHORT", 3),
             "transaction.state.log.min.isr": ("INT", 2),
             "transaction.state.log.num.partitions": ("INT", 50),
             "group.coordinator.rebalance.protocols": ("LIST", ["classic", "consumer"]),
             "num.recovery.threads.per.data.dir": ("INT", 2)}
    return [_S(_d(name, kinds[name][0], kinds[name][1], f"inert here: {why}"), None, RO)
            for name, why in INERT.items()]


#: Kafka's SASL settings a listener reconfigures at run time (DynamicListenerConfig), per
#: broker: name -> (type, Kafka's default). Accepted, checked, shown and changed by
#: AlterConfigs, inert: kcodec's broker has no GSSAPI (Kerberos) mechanism, and it logs no
#: client in to refresh (it is the SASL server only)
SASL_LISTENER: dict[str, tuple[str, Any]] = {
    "sasl.kerberos.kinit.cmd": ("STRING", "/usr/bin/kinit"),
    "sasl.kerberos.min.time.before.relogin": ("LONG", 60000),
    "sasl.kerberos.principal.to.local.rules": ("LIST", ["DEFAULT"]),
    "sasl.kerberos.service.name": ("STRING", None),
    "sasl.kerberos.ticket.renew.jitter": ("DOUBLE", 0.05),
    "sasl.kerberos.ticket.renew.window.factor": ("DOUBLE", 0.8),
    "sasl.login.refresh.buffer.seconds": ("SHORT", 300),
    "sasl.login.refresh.min.period.seconds": ("SHORT", 60),
    "sasl.login.refresh.window.factor": ("DOUBLE", 0.8),
    "sasl.login.refresh.window.jitter": ("DOUBLE", 0.05),
}
_SASL_RANGES: dict[str, Any] = {
    "sasl.login.refresh.buffer.seconds": between(0, 3600),
    "sasl.login.refresh.min.period.seconds": between(0, 900),
    "sasl.login.refresh.window.factor": between(0.5, 1.0),
    "sasl.login.refresh.window.jitter": between(0.0, 0.25),
}


def _sasl_listener_settings() -> list[BrokerSetting]:
    why = "inert here: no GSSAPI mechanism, and the broker logs no SASL client in"
    return [_S(_d(name, t, dflt, why, _SASL_RANGES.get(name)), None, PER_BROKER)
            for name, (t, dflt) in SASL_LISTENER.items()]


#: config name -> its setting, in the order above (then the share-group ones, the topic
#: defaults, and the inert ones)
BROKER_CONFIGS: dict[str, BrokerSetting] = {
    s.name: s for s in _SETTINGS + _share_settings() + _streams_settings()
    + _topic_default_settings()
    + _oidc_settings() + _inert_settings() + _sasl_listener_settings()}


def topic_defaults(config: Mapping[str, Any], given: set[str]) -> dict[str, str]:
    """The topic defaults (topic config name -> text) the ``given`` broker configs set."""
    from kcodec.broker.config.topic import TOPIC_CONFIGS

    out: dict[str, str] = {}
    for c in TOPIC_CONFIGS.values():
        if c.server_default in given:
            out[c.name] = c.definition.text(config[c.server_default]) or ""
    if "retention.ms" not in out:
        if "log.retention.minutes" in given and config["log.retention.minutes"] is not None:
            out["retention.ms"] = str(config["log.retention.minutes"] * 60_000)
        elif "log.retention.hours" in given:
            out["retention.ms"] = str(config["log.retention.hours"] * 3_600_000)
    if "segment.ms" not in out and "log.roll.hours" in given:
        out["segment.ms"] = str(config["log.roll.hours"] * 3_600_000)
    return out

#: where kcodec's default is not Kafka's: config name -> kcodec's default
KCODEC_DEFAULTS: dict[str, Any] = {
    "num.network.threads": 2,
    "num.io.threads": 4,
    "queued.max.request.bytes": 100 * 1024 * 1024,
    "listeners": "PLAINTEXT://127.0.0.1:0",
}

#: configs Kafka changes at run time that kcodec's broker fixes at start: why
STATIC_HERE: dict[str, str] = {
    "num.network.threads": "the network and handler threads are started once",
    "num.io.threads": "as num.network.threads",
    "max.connections": "the connection limits are built at start",
    "max.connections.per.ip": "as max.connections",
    "max.connections.per.ip.overrides": "as max.connections",
}

#: why kcodec's default differs from Kafka's
REASONS: dict[str, str] = {
    "num.network.threads": "Python threads share one interpreter lock: a third network "
                           "thread adds switching, not throughput, on a development broker",
    "num.io.threads": "the same: four handler threads already keep the lock busy",
    "queued.max.request.bytes": "Kafka bounds its request queue by count "
                                "(queued.max.requests, 500); kcodec bounds it by bytes so "
                                "that a burst of large produce requests cannot exhaust memory",
    "listeners": "an embedded broker for tests takes a free loopback port, not 9092 on every "
                 "interface (kcodec broker --port 9092 or --listeners for Kafka's)",
}


def default(name: str) -> Any:
    """The broker's default of config ``name`` (Kafka's, or kcodec's with a reason)."""
    if name in KCODEC_DEFAULTS:
        return KCODEC_DEFAULTS[name]
    return BROKER_CONFIGS[name].definition.default


def resolve(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Typed values of ``config`` (names checked, values parsed and validated as Kafka does);
    raises ConfigError naming the first bad one."""
    out: dict[str, Any] = {}
    for name, value in (config or {}).items():
        setting = BROKER_CONFIGS.get(name)
        if setting is None:
            raise ConfigError(f"unknown broker config {name!r}: kcodec's broker honours "
                              f"{', '.join(BROKER_CONFIGS)}")
        out[name] = setting.definition.parse(value)
    return out


def lookup(name: str, config: Mapping[str, Any]) -> Any:
    """The typed value of ``name`` in a resolved ``config``, else its default."""
    return config[name] if name in config else default(name)



def doc_rows() -> tuple[list[str], list[list[str]]]:
    """The config reference's table (header, rows): name, type, default, Kafka's default
    where kcodec's differs and why, update mode, meaning."""
    rows = []
    for name, s in BROKER_CONFIGS.items():
        d = s.definition
        ours = d.text(default(name))
        kafka = "" if name not in KCODEC_DEFAULTS else f"{d.default_text}: {REASONS[name]}"
        mode = s.mode if name not in STATIC_HERE else f"read-only (Kafka: dynamic; here " \
                                                      f"{STATIC_HERE[name]})"
        rows.append([f"`{name}`", d.type.lower(), f"`{ours}`" if ours else "",
                     kafka, mode, d.doc + (f" (`{s.keyword}=`)" if s.keyword else "")])
    return ["config", "type", "default", "Kafka's default, if not this, and why", "update",
            "meaning"], rows
