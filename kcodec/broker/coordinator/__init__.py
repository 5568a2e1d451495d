"""Coordinators: the group coordinator (classic protocol) and producer ids / idempotence."""

from kcodec.broker.coordinator.classic_group import GroupCoordinator
from kcodec.broker.coordinator.producers import ProducerIds, ProducerState, SequenceError

__all__ = ["GroupCoordinator", "ProducerIds", "ProducerState", "SequenceError"]
