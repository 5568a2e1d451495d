"""Client quotas as Kafka's DescribeClientQuotas / AlterClientQuotas see them (KIP-546):
entities of ``user`` and/or ``client-id`` (name None: the default entity), or ``ip`` alone,
each with quota values:

    user, client-id      producer_byte_rate (LONG), consumer_byte_rate (LONG),
                         request_percentage (DOUBLE), controller_mutation_rate (DOUBLE)
    ip                   connection_creation_rate (INT)

Kafka's checks and INVALID_REQUEST messages (ClientQuotaControlManager): entity types and
their combinations, values above 0, whole numbers for the integral keys. Kept in
``client_quotas.json`` of the data dir.

``producer_byte_rate`` and ``consumer_byte_rate`` are enforced as Kafka does (KIP-13,
KIP-219): a client's quota is the first of Kafka's eight levels that sets the key
(user + client-id, user + default client-id, user, default user + client-id, default user +
default client-id, default user, client-id, default client-id), each user and client-id
of a default level measured apart. The bytes of its Produce requests and of its Fetch
answers are measured over ``quota.window.num`` (11) windows of ``quota.window.size.seconds``
(1 s); above the bound the answer carries ``throttle_time_ms`` = (rate - bound) / bound x the
measured window (at most the whole span of the windows, kcodec's bound), and the connection reads nothing more for that long (answers of versions
before KIP-219, Produce < 6 and Fetch < 8, are held back for that long instead).
``request_percentage`` (KIP-124) is measured the same way, over the time the request
handler spends on each of the client's requests (in percent of one thread), for every
request but ApiVersions and the SASL ones; Kafka counts network thread time too.

``controller_mutation_rate`` (KIP-599) bounds the partition mutations of a client's
CreateTopics (partitions created), CreatePartitions (partitions added) and DeleteTopics
(partitions deleted), at the same levels. As Kafka, it is a token bucket, not the sampled
rate: it refills at the quota up to quota x ``controller.quota.window.num`` (11) x
``controller.quota.window.size.seconds`` (1 s) and starts full; a topic's mutations are let
through while the bucket is not below zero, even those that take it below, and the time
until it is back at zero (-tokens / quota) is the throttle time. Requests that can be
refused (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) get
THROTTLING_QUOTA_EXCEEDED for each topic that finds the bucket below zero, nothing counted
for it, and the answer carries the throttle time; older ones have every topic done and
counted, and are throttled as soon as the bucket is below zero (the connection held, and
before KIP-219's versions, CreateTopics < 3, DeleteTopics < 2, CreatePartitions < 1, the
answer too). ``validate_only`` requests count nothing.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence

__all__ = ["ClientQuotas", "QuotaError", "Entity", "PRODUCE", "FETCH", "REQUEST", "MUTATION"]

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
MUTATION = "controller_mutation_rate"

USER, CLIENT_ID, IP = "user", "client-id", "ip"
_USER_KEYS = {"producer_byte_rate": "LONG", "consumer_byte_rate": "LONG",
              "request_percentage": "DOUBLE", "controller_mutation_rate": "DOUBLE"}
_IP_KEYS = {"connection_creation_rate": "INT"}
_MAX = {"INT": (1 << 31) - 1, "LONG": float((1 << 63) - 1)}

#: an entity: sorted ((entity type, name or None), ...)
Entity = tuple[tuple[str, "str | None"], ...]


class QuotaError(ValueError):
    """A refused quota request (INVALID_REQUEST), with Kafka's message."""


