"""API dispatch: one handler per API key, chosen on the key and checked on the version.

``dispatch(node, request)`` runs in a handler thread. It answers as Kafka does:

* an unknown API key, a version outside the advertised range (except ApiVersions), or a
  body that does not decode: the connection is closed; so is a request of more than
  ``node.max_request_items`` (MAX_REQUEST_ITEMS) array elements and tagged fields
  together, MAX_UNAUTHENTICATED_ITEMS before SASL authentication, refused at the count
  before anything is decoded (a struct has at most 1024 tagged fields in any case);
* ApiVersions at a version the broker does not know: a v0 answer with UNSUPPORTED_VERSION
  and the supported ranges, so the client can retry with one it shares;
* otherwise the test hooks (:mod:`kcodec.broker.hooks`) see the request first, then the
  handler answers; the response is encoded at the request's version.

    registry.py         the table of API handlers and the versions the broker advertises
    meta.py             ApiVersions, Metadata (with optional auto-creation), DescribeCluster
    produce.py          Produce: validate, check producer sequences, append, answer
    fetch.py            Fetch: whole batches from the leaders' logs, long-poll, sessions
    fetch_sessions.py   the node's fetch session cache (KIP-227), as Kafka's FetchSessionCache
    offsets.py          ListOffsets, OffsetForLeaderEpoch and DeleteRecords
    topics.py           CreateTopics, DeleteTopics, CreatePartitions
    classic_groups.py   FindCoordinator and the classic group APIs, with the offset APIs
    consumer_groups.py  ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848)
    share.py            the share-group APIs (KIP-932) and the share-group offset admin APIs
    producers.py        InitProducerId: ids and epochs for idempotent and transactional producers
    txn.py              AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, markers
    txn_describe.py     ListTransactions and DescribeTransactions (KIP-664)
    configs.py          DescribeConfigs, AlterConfigs, IncrementalAlterConfigs
    quotas.py           DescribeClientQuotas and AlterClientQuotas (KIP-546)
    scram.py            DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554)
    acls.py             DescribeAcls, CreateAcls and DeleteAcls over the cluster's authorizer
    authz.py            what the handlers ask the authorizer (yes, with no authorizer)
    sasl.py             SaslHandshake and SaslAuthenticate, as the handler pool sees them
    telemetry.py        GetTelemetrySubscriptions and PushTelemetry (KIP-714)
    util.py             small helpers shared by the handlers
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from typing import Any

from kcodec.broker.apis import (  # noqa: F401
    acls,
    classic_groups,
    configs,
    consumer_groups,
    fetch,
    meta,
    offsets,
    produce,
    producers,
    quotas,
    sasl,
    scram,
    share,
    telemetry,
    topics,
    txn,
    txn_describe,
)
from kcodec.broker.apis.registry import HANDLERS, VERSIONS
from kcodec.broker.apis.util import quota_client
from kcodec.broker.config.quotas import FETCH, PRODUCE, REQUEST
from kcodec.broker.network.channel import CLOSE, NO_RESPONSE, Request
from kcodec.errors import KcodecError, UnsupportedVersionError
from kcodec.observe.log import debug_contexts
from kcodec.protocol import ApiVersionsResponse, decode_request, encode_response

__all__ = ["dispatch", "HANDLERS", "VERSIONS", "advertised_versions"]

log = logging.getLogger(__name__)
API_VERSIONS = 18
#: array elements and tagged fields one request may hold, after and before authentication:
#: what a request costs once decoded (an element of one byte becomes an object of fifty)
#: stays bounded whatever its size
MAX_REQUEST_ITEMS = 100_000
MAX_UNAUTHENTICATED_ITEMS = 1_000
# requests are traced at DEBUG when this logger is at DEBUG and KCODEC_DEBUG names no
# context or names protocol
_PROTOCOL = not debug_contexts(None) or "protocol" in debug_contexts(None)


def advertised_versions(node: Any) -> dict[int, tuple[int, int]]:
    """``{api_key: (min, max)}`` this node advertises (after the test caps)."""
    caps = node.cluster.version_caps
    out = {}
    for key, (lo, hi) in VERSIONS.items():
        if key in caps:
            hi = min(hi, caps[key])
        if hi >= lo:
            out[key] = (lo, hi)
    return out


def version_range(node: Any, api_key: int) -> tuple[int, int] | None:
    """``(min, max)`` of ``api_key`` as this node advertises it (after the test caps), or
    None when it does not: ``advertised_versions(node).get(api_key)`` without building the
    whole table, which every request asks for."""
    rng = VERSIONS.get(api_key)
    if rng is None:
        return None
    cap = node.cluster.version_caps.get(api_key)
    if cap is None or cap >= rng[1]:
        return rng
    return (rng[0], cap) if cap >= rng[0] else None


def _unsupported_api_versions(node: Any, req: Request) -> bytes:
    msg = ApiVersionsResponse(error_code=35, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in sorted(advertised_versions(node).items())])
    return encode_response(msg, 0, req.correlation_id)


def encode(req: Request, answer: Any) -> Any:
    if answer is CLOSE or answer is NO_RESPONSE or isinstance(answer, (bytes, str)):
        return answer
    try:
        return encode_response(answer, req.api_version, req.correlation_id)
    except UnsupportedVersionError:
        # one handler fills every field; the answer holds those of the request's version
        answer = answer.for_version(req.api_version)
        return encode_response(answer, req.api_version, req.correlation_id)


def _api_name(api_key: int) -> str:
    from kcodec.broker.metrics import api_name
    return api_name(api_key)


def dispatch(node: Any, req: Request) -> Any:
    rng = version_range(node, req.api_key)
    if rng is None:
        log.info("kcodec broker: closing %s: unknown API key %d", req.connection.peer, req.api_key)
        return CLOSE
    if not rng[0] <= req.api_version <= rng[1]:
        if req.api_key == API_VERSIONS:
            return _unsupported_api_versions(node, req)
        log.info("kcodec broker: closing %s: API %d v%d not supported", req.connection.peer,
                 req.api_key, req.api_version)
        return CLOSE
    try:
        # what follows the fields is ignored, as Kafka does (librdkafka sends some)
        req.header, req.body = decode_request(
            req.frame, trailing_ok=True,
            max_items=(getattr(node, "max_request_items", MAX_REQUEST_ITEMS)
                       if req.connection.authenticated else MAX_UNAUTHENTICATED_ITEMS))
    except (KcodecError, ValueError) as exc:
        log.info("kcodec broker: closing %s: bad request: %s", req.connection.peer, exc)
        return CLOSE
    req.connection.client_id = req.header.client_id
    cluster = node.cluster
    if cluster.recording:
        cluster.record_request(node, req)
    handler = HANDLERS[req.api_key]
    started = time.monotonic()
    if cluster.hooks.active:
        answer = cluster.hooks.run(node, req, lambda: handler(node, req))
    else:
        answer = handler(node, req)
    req.handler_s = time.monotonic() - started
    metrics = node.metrics
    if isinstance(answer, concurrent.futures.Future):
        out: concurrent.futures.Future = concurrent.futures.Future()

        def done(f: concurrent.futures.Future) -> None:
            try:
                result = f.result()
                metrics.answered(req.api_key, (time.monotonic() - req.arrived) * 1000, result)
                out.set_result(_throttled(cluster, req, result))
            except Exception:
                log.exception("kcodec broker: API %d failed", req.api_key)
                out.set_result(CLOSE)
        answer.add_done_callback(done)
        return out
    metrics.answered(req.api_key, (time.monotonic() - req.arrived) * 1000, answer)
    if _PROTOCOL and log.isEnabledFor(logging.DEBUG):
        log.debug("node %s: %s v%d cid %d from %s answered in %.1f ms", node.id,
                  _api_name(req.api_key), req.api_version, req.correlation_id, req.connection.peer,
                  (time.monotonic() - req.arrived) * 1000)
    return _throttled(cluster, req, answer)


#: the first versions whose clients wait out throttle_time_ms themselves (KIP-219):
#: Produce, Fetch, and the requests of the controller mutation quota (CreateTopics,
#: DeleteTopics, CreatePartitions)
_CLIENT_THROTTLES = {0: 6, 1: 8, 19: 3, 20: 2, 37: 1}


#: not throttled by request_percentage: what a client needs to connect and authenticate
_EXEMPT = {17, 18, 36}     # SaslHandshake, ApiVersions, SaslAuthenticate


def _throttled(cluster: Any, req: Request, answer: Any) -> Any:
    """The encoded answer, with the client's quotas applied (``kcodec.broker.config.quotas``):
    the byte rates to Produce and Fetch, request_percentage (the handler's time) to every
    request but those of ``_EXEMPT``, and the throttle the handler found (the controller
    mutation quota); over one, ``throttle_time_ms`` is set and the connection is held for
    the longest (after the answer, or before it for old versions), as Kafka does."""
    cq = cluster.client_quotas
    if not cq.quotas or req.api_key in _EXEMPT or not hasattr(answer, "throttle_time_ms"):
        return encode(req, answer)
    body = req.body
    if req.api_key == 1:
        state = getattr(body, "replica_state", None)
        replica = getattr(body, "replica_id", -1) if state is None else state.replica_id
        if replica is not None and replica >= 0:
            return encode(req, answer)    # a follower's fetch: not a client's
    user, client_id = quota_client(req)
    ms, out = req.quota_throttle_ms, None
    if req.api_key == 0:
        ms = cq.record(PRODUCE, user, client_id, req.size)
    elif req.api_key == 1:
        out = encode(req, answer)
        ms = cq.record(FETCH, user, client_id, len(out))
    # the handler's time in percent-seconds of one thread, as Kafka's request quota
    ms = max(ms, cq.record(REQUEST, user, client_id, req.handler_s * 100))
    if ms <= 0:
        return encode(req, answer) if out is None else out
    answer.throttle_time_ms = max(answer.throttle_time_ms or 0, ms)
    req.connection.throttle_s = ms / 1000
    req.connection.throttle_first = req.api_version < _CLIENT_THROTTLES.get(req.api_key, 0)
    return encode(req, answer)
