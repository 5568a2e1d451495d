"""The client's adapter onto ``kcodec.protocol``: typed requests framed for a version.

The client builds its requests as the generated message classes (kcodec.client.net.requests)
with every field it knows; encoding for the negotiated version leaves out the fields that
version lacks (the message's ``for_version``), as franz-go's kmsg writes only the fields of
the version set on a request. Only those objects are taken: the API key is the request
class's (``API_KEY``), and anything else (a dict of field names) is a ``TypeError``.
Responses decode into the protocol's message objects.

What an answer may hold is bounded where its request says (``response_limits``): a Metadata
answer describes at most the topics asked for (all topics: ``METADATA_MAX_TOPICS``), and at
most ``METADATA_MAX_BROKERS`` brokers, ``METADATA_MAX_PARTITIONS`` partitions and
``METADATA_MAX_REPLICAS`` ids in each kind of replica list in all. A decoded element costs
10-30 times its bytes on the wire (a million empty topics, 26 MB, decoded to 229 MiB), so
the receive cap alone does not bound the decoded form; the count prefix past a limit is
refused before anything of that array is made.
"""

from __future__ import annotations

from typing import Any

from kcodec.errors import DecodeLimitError, KcodecError, ProtocolError, UnsupportedVersionError
from kcodec.protocol import REQUESTS, RESPONSES, ApiKey, Request
from kcodec.protocol import decode_response as _decode_response
from kcodec.protocol import encode_request as _encode_request

__all__ = ["encode_request", "check_request", "decode_response", "response_limits", "api_name",
           "METADATA_MAX_BROKERS", "METADATA_MAX_TOPICS", "METADATA_MAX_PARTITIONS",
           "METADATA_MAX_REPLICAS"]

METADATA_MAX_BROKERS = 10_000
METADATA_MAX_TOPICS = 250_000        # in an answer for every topic
METADATA_MAX_PARTITIONS = 1_000_000  # of all topics of one answer together
METADATA_MAX_REPLICAS = 4_000_000    # ids in all replica (isr, offline) lists together


def api_name(api_key: int) -> str:
    cls = REQUESTS.get(api_key)
    return cls.NAME[: -len("Request")] if cls is not None else f"API {api_key}"


def check_request(req: object) -> None:
    """A ``TypeError`` unless ``req`` is a request object (a dict of fields is not one)."""
    if not isinstance(req, Request):
        raise TypeError(f"a request is a kcodec.protocol request object (FetchRequest, "
                        f"...), not {type(req).__name__}")


def encode_request(req: Request[Any], version: int, correlation_id: int,
                   client_id: str | None) -> bytes:
    """A whole request frame (int32 size, header, body) of ``req`` at ``version``.

    The client fills every field it knows and sends at the version the broker speaks: a
    field that version lacks must be at its default for the encoder. Most requests are
    (only what a version has was filled), so they are encoded as they are; only one the
    encoder refuses is copied with the version's fields alone (``for_version``: a new
    object a struct, which on a Fetch or a Produce cost as much as its encoding)."""
    check_request(req)
    try:
        return _encode_request(req, version, correlation_id, client_id)
    except UnsupportedVersionError:
        return _encode_request(req.for_version(version), version, correlation_id, client_id)


def response_limits(req: Request[Any]) -> dict[str, int] | None:
    """The limits (``decode_struct``'s) of the answer to ``req`` (see the module
    docstring), or None."""
    if req.API_KEY != ApiKey.METADATA:
        return None
    topics = getattr(req, "topics", None)
    # no topics named: every topic (None), or none -- but an empty list is every topic at
    # v0, and the client asks for none only to learn the brokers
    return {"MetadataResponse.brokers": METADATA_MAX_BROKERS,
            "MetadataResponse.topics": len(topics) if topics else METADATA_MAX_TOPICS,
            "MetadataResponseTopic.partitions": METADATA_MAX_PARTITIONS,
            "MetadataResponsePartition.replica_nodes": METADATA_MAX_REPLICAS,
            "MetadataResponsePartition.isr_nodes": METADATA_MAX_REPLICAS,
            "MetadataResponsePartition.offline_replicas": METADATA_MAX_REPLICAS}


def decode_response(api_key: int, version: int, payload: Any,
                    limits: dict[str, int] | None = None) -> tuple[int, Any]:
    """(correlation_id, response) of one frame's payload; any decoding failure is a
    ProtocolError (``limits``: ``response_limits``; past one, no lenient retry)."""
    try:
        return _decode_response(payload, api_key, version, limits=limits)
    except ProtocolError:
        raise
    except KcodecError as exc:
        # the failure without its traceback: in the pure twin its frames hold what the
        # decode had made so far (copies of the frame's unknown tagged fields: up to the
        # frame's size), which must not stay alive through the second attempt
        err = _bare(exc)
    if isinstance(err, DecodeLimitError):
        raise ProtocolError(f"{RESPONSES[api_key].NAME} v{version} refused: {err} (a hostile or "
                            "broken broker; the client's limit on what one answer may "
                            "describe)") from err
    lenient = _lenient(api_key, version, payload)
    if lenient is not None:
        return lenient
    raise ProtocolError(f"undecodable {RESPONSES[api_key].NAME} v{version}: {err}") from err


def _bare(exc: BaseException) -> BaseException:
    """``exc`` and the exceptions it chains to, their tracebacks dropped."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = None
        if e.__cause__ is not None:
            _bare(e.__cause__)
        e = e.__context__
    return exc


def _lenient(api_key: int, version: int, payload: Any) -> tuple[int, Any] | None:
    """The response decoded with bytes left after it ignored, as Kafka's Java client does
    (librdkafka's mock cluster pads some flexible responses with a byte); None if it does
    not decode even so."""
    from kcodec.protocol import read_response_header
    from kcodec.protocol.engine import decode_struct

    try:
        hdr, pos = read_response_header(payload, api_key, version)
        return hdr.correlation_id, decode_struct(RESPONSES[api_key].plan(version), payload,
                                                 pos, False)[0]
    except KcodecError:
        return None
