"""The configuration names people already have, and what kcodec makes of them.

kcodec's settings are the Java client's property names in snake_case; dotted names
(``linger.ms``) are the same settings. Beyond those:

* ``ALIASES``: librdkafka's names for the same settings (confluent-kafka configs), taken
  as kcodec's, some with their values converted (kilobytes, librdkafka's offset-reset
  words, Java's assignor class names).
* ``POINTERS``: names of other clients (kafka-python, aiokafka, confluent-kafka, Java)
  that kcodec has no setting for, or calls differently: an unknown-setting error says
  what to do instead.

``advice(name, known)`` gives that hint for an unknown name: a pointer, else "did you
mean ...?" for a near name.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["ALIASES", "POINTERS", "normalize", "advice", "VALUES"]

# librdkafka's name -> kcodec's (both after ``normalize``)
ALIASES: dict[str, str] = {
    "metadata_broker_list": "bootstrap_servers",
    "queue_buffering_max_ms": "linger_ms",
    "queue_buffering_max_kbytes": "buffer_memory",        # value in KiB (see VALUES)
    "compression_codec": "compression_type",
    "max_in_flight": "max_in_flight_requests_per_connection",
    "request_required_acks": "acks",
    "message_timeout_ms": "delivery_timeout_ms",
    "message_max_bytes": "max_request_size",
    "fetch_wait_max_ms": "fetch_max_wait_ms",
    "fetch_message_max_bytes": "max_partition_fetch_bytes",
    "ssl_ca_location": "ssl_cafile",
    "ssl_certificate_location": "ssl_certfile",
    "ssl_key_location": "ssl_keyfile",
    "ssl_key_password": "ssl_password",
    "sasl_mechanisms": "sasl_mechanism",
}

_OFFSET_RESET = {"smallest": "earliest", "beginning": "earliest", "largest": "latest",
                 "end": "latest", "error": "none"}
_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.rangeassignor": "range",
    "org.apache.kafka.clients.consumer.roundrobinassignor": "roundrobin",
    "org.apache.kafka.clients.consumer.cooperativestickyassignor": "cooperative-sticky",
}


def _assignors(v: Any) -> Any:
    if not isinstance(v, str):
        return v
    return ",".join(_ASSIGNORS.get(x.strip().lower(), x.strip()) for x in v.split(","))


# (name as given, after normalize) -> its value in kcodec's terms
VALUES: dict[str, Callable[[Any], Any]] = {
    "queue_buffering_max_kbytes": lambda v: int(v) * 1024,
    "auto_offset_reset": lambda v: _OFFSET_RESET.get(v.lower(), v) if isinstance(v, str) else v,
    "partition_assignment_strategy": _assignors,
}

POINTERS: dict[str, str] = {
    # kafka-python and aiokafka
    "sasl_plain_username": "use sasl_username",
    "sasl_plain_password": "use sasl_password",
    "consumer_timeout_ms": "poll(timeout) returns after at most timeout seconds; iterating "
                           "the consumer waits for records",
    "api_version": "kcodec negotiates each API's version with the broker (ApiVersions): "
                   "leave it out",
    "api_version_auto_timeout_ms": "kcodec negotiates versions on connect: leave it out",
    "ssl_check_hostname": "use ssl_endpoint_identification_algorithm ('' turns the host "
                          "name check off)",
    "sasl_kerberos_service_name": "GSSAPI (Kerberos) is not supported: use PLAIN, SCRAM or "
                                  "OAUTHBEARER",
    "partitioner_class": "use partitioner (a callable, an object with partition(), or "
                         "'module:attr')",
    "default_offset_commit_callback": "pass callback= to commit_async()",
    "loop": "the asyncio clients use the running loop",
    "enable_incremental_fetch_sessions": "incremental fetch sessions are always used when "
                                         "the broker has them",
    # Java
    "sasl_jaas_config": "give sasl_username and sasl_password (or "
                        "sasl_oauth_token_provider) instead of a JAAS line",
    "ssl_truststore_location": "kcodec reads PEM files: use ssl_cafile",
    "ssl_keystore_location": "kcodec reads PEM files: use ssl_certfile and ssl_keyfile",
    "interceptor_classes": "use interceptors (a list of objects, classes or "
                           "'module:attr' names)",
    "client_dns_lookup": "kcodec resolves each address as given",
    # confluent-kafka (librdkafka)
    "enable_partition_eof": "poll() returns empty dicts at the end of a partition; compare "
                            "position() with highwater()",
    "queue_buffering_max_messages": "kcodec limits what is queued in bytes: buffer_memory",
    "on_delivery": "add a callback to each future: send(...).add_callback(fn)",
    "error_cb": "errors are raised by the call or the future they belong to",
}


def normalize(name: str) -> str:
    """A setting's name as kcodec spells it: dots and dashes become underscores."""
    return name.strip().replace(".", "_").replace("-", "_").lower()


def advice(name: str, known: Iterable[str]) -> str:
    """What to say about the unknown setting ``name`` (normalized): a pointer to kcodec's
    way, or the nearest known names, or nothing."""
    hint = POINTERS.get(name)
    if hint is not None:
        return hint
    near = difflib.get_close_matches(name, sorted(known), n=2, cutoff=0.8)
    return f"did you mean {' or '.join(near)}?" if near else ""
