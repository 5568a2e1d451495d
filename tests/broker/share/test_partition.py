"""A share partition's in-flight window (kcodec.broker.share.partition), without a network:
acquisition, acknowledgement types, locks, the delivery count limit, strict record
limits, control batches, and the snapshot that survives a restart."""

from __future__ import annotations

import pytest

from kcodec.broker.share.configs import ShareConfigError, ShareConfigs, parse_duration_ms
from kcodec.broker.share.partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    SharePartition,
)
from kcodec.broker.share.store import ShareStateStore
from kcodec.protocol import ErrorCode

LIMIT = 5


def fresh(*batches: tuple[int, int], member: str = "m", budget: int = 1000,
          strict: bool = False) -> tuple[SharePartition, list]:
    sp = SharePartition("g", "t", 0, batches[0][0])
    ranges, _ = sp.acquire_new(member, [(f, last, False) for f, last in batches], budget,
                               strict, deadline=100.0)
    return sp, ranges


def test_new_records_are_acquired_whole_batches_with_delivery_count_one() -> None:
    sp, ranges = fresh((0, 9), (10, 19))
    assert ranges == [(0, 9, 1), (10, 19, 1)]
    assert (sp.start, sp.end, sp.acquired) == (0, 20, 20)
    assert sp.state_of(5) == (ACQUIRED, 1)


def test_accept_moves_the_start_offset_and_out_of_order_acks_wait() -> None:
    sp, _ = fresh((0, 9), (10, 19))
    assert sp.acknowledge("m", 10, 19, [ACCEPT], LIMIT, 0) == 0
    assert sp.start == 0                      # 0-9 still acquired
    assert sp.acknowledge("m", 0, 9, [ACCEPT], LIMIT, 0) == 0
    assert (sp.start, sp.in_flight(), sp.acquired) == (20, 0, 0)


def test_only_the_owner_may_acknowledge_and_only_acquired_records() -> None:
    sp, _ = fresh((0, 9))
    assert sp.acknowledge("other", 0, 9, [ACCEPT], LIMIT, 0) == ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("m", 0, 4, [ACCEPT], LIMIT, 0) == 0
    # acknowledged already: nothing changes, the rest of the batch is untouched
    assert sp.acknowledge("m", 3, 7, [ACCEPT], LIMIT, 0) == ErrorCode.INVALID_RECORD_STATE
    assert sp.state_of(6) == (ACQUIRED, 1)
    assert sp.acknowledge("m", 8, 12, [ACCEPT], LIMIT, 0) == ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("m", 5, 9, [ACCEPT, ACCEPT], LIMIT, 0) == ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("m", 5, 9, [9], LIMIT, 0) == ErrorCode.INVALID_REQUEST


def test_release_redelivers_with_a_higher_count_and_reject_never() -> None:
    sp, _ = fresh((0, 9))
    types = [ACCEPT] * 3 + [RELEASE] * 3 + [REJECT] * 2 + [GAP] * 2
    assert sp.acknowledge("m", 0, 9, types, LIMIT, 0) == 0
    assert [sp.state_of(o)[0] for o in (0, 3, 6, 8)] == [ACKNOWLEDGED, AVAILABLE, ARCHIVED,
                                                         ACKNOWLEDGED]
    assert sp.start == 3
    again = sp.acquire_available("n", 100, False, 100.0)
    assert again == [(3, 5, 2)]               # the released ones only, count 2
    assert sp.acknowledge("n", 3, 5, [ACCEPT], LIMIT, 0) == 0
    assert sp.start == 10 and sp.acquire_available("n", 100, False, 100.0) == []


