"""Client configuration: the Java client's property names in snake_case, validated once.

``ProducerConfig(bootstrap_servers="host:9092", linger_ms=5)``, or ``from_kwargs`` with a
dict as a properties file or confluent-kafka has it: Java's dotted names
(``"linger.ms"``), librdkafka's names for the same settings (kcodec.client.config_names),
and values as strings (``"false"``, ``"10"``) are taken, converted and validated. Unknown
names and bad values raise ``ValueError`` with a one-line message naming the property,
and for an unknown name what to use instead.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kcodec.client.config_names import ALIASES, VALUES, advice, normalize
from kcodec.compression import CODEC_NAMES

__all__ = ["ClientConfig", "ProducerConfig", "ConsumerConfig", "AdminConfig",
           "parse_bootstrap", "COMPRESSION_TYPES"]

# the names compression_type takes: kcodec.compression's (kept under this name for callers)
COMPRESSION_TYPES = CODEC_NAMES
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


_HOST = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?")


def parse_bootstrap(servers: str | list[str] | tuple[str, ...]) -> list[tuple[str, int]]:
    """``"a:9092,b:9093"`` or a list of ``host:port`` -> [(host, port), ...].

    Hosts are names, IPv4 addresses or bracketed IPv6 addresses (``[::1]:9092``); anything
    else is a ``ValueError`` naming the address, before any connection is tried.
    """
    if not isinstance(servers, (str, list, tuple)):
        raise ValueError(f"bootstrap_servers must be a string or a list, got {servers!r}")
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"bootstrap_servers: bad address {item!r} (expected host:port)")
        item = item.strip()
        if not item:
            continue
        addr = item.split("://", 1)[1] if "://" in item else item
        if addr.startswith("["):
            host, sep, port = addr[1:].partition("]")
            port = port[1:] if port.startswith(":") else ("9092" if not port else "x")
            ok = bool(sep) and _is_ipv6(host)
        else:
            host, sep, port = addr.rpartition(":")
            if not sep:
                host, port = addr, "9092"
            ok = _HOST.fullmatch(host) is not None
        if not ok or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bootstrap_servers: bad address {item!r} (expected host:port, "
                             "or [IPv6]:port)")
        out.append((host, int(port)))
    if not out:
        raise ValueError("bootstrap_servers: no address given")
    return out


def _is_ipv6(host: str) -> bool:
    import ipaddress
    try:
        ipaddress.IPv6Address(host)
        return True
    except ValueError:
        return False




def _from_text(name: str, kind: str, text: str) -> Any:
    """A setting's value from its text, as a properties file holds it, by the field's type;
    other types keep the text (their own checks judge it)."""
    t = text.strip()
    if kind == "bool":               # as Java reads a boolean: true or false, in any case
        if t.lower() in ("true", "false"):
            return t.lower() == "true"
        raise ValueError(f"{name} must be True or False, got {text!r}")
    if kind in ("int", "int | None"):
        if kind == "int | None" and t.lower() in ("", "none", "null"):
            return None
        try:
            return int(t)
        except ValueError:
            what = "an integer or None" if kind == "int | None" else "a non-negative integer"
            raise ValueError(f"{name} must be {what}, got {text!r}") from None
    if kind == "float":
        try:
            return float(t)
        except ValueError:
            raise ValueError(f"{name} must be a number, got {text!r}") from None
    return text


def _word(v: Any) -> Any:
    """An enumerated setting's text as the checks spell it (Java takes any case)."""
    return v.strip().lower() if isinstance(v, str) else v


def _unknown(cls: type, name: str, names: set[str]) -> str:
    """An unknown name, with what to use instead."""
    for other in (ProducerConfig, ConsumerConfig):
        if other is not cls and not issubclass(cls, other) and name in {
                f.name for f in dataclasses.fields(other)}:
            role = "producer" if other is ProducerConfig else "consumer"
            return f"{name} (a {role} setting)"
    hint = advice(name, names)
    return f"{name} ({hint})" if hint else name


