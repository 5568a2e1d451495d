"""A share session with one broker (KIP-932): which partitions it holds, and its epoch.

The first ShareFetch (epoch 0) opens the session with the partitions it names; each later
request carries the next epoch (1, 2, ... wrapping to 1) and names only partitions to add
(or that carry acknowledgements) and those to forget. Epoch -1 closes it. When the broker
answers SHARE_SESSION_NOT_FOUND or INVALID_SHARE_SESSION_EPOCH the session starts over.
"""

from __future__ import annotations

from kcodec.client.structs import TopicPartition

__all__ = ["ShareSession", "FINAL_EPOCH"]

FINAL_EPOCH = -1


class ShareSession:
    def __init__(self, node: int) -> None:
        self.node = node
        self.epoch = 0
        self.parts: set[TopicPartition] = set()     # what the broker's session holds

    @property
    def open(self) -> bool:
        return self.epoch > 0

    def changes(self, wanted: set[TopicPartition]) -> tuple[set[TopicPartition], set[TopicPartition]]:
        """(partitions to add, partitions to forget) for a fetch of ``wanted``."""
        if not self.open:
            return set(wanted), set()
        return wanted - self.parts, self.parts - wanted

    def sent(self, added: set[TopicPartition], forgotten: set[TopicPartition]) -> None:
        """The broker took a request: its partitions and the next epoch."""
        if not self.open:
            self.parts = set(added)
        else:
            self.parts = (self.parts | added) - forgotten
        self.epoch = self.epoch + 1 if 0 <= self.epoch < 0x7FFFFFFF else 1

    def reset(self) -> None:
        self.epoch = 0
        self.parts = set()