def test_lock_timeout_releases_and_the_delivery_limit_archives() -> None:
    sp, _ = fresh((0, 3))                                      # delivery 1, lock until 100
    assert sp.expire_locks(now=99.0, limit=3) is False         # not yet due
    assert sp.expire_locks(now=101.0, limit=3) is True
    assert sp.state_of(0) == (AVAILABLE, 1) and sp.acquired == 0
    assert sp.acquire_available("m", 100, False, 200.0) == [(0, 3, 2)]
    assert sp.expire_locks(now=101.0, limit=3) is False        # the new lock holds
    assert sp.acknowledge("m", 0, 3, [RELEASE], 3, 0) == 0
    assert sp.acquire_available("m", 100, False, 300.0) == [(0, 3, 3)]
    assert sp.expire_locks(now=301.0, limit=3) is True
    # delivered 3 times = the limit: archived, the start offset moves past
    assert sp.state_of(0) is None and sp.start == 4 and sp.acquired == 0


def test_renew_extends_the_lock_and_keeps_the_record_acquired() -> None:
    sp, _ = fresh((0, 1))
    assert sp.acknowledge("m", 0, 1, [RENEW], LIMIT, renew_deadline=500.0) == 0
    assert sp.expire_locks(now=200.0, limit=LIMIT) is False
    assert sp.state_of(0) == (ACQUIRED, 1)
    assert sp.acknowledge("m", 0, 1, [ACCEPT], LIMIT, 0) == 0 and sp.start == 2


def test_strict_record_limit_splits_a_batch() -> None:
    sp, ranges = fresh((0, 99), budget=7, strict=True)
    assert ranges == [(0, 6, 1)] and sp.acquired == 7 and sp.end == 100
    assert sp.acquire_available("n", 5, True, 100.0) == [(7, 11, 1)]
    # batch-optimised: whole runs, whatever the budget
    assert sp.acquire_available("n", 1, False, 100.0) == [(12, 99, 1)]


def test_control_batches_are_archived_never_delivered() -> None:
    sp = SharePartition("g", "t", 0, 0)
    ranges, taken = sp.acquire_new("m", [(0, 4, False), (5, 5, True), (6, 9, False)], 100,
                                   False, 100.0)
    assert ranges == [(0, 4, 1), (6, 9, 1)] and taken == [0, 2]
    assert sp.acknowledge("m", 0, 9, [ACCEPT], LIMIT, 0) == ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("m", 0, 4, [ACCEPT], LIMIT, 0) == 0
    assert sp.start == 6


def test_aborted_transactions_are_told_from_the_batches_in_log_order() -> None:
    """A read_committed group's filter, from a read that starts inside an aborted
    transaction: its producer's batches are aborted until its marker; another producer's
    and non-transactional ones are not; a later aborted transaction of the same producer
    starts at its own first offset."""
    from kcodec.broker.share.manager import _Aborted

    aborted = _Aborted([(9, 40), (7, 5)])
    assert aborted(10, False, 7, True)                  # inside 7's aborted transaction
    assert not aborted(12, False, 8, True)              # another producer's
    assert not aborted(14, False, 7, False)             # not transactional
    assert not aborted(20, True, 7, True)               # the marker ends it
    assert not aborted(25, False, 7, True)              # 7's next transaction: committed
    assert not aborted(30, True, 7, True)
    assert not aborted(35, False, 9, True)              # 9's aborted one starts at 40
    assert aborted(40, False, 9, True)
    assert not aborted(50, True, 9, True)
    assert not aborted(51, False, 9, True)


def test_member_release_and_log_start_moving_past() -> None:
    sp, _ = fresh((0, 9), member="a")
    sp.acquire_new("b", [(10, 19, False)], 100, False, 100.0)
    assert sp.release_member("a", LIMIT) and sp.state_of(0) == (AVAILABLE, 1)
    assert sp.state_of(10) == (ACQUIRED, 1)
    sp.archive_below(15)
    assert sp.start == 15 and sp.acquired == 5
    sp.archive_below(50)
    assert (sp.start, sp.end, sp.acquired) == (50, 50, 0)


