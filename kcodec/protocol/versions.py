"""Version negotiation: pick the highest version both this library and a broker support."""

from __future__ import annotations

from typing import Any

from kcodec.errors import UnsupportedVersionError
from kcodec.protocol.messages_index import REQUESTS, RESPONSES

__all__ = ["supported_versions", "broker_versions", "pick_version", "negotiate",
           "first_version_with"]


def supported_versions(api_key: int, include_unstable: bool = False) -> tuple[int, int]:
    """``(min, max)`` versions of ``api_key`` this library encodes and decodes.

    The newest version of a few APIs is marked unstable in the specs; it is left out unless
    ``include_unstable``. Where the request and response specs give different ranges (the
    newest copies of a pair are not always from the same day), only the versions both
    define are supported: a request is no use without the response it brings back.
    """
    cls = REQUESTS[api_key]
    hi = cls.MAX_VERSION
    resp = RESPONSES.get(api_key)
    if resp is not None:
        hi = min(hi, resp.MAX_VERSION)
    if cls.LATEST_UNSTABLE and not include_unstable and cls.MIN_VERSION < hi == cls.MAX_VERSION:
        hi -= 1
    return cls.MIN_VERSION, hi


def first_version_with(cls: Any, field: str) -> int | None:
    """The first version of message class ``cls`` that has a field named ``field`` (at
    its top level or in any of its structs), or None: ``first_version_with(FetchRequest,
    "topic_id")`` is 13, where Fetch names topics by id (KIP-516)."""
    from kcodec.protocol._decl import parse_range

    firsts = [span[0] for c in (cls, *cls.STRUCTS.values()) for f in c.fields()
              if f.name == field and (span := parse_range(f.versions)) is not None]
    return min(firsts) if firsts else None


def broker_versions(api_versions_response: Any) -> dict[int, tuple[int, int]]:
    """``{api_key: (min, max)}`` from a decoded ApiVersionsResponse."""
    return {k.api_key: (k.min_version, k.max_version) for k in api_versions_response.api_keys}


def pick_version(api_key: int, broker: Any, *, max_version: int | None = None,
                 include_unstable: bool = False) -> int:
    """The highest version of ``api_key`` both sides support.

    ``broker`` is an ApiVersionsResponse or the dict from :func:`broker_versions`.
    Raises UnsupportedVersionError if the ranges do not overlap or the broker lacks the API.
    """
    ranges = broker if isinstance(broker, dict) else broker_versions(broker)
    if api_key not in REQUESTS:
        raise UnsupportedVersionError(f"API key {api_key} is not known to kcodec")
    name = REQUESTS[api_key].NAME
    if api_key not in ranges:
        raise UnsupportedVersionError(f"the broker does not support {name} (API key {api_key})")
    lo, hi = supported_versions(api_key, include_unstable)
    if max_version is not None:
        hi = min(hi, max_version)
    blo, bhi = ranges[api_key]
    best = min(hi, bhi)
    if best < max(lo, blo):
        raise UnsupportedVersionError(
            f"no common version of {name}: kcodec supports {lo}-{hi}, the broker {blo}-{bhi}")
    return best


def negotiate(broker: Any, include_unstable: bool = False) -> dict[int, int]:
    """``{api_key: version}`` for every API both sides support."""
    ranges = broker if isinstance(broker, dict) else broker_versions(broker)
    out = {}
    for key in REQUESTS:
        if key in ranges:
            try:
                out[key] = pick_version(key, ranges, include_unstable=include_unstable)
            except UnsupportedVersionError:
                pass
    return out