@dataclass
class ClientConfig:
    """The settings every client takes (``Producer``, ``Consumer``, ``Admin``), validated
    once; times are in milliseconds.

    Settings:
        bootstrap_servers: ``"host:port,host:port"`` or a list; names, IPv4 or bracketed
            IPv6 addresses. Default ``$KCODEC_BOOTSTRAP``, else ``127.0.0.1:9092``.
        client_id: the name the brokers see in their logs and quotas.
        request_timeout_ms: how long one request waits for its answer.
        socket_connection_setup_timeout_ms: how long one connection attempt (socket, TLS,
            SASL) may take.
        retry_backoff_ms: the wait before a failed request is retried.
        reconnect_backoff_ms: the first wait before reconnecting to a broker.
        reconnect_backoff_max_ms: the longest wait between reconnects (it doubles up to this).
        connections_max_idle_ms: idle connections are closed after this, and reopened on
            demand.
        metadata_max_age_ms: metadata is refreshed at least this often.
        api_timeout_ms: bounds blocking calls and the search for a reachable broker (Java's
            ``default.api.timeout.ms``).
        security_protocol: ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``.
        ssl_cafile: PEM file of the CAs to trust (default: the system's).
        ssl_certfile: PEM file of the client's certificate (mutual TLS).
        ssl_keyfile: PEM file of the client's private key.
        ssl_password: the password of ``ssl_keyfile`` (kept out of ``repr``).
        ssl_endpoint_identification_algorithm: ``"https"``: the broker's certificate must
            name the host connected to; ``""`` turns that check off.
        ssl_context: an ``ssl.SSLContext`` used as given, instead of the ``ssl_*`` files.
        sasl_mechanism: ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512`` or ``OAUTHBEARER``.
        sasl_username: the SASL user (PLAIN, SCRAM).
        sasl_password: the SASL password (kept out of ``repr``).
        sasl_oauth_token_provider: OAUTHBEARER: a callable returning the token, ``(token,
            expires_at)`` or an ``OAuthToken``.
        sasl_login_refresh_window_factor: OAUTHBEARER: a new token is fetched once this
            fraction of the old one's lifetime has passed.
        receive_message_max_bytes: the largest response accepted (librdkafka's
            ``receive.message.max.bytes``): a larger one closes the connection and raises
            ``ResponseTooLargeError`` before it is read.
        debug: DEBUG log contexts, a comma list (``"protocol,fetch"``, ``"all"``;
            librdkafka's names too); ``KCODEC_DEBUG`` adds to it.
        metrics_enabled: keep the metrics ``metrics()`` returns (False: none are kept).
        statistics_interval_ms: how often ``stats_cb`` gets a JSON statistics document (0:
            never).
        stats_cb: ``stats_cb(json_text)``, called in a worker thread every
            ``statistics_interval_ms``.
        tracing_enabled: OpenTelemetry spans for send, poll and process (needs
            ``kcodec[otel]``).
        tracer_provider: the OpenTelemetry tracer provider (None: the global one).
        enable_metrics_push: KIP-714: push the metrics the broker subscribes to.
    """

    bootstrap_servers: str | list[str] = field(
        default_factory=lambda: os.environ.get("KCODEC_BOOTSTRAP", DEFAULT_BOOTSTRAP))
    client_id: str = "kcodec"
    request_timeout_ms: int = 30000
    socket_connection_setup_timeout_ms: int = 10000
    retry_backoff_ms: int = 100
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000
    connections_max_idle_ms: int = 540000
    metadata_max_age_ms: int = 300000
    api_timeout_ms: int = 60000  # default.api.timeout.ms: bounds blocking calls
    receive_message_max_bytes: int = 100_000_000   # librdkafka's cap on one response
    # security (kcodec.client.net.security): TLS and SASL; secrets are kept out of repr()
    security_protocol: str = "PLAINTEXT"
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = field(default=None, repr=False)
    ssl_endpoint_identification_algorithm: str | None = "https"
    ssl_context: Any = field(default=None, repr=False)
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    sasl_oauth_token_provider: Any = field(default=None, repr=False)
    sasl_login_refresh_window_factor: float = 0.8
    # observability (kcodec.observe): debug contexts, metrics, statistics, traces, KIP-714
    debug: str | None = None
    metrics_enabled: bool = True
    statistics_interval_ms: int = 0
    stats_cb: Any = field(default=None, repr=False)
    tracing_enabled: bool = False
    tracer_provider: Any = field(default=None, repr=False)
    enable_metrics_push: bool = True

    def __post_init__(self) -> None:
        from kcodec.client.net.security import validate_security

        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, str):          # as a properties file has it: "10", "false"
                setattr(self, f.name, _from_text(f.name, str(f.type), v))
        self.bootstrap = parse_bootstrap(self.bootstrap_servers)
        validate_security(self)
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.type in ("int", int) and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise ValueError(f"{f.name} must be a non-negative integer, got {v!r}")
            if f.type in ("bool", bool) and not isinstance(v, bool):
                raise ValueError(f"{f.name} must be True or False, got {v!r}")
            if f.type in ("str", str) and not isinstance(v, str):
                raise ValueError(f"{f.name} must be a string, got {v!r}")
        if self.receive_message_max_bytes < 1000:
            raise ValueError("receive_message_max_bytes must be at least 1000, got "
                             f"{self.receive_message_max_bytes}")
        self._validate_observe()
        self._validate()

    def _validate_observe(self) -> None:
        from kcodec.observe.log import debug_contexts

        if self.debug is not None and not isinstance(self.debug, str):
            raise ValueError(f"debug must be a comma list of contexts, got {self.debug!r}")
        debug_contexts(self.debug)
        if self.stats_cb is not None and not callable(self.stats_cb):
            raise ValueError(f"stats_cb must be callable (it gets the statistics as a JSON "
                             f"string), got {self.stats_cb!r}")
        if self.statistics_interval_ms and self.stats_cb is None:
            raise ValueError("statistics_interval_ms needs stats_cb, the function that gets "
                             "each statistics document")
        if self.statistics_interval_ms and not self.metrics_enabled:
            raise ValueError("statistics_interval_ms needs metrics_enabled=True (the "
                             "statistics are the metrics)")

    def _validate(self) -> None:
        pass

    @classmethod
    def from_kwargs(cls, config: Mapping[str, Any] | None = None, **kwargs: Any):
        """Build from a dict and/or keywords: kcodec's names, Java's dotted ones
        (``linger.ms``), librdkafka's for the same settings; values may be strings."""
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"a {cls.__name__} is a dict of settings, not "
                            f"{type(config).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        merged: dict[str, Any] = {}
        given: dict[str, str] = {}
        unknown = []
        for key, value in {**(config or {}), **kwargs}.items():
            if not isinstance(key, str):
                raise TypeError(f"{cls.__name__}: setting names are strings, not {key!r}")
            n = normalize(key)
            name = ALIASES.get(n, n)
            if name not in names:
                unknown.append(n)
                continue
            if name in given and given[name] != key:
                raise ValueError(f"{cls.__name__}: {name} is given twice ({given[name]!r} and "
                                 f"{key!r})")
            given[name] = key
            convert = VALUES.get(n)
            try:
                merged[name] = convert(value) if convert is not None else value
            except (TypeError, ValueError):
                raise ValueError(f"{key} must be a number, got {value!r}") from None
        if unknown:
            raise ValueError(f"unknown {cls.__name__} property: "
                             + "; ".join(_unknown(cls, n, names) for n in sorted(unknown)))
        return cls(**merged)


