"""One owner per error fact: the client's error classes live in kcodec.client.errors, and
the group protocols' code sets come from the error table's flags."""

from __future__ import annotations

import inspect

import kcodec.client as client
import kcodec.client.errors as errors
from kcodec.errors import KcodecError
from kcodec.protocol import ErrorCode


def test_every_client_error_class_is_defined_in_client_errors() -> None:
    import kcodec.client.net.sasl
    import kcodec.client.producer.transactions
    import kcodec.client.share.facade  # noqa: F401

    def walk(cls: type) -> list[type]:
        return [cls] + [c for sub in cls.__subclasses__() for c in walk(sub)]
    elsewhere = [c for c in walk(KcodecError) if c.__module__.startswith("kcodec.client")
                 and c.__module__ != "kcodec.client.errors"]
    assert elsewhere == []
    for name in ("TransactionError", "ShareStateError", "SaslMechanismError"):
        assert getattr(client, name, getattr(errors, name)) is getattr(errors, name)


def test_group_code_sets_come_from_the_error_table() -> None:
    E = ErrorCode
    assert errors.COORDINATOR_CODES == {E.COORDINATOR_LOAD_IN_PROGRESS,
                                        E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR}
    assert errors.FENCED_CODES == {E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION,
                                   E.FENCED_MEMBER_EPOCH}
    assert errors.REJOIN_CODES == {E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID,
                                   E.REBALANCE_IN_PROGRESS, E.MEMBER_ID_REQUIRED}
    # no module of the client spells such a set out again
    import kcodec.client.consumer.classic_group as cg
    import kcodec.client.consumer.consumer_group as kg
    import kcodec.client.share.membership as sm
    for mod in (cg, kg, sm):
        src = inspect.getsource(mod)
        assert "frozenset((ErrorCode." not in src, mod.__name__
