"""The share consumer's configuration (Java's ShareConsumer properties in snake_case)."""

from __future__ import annotations

from dataclasses import dataclass

from kcodec.client.config import ClientConfig

__all__ = ["ShareConsumerConfig", "ACKNOWLEDGEMENT_MODES", "ACQUIRE_MODES"]

ACKNOWLEDGEMENT_MODES = ("implicit", "explicit")
#: KIP-1206: batch_optimized may return more records than asked for, to keep whole batches;
#: record_limit makes the broker acquire at most max_poll_records
ACQUIRE_MODES = ("batch_optimized", "record_limit")


@dataclass
class ShareConsumerConfig(ClientConfig):
    """The settings of ``ShareConsumer`` and ``AsyncShareConsumer``: every client's, and:

    Settings:
        group_id: the share group to join (required).
        share_acknowledgement_mode: ``implicit`` (a poll's records are accepted at the next
            poll or commit) or ``explicit`` (each record is given to ``acknowledge``).
        share_acquire_mode: ``batch_optimized`` (whole batches, fetched ahead) or
            ``record_limit`` (KIP-1206: the broker acquires at most ``max_poll_records``).
        max_poll_records: the most records one ``poll`` returns.
        fetch_min_bytes: a share fetch waits (up to ``fetch_max_wait_ms``) for this many
            bytes.
        fetch_max_bytes: the most bytes one share fetch response brings.
        fetch_max_wait_ms: how long the broker may hold a share fetch waiting for records.
        max_poll_interval_ms: a member whose application does not poll for this long
            leaves the group (the records it acquired go to the other members; fetched
            ones not yet polled are dropped) and joins again at its next poll.
        check_crcs: check each batch's CRC-32C.
    """

    group_id: str | None = None
    share_acknowledgement_mode: str = "implicit"
    share_acquire_mode: str = "batch_optimized"
    max_poll_records: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52428800
    fetch_max_wait_ms: int = 500
    max_poll_interval_ms: int = 300000
    check_crcs: bool = True

    def _validate(self) -> None:
        if not isinstance(self.group_id, str) or not self.group_id:
            raise ValueError(f"a share consumer needs a group_id (the share group to join), "
                             f"got {self.group_id!r}")
        mode = str(self.share_acknowledgement_mode).strip().lower()
        if mode not in ACKNOWLEDGEMENT_MODES:
            raise ValueError(f"share_acknowledgement_mode must be implicit or explicit, "
                             f"got {self.share_acknowledgement_mode!r}")
        self.share_acknowledgement_mode = mode
        acquire = str(self.share_acquire_mode).strip().lower().replace("-", "_")
        if acquire not in ACQUIRE_MODES:
            raise ValueError(f"share_acquire_mode must be batch_optimized or record_limit, "
                             f"got {self.share_acquire_mode!r}")
        self.share_acquire_mode = acquire
        for name in ("max_poll_records", "fetch_max_bytes", "max_poll_interval_ms"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        for name in ("fetch_min_bytes", "fetch_max_wait_ms"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