@dataclass
class ProducerConfig(ClientConfig):
    """The producer's settings, on top of :class:`ClientConfig`'s.

    Settings:
        acks: ``"all"`` (or -1), 1 or 0: which acknowledgement completes a send.
        linger_ms: how long a batch waits for more records before it is sent.
        batch_size: the most record bytes per batch (what the sticky partitioner counts).
        max_in_flight_requests_per_connection: unanswered Produce requests per broker (at
            most 5 with idempotence).
        retries: how often a retriable failure is retried, within ``delivery_timeout_ms``.
        delivery_timeout_ms: a record not acknowledged within this fails with
            ``KafkaTimeoutError`` naming the last error.
        compression_type: ``none``, ``gzip``, ``snappy``, ``lz4`` or ``zstd``.
        compression_level: the codec's level (None: the codec's default, as Kafka's).
        enable_idempotence: producer ids and sequence numbers, so a retried batch is written
            once (needs ``acks="all"``).
        buffer_memory: bytes of closed batches waiting for acknowledgement; ``send`` blocks
            (up to ``api_timeout_ms``) past it.
        transactional_id: makes the producer transactional (see the transactions guide).
        transaction_timeout_ms: the coordinator aborts a transaction open longer than this.
        max_request_size: ``send`` refuses a larger record with ``RecordTooLargeError``.
        transaction_two_phase_commit_enable: KIP-939: transactions an outside coordinator
            ends with ``prepare_transaction``/``complete_transaction``; no timeout.
        partitioner: for records sent without a partition: ``murmur2_random``,
            ``murmur2``, ``consistent``, ``consistent_random``, ``random``, a callable
            ``(topic, key_bytes, partition_count) -> int``, an object with that
            ``partition`` method, or ``"module:attr"``.
        key_serializer: turns a key into bytes before sending: ``fn(key)`` or ``fn(key,
            ctx)`` (None: keys must be bytes).
        value_serializer: the same for values.
        interceptors: objects with ``on_send(record)`` and ``on_acknowledgement(metadata,
            error)`` (either may be left out), in order.
    """

    acks: int | str = "all"
    linger_ms: int = 5
    batch_size: int = 16384
    max_in_flight_requests_per_connection: int = 5
    retries: int = 2147483647
    delivery_timeout_ms: int = 120000
    compression_type: str = "none"
    compression_level: int | None = None
    enable_idempotence: bool = True
    buffer_memory: int = 32 * 1048576
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60000
    max_request_size: int = 1048576      # a record larger than this is refused by send
    # KIP-939: transactions an outside coordinator ends (prepare_transaction); no timeout
    transaction_two_phase_commit_enable: bool = False
    # user hooks (kcodec.client.producer.hooks): a built-in name, a callable or an object,
    # or "module:attr" naming one
    partitioner: Any = "murmur2_random"
    key_serializer: Any = None
    value_serializer: Any = None
    interceptors: Any = None

    def _validate(self) -> None:
        from kcodec.client.producer.hooks import ProducerHooks

        self.hooks = ProducerHooks.build(self)
        if self.hooks is not None and self.hooks.interceptors is not None:
            self.interceptors = self.hooks.interceptors.items   # classes made once
        self.compression_type = _word(self.compression_type)
        acks = {"all": -1, "-1": -1, -1: -1, 0: 0, "0": 0, 1: 1, "1": 1}.get(_word(self.acks))
        if acks is None:
            raise ValueError(f"acks must be 0, 1 or 'all', got {self.acks!r}")
        self.acks = acks
        if self.compression_type not in COMPRESSION_TYPES:
            raise ValueError(f"compression_type must be one of {', '.join(COMPRESSION_TYPES)}, "
                             f"got {self.compression_type!r}")
        if self.compression_level is not None:
            from kcodec.compression import codec_of, compress
            from kcodec.errors import KcodecError

            lvl = self.compression_level
            if not isinstance(lvl, int) or isinstance(lvl, bool):
                raise ValueError(f"compression_level must be an integer or None, got {lvl!r}")
            try:   # the codec's own range check (compressing nothing is cheap)
                compress(codec_of(self.compression_type), b"", lvl)
            except (KcodecError, ValueError) as exc:
                raise ValueError(f"compression_level {lvl} is not valid for "
                                 f"{self.compression_type}: {exc}") from None
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {self.batch_size}")
        if self.max_request_size < 1:
            raise ValueError(f"max_request_size must be positive, got {self.max_request_size}")
        if self.max_in_flight_requests_per_connection < 1:
            raise ValueError("max_in_flight_requests_per_connection must be at least 1")
        if self.retries < 0:
            raise ValueError(f"retries must be non-negative, got {self.retries}")
        if self.transactional_id is not None:
            if not isinstance(self.transactional_id, str) or not self.transactional_id:
                raise ValueError("transactional_id must be a non-empty string or None")
            if not self.enable_idempotence:
                raise ValueError("transactional_id requires enable_idempotence=True")
        if self.transaction_timeout_ms < 1:
            raise ValueError("transaction_timeout_ms must be positive")
        if self.transaction_two_phase_commit_enable and self.transactional_id is None:
            raise ValueError("transaction_two_phase_commit_enable needs a transactional_id")
        if self.enable_idempotence:
            if self.acks != -1:
                raise ValueError("enable_idempotence requires acks='all'")
            if self.max_in_flight_requests_per_connection > 5:
                raise ValueError("enable_idempotence requires max_in_flight_requests_per_connection <= 5")