def check_entity(entity: Sequence[tuple[str, str | None]]) -> Entity:
    """The entity, checked as Kafka checks it; its key is sorted by type."""
    if not entity:
        raise QuotaError("Invalid empty client quota entity")
    seen: dict[str, str | None] = {}
    for etype, name in entity:
        if etype in seen:
            raise QuotaError(f"Invalid client quota entity, duplicate entity entry {etype}")
        if etype not in (USER, CLIENT_ID, IP):
            raise QuotaError(f"Unhandled client quota entity type: {etype}")
        if name is not None and name == "":
            raise QuotaError(f"Empty {etype} not supported")
        seen[etype] = name
    if IP in seen and (USER in seen or CLIENT_ID in seen):
        raise QuotaError("Invalid quota entity combination, IP entity should not be combined "
                         "with User or ClientId")
    if IP in seen and seen[IP] is not None and not _valid_ip(seen[IP] or ""):
        raise QuotaError(f"{seen[IP]} is not a valid IP or resolvable host.")
    return tuple(sorted(seen.items()))


def _valid_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
        return True
    except OSError:
        return False


def check_value(entity: Entity, key: str, value: float) -> None:
    keys = _IP_KEYS if entity[0][0] == IP else _USER_KEYS
    type_ = keys.get(key)
    if type_ is None:
        raise QuotaError(f"Invalid configuration key {key}")
    if value <= 0.0:
        raise QuotaError(f"Quota {key} must be greater than 0")
    if type_ in _MAX:
        if value > _MAX[type_]:
            an = "an" if type_ == "INT" else "a"
            raise QuotaError(f"Proposed value for {key} is too large for {an} {type_}.")
        if abs(value % 1.0) > 1e-6:
            raise QuotaError(f"{key} cannot be a fractional value.")