def test_snapshot_restores_states_and_counts_but_no_locks() -> None:
    sp, _ = fresh((0, 9))
    sp.acknowledge("m", 0, 9, [ACCEPT, RELEASE] * 5, LIMIT, 0)
    sp.acquire_new("m", [(10, 14, False)], 100, False, 100.0)
    snap = sp.snapshot()
    back = SharePartition.restore("g", "t", 0, snap)
    assert (back.start, back.end, back.acquired) == (1, 15, 0)
    assert back.state_of(1) == (AVAILABLE, 1) and back.state_of(2) == (ACKNOWLEDGED, 1)
    assert back.state_of(12) == (AVAILABLE, 1)        # was acquired: back to available
    assert back.snapshot() == snap


def test_the_store_keeps_the_last_line_and_skips_a_torn_one(tmp_path) -> None:
    st = ShareStateStore(str(tmp_path))
    st.put_partition("g", "t", "id", 0, {"s": 5, "r": []})
    st.put_partition("g", "t", "id", 0, {"s": 9, "r": [[9, 9, 2, 1]]})
    st.put_partition("g", "u", "id2", 1, {"s": 1, "r": []})
    st.delete_partition("g", "u", 1)
    st.put_configs("g", {"share.delivery.count.limit": "3"})
    st.close()
    with open(tmp_path / "share_groups.jsonl", "a") as f:
        f.write('{"k": "p", "g": "g", "t": "t", "p": 0, "s": 1')   # a crash mid-line
    again = ShareStateStore(str(tmp_path))
    assert again.partitions[("g", "t", 0)]["s"] == 9 and ("g", "u", 1) not in again.partitions
    assert again.configs == {"g": {"share.delivery.count.limit": "3"}}
    again.close()


def test_group_configs_are_checked_against_the_broker_bounds() -> None:
    store = ShareStateStore(None)
    cfg = ShareConfigs({"group.share.min.record.lock.duration.ms": 1000}, store)
    cfg.set("g", {"share.record.lock.duration.ms": "1000", "share.auto.offset.reset":
                  "by_duration:PT1H"})
    assert cfg.get_int("g", "share.record.lock.duration.ms") == 1000
    assert cfg.get("g", "share.delivery.count.limit") == "5"
    with pytest.raises(ShareConfigError, match="between 2 and 10, not 11"):
        cfg.set("g", {"share.delivery.count.limit": "11"})
    with pytest.raises(ShareConfigError, match="unknown group config 'share.nope'"):
        cfg.set("g", {"share.nope": "1"})
    with pytest.raises(ShareConfigError, match="latest, earliest or by_duration"):
        cfg.set("g", {"share.auto.offset.reset": "smallest"})
    cfg.set("g", {"share.record.lock.duration.ms": None})
    assert cfg.get_int("g", "share.record.lock.duration.ms") == 30000
    with pytest.raises(ValueError, match="unknown share-group broker config"):
        ShareConfigs({"group.share.nope": 1}, store)
    assert parse_duration_ms("P1DT2H3M4.5S") == ((24 + 2) * 60 + 3) * 60000 + 4500
    with pytest.raises(ShareConfigError, match="not an ISO-8601 duration"):
        parse_duration_ms("-PT1H")


def test_the_store_compacts_while_running(tmp_path, monkeypatch) -> None:
    import kcodec.broker.share.store as store

    monkeypatch.setattr(store, "COMPACT_AFTER", 50)
    st = ShareStateStore(str(tmp_path))
    for i in range(500):
        st.put_partition("g", "t", "id", i % 3, {"s": i, "r": []})
    lines = (tmp_path / "share_groups.jsonl").read_text().splitlines()
    assert len(lines) <= 60                       # not 500
    st.close()
    again = ShareStateStore(str(tmp_path))
    assert {k: v["s"] for k, v in again.partitions.items()} == \
        {("g", "t", 0): 498, ("g", "t", 1): 499, ("g", "t", 2): 497}
    again.close()