@dataclass
class ConsumerConfig(ClientConfig):
    """The consumer's settings, on top of :class:`ClientConfig`'s.

    Settings:
        group_id: the consumer group (None: no group; ``assign()`` the partitions to read).
        group_instance_id: static membership: a restarted member with the same id keeps its
            partitions.
        enable_auto_commit: commit what was consumed every ``auto_commit_interval_ms``, on
            rebalances and on ``close()``.
        auto_commit_interval_ms: how often auto-commit commits.
        auto_offset_reset: where a partition without a committed offset starts:
            ``latest``, ``earliest``, or ``none`` (raise ``NoOffsetForPartitionError``).
        fetch_min_bytes: a fetch waits (up to ``fetch_max_wait_ms``) for this many bytes.
        fetch_max_bytes: the most bytes one fetch response brings.
        max_partition_fetch_bytes: the most bytes one fetch brings per partition.
        fetch_max_wait_ms: how long the broker may hold a fetch waiting for data.
        isolation_level: ``read_uncommitted``, or ``read_committed`` (records of aborted
            transactions left out, reads stop at the last stable offset).
        session_timeout_ms: a member not heard from for this long leaves the group.
        heartbeat_interval_ms: how often the member heartbeats (below the session timeout).
        max_poll_interval_ms: a member that does not poll for this long leaves the group.
        max_poll_records: the most records one ``poll`` returns.
        partition_assignment_strategy: classic protocol: assignor names in preference order
            (``range``, ``roundrobin``, ``sticky``, ``cooperative-sticky``).
        check_crcs: check each batch's CRC-32C.
        group_protocol: ``consumer`` (KIP-848, the broker assigns; classic where the broker
            lacks it) or ``classic`` (JoinGroup/SyncGroup).
        group_remote_assignor: consumer protocol: the broker's assignor by name (None: the
            broker's default).
        key_deserializer: turns a key's bytes into a value: ``fn(data)`` or ``fn(data,
            ctx)`` (None: keys stay bytes).
        value_deserializer: the same for values.
        interceptors: objects with ``on_consume(records)`` and ``on_commit(offsets)``
            (either may be left out), in order.
        error_cb: ``error_cb(exc)`` is told of lost brokers instead of ``poll`` raising
            (librdkafka's ``error_cb``).
    """

    group_id: str | None = None
    group_instance_id: str | None = None
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    auto_offset_reset: str = "latest"
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52428800
    max_partition_fetch_bytes: int = 1048576
    fetch_max_wait_ms: int = 500
    isolation_level: str = "read_uncommitted"
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    max_poll_records: int = 500
    # built-in names, or user assignors (classic protocol; kcodec.client.consumer.assignors)
    partition_assignment_strategy: str | list[Any] = "range,cooperative-sticky"
    check_crcs: bool = True
    # "consumer" (KIP-848, broker-side assignment; classic where the broker lacks it) or
    # "classic" (JoinGroup/SyncGroup, the client-side assignors)
    group_protocol: str = "consumer"
    group_remote_assignor: str | None = None      # consumer protocol: the broker's assignor by name
    # user hooks (kcodec.client.consumer.hooks): callables or objects, or "module:attr"
    key_deserializer: Any = None
    value_deserializer: Any = None
    interceptors: Any = None
    error_cb: Any = field(default=None, repr=False)   # error_cb(exc): brokers lost, as librdkafka

    def _validate(self) -> None:
        from kcodec.client.consumer.assignors import user_assignor
        from kcodec.client.consumer.hooks import ConsumerHooks

        for name in ("group_id", "group_instance_id"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, str) or not v):
                raise ValueError(f"{name} must be a non-empty string or None, got {v!r}")

        self.auto_offset_reset = _word(self.auto_offset_reset)
        self.isolation_level = _word(self.isolation_level)
        self.group_protocol = _word(self.group_protocol)
        if self.auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError("auto_offset_reset must be earliest, latest or none, "
                             f"got {self.auto_offset_reset!r}")
        if self.isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError("isolation_level must be read_uncommitted or read_committed, "
                             f"got {self.isolation_level!r}")
        s = self.partition_assignment_strategy
        given = [x.strip() for x in s.split(",")] if isinstance(s, str) else list(s)
        if not given:
            raise ValueError("partition_assignment_strategy: no assignor given")
        # built-in names as they are; anything else a user assignor (checked, wrapped)
        self.assignors = [user_assignor(a) for a in given]
        custom = [a.name for a in self.assignors if not isinstance(a, str)]
        chosen = [a if isinstance(a, str) else a.name for a in self.assignors]
        if len(set(chosen)) != len(chosen):
            raise ValueError(f"partition_assignment_strategy: an assignor named twice "
                             f"({', '.join(chosen)})")
        if custom and _word(self.group_protocol) == "consumer":
            raise ValueError(
                f"partition_assignment_strategy: the user assignor {custom[0]!r} runs in the "
                "classic group protocol, where the group's leader assigns; under "
                "group_protocol='consumer' (the default) the broker assigns "
                "(group_remote_assignor names the broker's assignor). Set "
                "group_protocol='classic' to use it")
        self.hooks = ConsumerHooks.build(self)
        if self.hooks is not None and self.hooks.interceptors is not None:
            self.interceptors = self.hooks.interceptors.items   # classes made once
        if custom:
            self.partition_assignment_strategy = [a if isinstance(a, str) else a.obj
                                                  for a in self.assignors]
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be lower than session_timeout_ms")
        if self.max_poll_records < 1:
            raise ValueError("max_poll_records must be at least 1")
        if self.fetch_max_bytes > self.receive_message_max_bytes - 512:
            # as librdkafka: room for the answer's headers around fetch_max_bytes of records
            raise ValueError(
                f"fetch_max_bytes ({self.fetch_max_bytes}) must be at most "
                f"receive_message_max_bytes - 512 ({self.receive_message_max_bytes - 512}): "
                "raise receive_message_max_bytes too, or fetch less")
        if self.error_cb is not None and not callable(self.error_cb):
            raise ValueError(f"error_cb must be a callable taking the error, got {self.error_cb!r}")
        if self.group_protocol not in ("classic", "consumer"):
            raise ValueError(f"group_protocol must be classic or consumer, got {self.group_protocol!r}")


@dataclass
class AdminConfig(ClientConfig):
    """The admin client's settings: :class:`ClientConfig`'s, nothing of its own."""