class ClientQuotas:
    """entity -> {quota key: value}, kept in the data dir."""

    def __init__(self, data_dir: str | None, window_num: int = 11,
                 window_s: float = 1.0, mutation_window_num: int = 11,
                 mutation_window_s: float = 1.0) -> None:
        self.lock = threading.Lock()
        self.quotas: dict[Entity, dict[str, float]] = {}
        self.window_num, self.window_s = max(window_num, 2), window_s
        #: the controller mutation quota's bucket holds this many seconds of its rate
        self.mutation_burst_s = max(mutation_window_num, 1) * mutation_window_s
        #: (quota key, user, client-id) -> samples [start (monotonic s), bytes]
        self._rates: dict[tuple[str, str, str], deque[list[float]]] = {}
        #: (user, client-id) -> the mutation bucket [tokens, last refill (monotonic s)]
        self._buckets: dict[tuple[str, str], list[float]] = {}
        self._path = None if data_dir is None else os.path.join(data_dir, "client_quotas.json")
        if self._path and os.path.exists(self._path):
            with open(self._path, encoding="utf-8") as f:
                for item in json.load(f):
                    entity = tuple((t, n) for t, n in item["entity"])
                    self.quotas[entity] = {k: float(v) for k, v in item["values"].items()}

    def alter(self, changes: Mapping[Entity, Mapping[str, float | None]]) -> None:
        """Set (a value) or remove (None) quota keys of checked entities."""
        with self.lock:
            for entity, ops in changes.items():
                values = self.quotas.setdefault(entity, {})
                for k, v in ops.items():
                    if v is None:
                        values.pop(k, None)
                    else:
                        values[k] = v
                if not values:
                    del self.quotas[entity]
            self._save()

    def describe(self, components: Sequence[tuple[str, int, str | None]], strict: bool
                 ) -> list[tuple[Entity, dict[str, float]]]:
        """The entities that match every (entity type, match type 0 exact / 1 default /
        2 any, name) component; ``strict``: no other entity types."""
        types = [c[0] for c in components]
        for t in types:
            if types.count(t) > 1:
                raise QuotaError(f"Entity type {t} cannot appear more than once in the filter.")
            if t not in (USER, CLIENT_ID, IP):
                raise QuotaError(f"Unknown entity type: {t}")
        if IP in types and (USER in types or CLIENT_ID in types):
            raise QuotaError("Invalid entity filter component combination, IP filter component "
                             "should not be used with user or clientId filter component.")
        for t, match_type, name in components:
            if match_type not in (0, 1, 2):
                raise QuotaError(f"Unknown match type {match_type}")
            if match_type == 0 and name is None:
                raise QuotaError(f"A match of type exact for {t} needs a name")
        out = []
        with self.lock:
            for entity, values in sorted(self.quotas.items(), key=lambda kv: repr(kv[0])):
                names = dict(entity)
                if strict and set(names) != set(types):
                    continue
                ok = True
                for t, match_type, name in components:
                    if t not in names:
                        ok = False
                    elif match_type == 0 and names[t] != name:
                        ok = False
                    elif match_type == 1 and names[t] is not None:
                        ok = False
                if ok:
                    out.append((entity, dict(values)))
        return out

    def bound(self, key: str, user: str, client_id: str) -> tuple[float, tuple[str, str]] | None:
        """The quota ``key`` of a client (Kafka's levels, first set wins) and what its rate is
        measured under: (user or "", client-id or "")."""
        levels: list[tuple[Entity, tuple[str, str]]] = [
            (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
            (((CLIENT_ID, None), (USER, user)), (user, client_id)),
            (((USER, user),), (user, "")),
            (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
            (((CLIENT_ID, None), (USER, None)), (user, client_id)),
            (((USER, None),), (user, "")),
            (((CLIENT_ID, client_id),), ("", client_id)),
            (((CLIENT_ID, None),), ("", client_id)),
        ]
        with self.lock:
            for entity, measured in levels:
                value = self.quotas.get(entity, {}).get(key)
                if value is not None:
                    return value, measured
        return None

    def record(self, key: str, user: str, client_id: str, nbytes: float,
               now: float | None = None) -> int:
        """Record ``nbytes`` (bytes, or percent-seconds for request_percentage) against the
        client's ``key`` quota; the throttle time (ms) its answer gets, 0 within the quota
        (or with none)."""
        if not self.quotas:
            return 0
        found = self.bound(key, user, client_id)
        if found is None:
            return 0
        bound, measured = found
        now = time.monotonic() if now is None else now
        span = self.window_num * self.window_s
        with self.lock:
            samples = self._rates.setdefault((key, *measured), deque())
            while samples and samples[0][0] <= now - span:
                samples.popleft()
            if not samples or now - samples[-1][0] >= self.window_s:
                samples.append([now, 0.0])
            samples[-1][1] += nbytes
            total = sum(n for _, n in samples)
            elapsed = now - samples[0][0]
            full = int(elapsed / self.window_s)
            if full < self.window_num - 1:       # as Kafka's Rate: at least N-1 windows
                elapsed += (self.window_num - 1 - full) * self.window_s
        rate = total / elapsed
        if rate <= bound:
            return 0
        return int(min((rate - bound) / bound * elapsed, span) * 1000)

    def mutate(self, user: str, client_id: str, partitions: int, strict: bool,
               now: float | None = None) -> tuple[bool, int]:
        """``partitions`` mutations of one topic against the client's controller mutation
        quota: (let through, throttle time in ms). ``strict`` (a version that can be told
        THROTTLING_QUOTA_EXCEEDED): refused, and nothing counted, if the bucket is already
        below zero. Otherwise counted, and throttled if that leaves it below zero."""
        found = self.bound(MUTATION, user, client_id) if self.quotas else None
        if found is None:
            return True, 0
        bound, measured = found
        burst = bound * self.mutation_burst_s
        now = time.monotonic() if now is None else now
        with self.lock:
            bucket = self._buckets.get(measured)
            if bucket is None:       # full, as Kafka's first refill makes it
                bucket = self._buckets[measured] = [burst, now]
            bucket[0] = min(burst, bucket[0] + (now - bucket[1]) * bound)
            bucket[1] = now
            if strict and bucket[0] < 0:
                return False, round(-bucket[0] / bound * 1000)
            bucket[0] = min(burst, bucket[0] - partitions)
            tokens = bucket[0]
        return True, (round(-tokens / bound * 1000) if tokens < 0 and not strict else 0)

    def _save(self) -> None:
        if self._path is None:
            return
        tmp = self._path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump([{"entity": [list(e) for e in entity], "values": values}
                       for entity, values in self.quotas.items()], f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
