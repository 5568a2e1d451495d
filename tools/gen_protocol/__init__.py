"""The protocol generator: ``kcodec/protocol/messages/*.py`` and the type stub from Kafka's
JSON message specs. ``python -m tools.gen_protocol --help``."""
