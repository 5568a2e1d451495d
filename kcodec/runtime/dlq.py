"""The dead-letter topic: a failed message as it was, plus headers saying where it came from
and why it failed.

Headers added (values UTF-8 text): ``kcodec.dlq.topic``, ``kcodec.dlq.partition``,
``kcodec.dlq.offset``, ``kcodec.dlq.timestamp``, ``kcodec.dlq.attempts``, ``kcodec.dlq.error``.
The original key, value, headers and timestamp are kept.
"""

from __future__ import annotations

import logging
from typing import Any

from kcodec.runtime.message import Message

__all__ = ["DeadLetters", "HEADER_PREFIX", "dlq_headers"]

log = logging.getLogger(__name__)
HEADER_PREFIX = "kcodec.dlq."


def dlq_headers(m: Message) -> list[tuple[str, bytes]]:
    extra = [("topic", m.topic), ("partition", str(m.partition)), ("offset", str(m.offset)),
             ("timestamp", str(m.timestamp)), ("attempts", str(m.attempts)),
             ("error", m.error or "")]
    return list(m.headers or []) + [(HEADER_PREFIX + k, v.encode("utf-8", "replace"))
                                    for k, v in extra]


class DeadLetters:
    """A producer for the dead-letter topic, made on first use."""

    def __init__(self, topic: str, producer_config: dict[str, Any], timeout: float = 30.0) -> None:
        self.topic = topic
        self.config = producer_config
        self.timeout = timeout
        self._producer: Any = None
        self.sent = 0

    def send(self, messages: list[Message]) -> str | None:
        """Write ``messages`` and wait for the broker; the error's text, or None."""
        if not messages:
            return None
        from kcodec.client import Producer
        from kcodec.errors import KcodecError

        try:
            if self._producer is None:
                self._producer = Producer(**self.config)
            futs = [self._producer.send(self.topic, value=m.value, key=m.key,
                                        headers=dlq_headers(m),
                                        timestamp=m.timestamp if m.timestamp >= 0 else None)
                    for m in messages]
            self._producer.flush(self.timeout)
            for f in futs:
                f.result(self.timeout)
        except (KcodecError, OSError, ValueError) as exc:
            log.error("dead-letter topic %r: %d messages not written (%s); they stay in the "
                      "failed queue (kcodec ctl requeue)", self.topic, len(messages), exc)
            return f"{type(exc).__name__}: {exc}"
        self.sent += len(messages)
        return None

    def close(self) -> None:
        if self._producer is not None:
            try:
                self._producer.close(5)
            except Exception:   # closing on the way out: nothing more to do about it
                pass
