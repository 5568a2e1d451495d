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
