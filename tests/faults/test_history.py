"""The history checker of the fault tests finds what it claims to find: each check is fed
a history with exactly that fault, and a clean history passes (fast; no network)."""

from __future__ import annotations

import json

import pytest

from tests.support import history


def _producer(placed: dict[int, tuple[int, int]], unacked: tuple[int, ...] = ()) -> list[dict]:
    out: list[dict] = []
    for i, (p, off) in sorted(placed.items()):
        out += [{"send": i, "p": p, "t": i}, {"ack": i, "p": p, "off": off, "t": i + 0.5}]
    for i in unacked:
        out += [{"send": i, "p": 0, "t": i}, {"fail": i, "p": 0, "err": "timed out", "t": i + 1}]
    return out


def _log(rows: list[tuple[int, int, int]]) -> list[dict]:
    return [{"p": p, "off": off, "id": i} for p, off, i in rows]


# ids 0..5: even ids to partition 0, odd ids to partition 1, in order
PLACED = {0: (0, 0), 1: (1, 0), 2: (0, 1), 3: (1, 1), 4: (0, 2), 5: (1, 2)}
LOG = _log([(p, off, i) for i, (p, off) in PLACED.items()])


def _member(*events: dict, start: float = 100.0) -> list[dict]:
    return [dict(e, t=start + n) for n, e in enumerate(events)]


def _consumed_all() -> dict[str, list[dict]]:
    a = _member({"assigned": [0]}, {"rec": 0, "p": 0, "off": 0}, {"rec": 2, "p": 0, "off": 1},
                {"rec": 4, "p": 0, "off": 2}, {"commit": {"0": 3}})
    b = _member({"assigned": [1]}, {"rec": 1, "p": 1, "off": 0}, {"rec": 3, "p": 1, "off": 1},
                {"rec": 5, "p": 1, "off": 2}, {"commit": {"1": 3}}, start=100.5)
    return {"a": a, "b": b}


FINAL = [{"p": 0, "off": 3}, {"p": 1, "off": 3}]


def test_a_clean_history_passes_and_is_counted() -> None:
    r = history.check(_producer(PLACED, unacked=(9,)), LOG, _consumed_all(), FINAL)
    assert r.violations == {}
    assert (r.sent, r.acked, r.failed, r.in_log, r.delivered, r.commits) == (7, 6, 1, 6, 6, 2)
    assert "0 lost" in r.figures and "0 commits backwards" in r.figures


def test_an_acknowledged_record_missing_from_the_log_is_lost() -> None:
    r = history.check(_producer(PLACED), [e for e in LOG if e["id"] != 3], _consumed_all(), FINAL)
    assert r.lost == [3]
    # an unacknowledged record missing from the log is not lost (it may never have arrived)
    r = history.check(_producer(PLACED, unacked=(9,)), LOG, _consumed_all(), FINAL)
    assert r.lost == []


def test_an_acknowledged_record_elsewhere_than_its_ack_said_is_misplaced() -> None:
    placed = dict(PLACED)
    placed[4] = (0, 7)
    r = history.check(_producer(placed), LOG, _consumed_all(), FINAL)
    assert r.misplaced == [(4, (0, 7), [(0, 2)])]


def test_a_record_written_twice_is_duplicated() -> None:
    log = LOG + _log([(0, 3, 2)])
    r = history.check(_producer(PLACED), log, {}, None)
    assert r.duplicated == [2]


def test_records_of_a_partition_out_of_send_order_are_reordered() -> None:
    log = _log([(0, 0, 0), (0, 1, 4), (0, 2, 2), (1, 0, 1), (1, 1, 3), (1, 2, 5)])
    placed = {0: (0, 0), 4: (0, 1), 2: (0, 2), 1: (1, 0), 3: (1, 1), 5: (1, 2)}
    r = history.check(_producer(placed), log, {}, None)
    assert r.reordered == [(0, 2, 2)]


def test_a_record_below_the_committed_offset_that_nobody_received_is_unconsumed() -> None:
    members = _consumed_all()
    members["a"] = [e for e in members["a"] if e.get("rec") != 2]
    r = history.check(_producer(PLACED), LOG, members, FINAL)
    assert r.unconsumed == [(0, 1)]


def test_redelivery_is_allowed_and_starting_below_the_committed_offset_is_not() -> None:
    # member a dies before committing; b takes partition 0 over and reads it again
    a = _member({"assigned": [0]}, {"rec": 0, "p": 0, "off": 0}, {"rec": 2, "p": 0, "off": 1})
    b = _member({"assigned": [0, 1]}, {"rec": 0, "p": 0, "off": 0}, {"rec": 2, "p": 0, "off": 1},
                {"rec": 4, "p": 0, "off": 2}, {"rec": 1, "p": 1, "off": 0},
                {"rec": 3, "p": 1, "off": 1}, {"rec": 5, "p": 1, "off": 2},
                {"commit": {"0": 3, "1": 3}}, start=200)
    r = history.check(_producer(PLACED), LOG, {"a": a, "b": b}, FINAL)
    assert r.violations == {} and r.redelivered == 2
    # ... but a member given the partition after the group committed 3 must start there
    late = _member({"assigned": [0]}, {"rec": 2, "p": 0, "off": 1}, start=300)
    r = history.check(_producer(PLACED), LOG, {"a": a, "b": b, "c": late}, FINAL)
    assert r.below_committed == [("c", 0, 1, 3)]
    # a zombie (given the partition before that commit) may still hand out what it had
    zombie = _member({"assigned": [0]}, {"rec": 0, "p": 0, "off": 0}, start=150) + \
        _member({"rec": 2, "p": 0, "off": 1}, start=300)
    r = history.check(_producer(PLACED), LOG, {"a": a, "b": b, "z": zombie}, FINAL,
                      faults=[(160.0, "z")])     # a zombie is a member the run faulted
    assert r.violations == {} and r.redelivered == 4


def test_a_member_going_back_without_a_new_assignment_is_out_of_order() -> None:
    a = _member({"assigned": [0]}, {"rec": 0, "p": 0, "off": 0}, {"rec": 2, "p": 0, "off": 1},
                {"rec": 2, "p": 0, "off": 1}, {"rec": 4, "p": 0, "off": 2})
    r = history.check(_producer(PLACED), LOG, {"a": a}, None)
    assert r.out_of_order == [("a", 0, 1, 1)]
    # the same after a reassignment is a restart from the committed offset, not disorder
    a = _member({"assigned": [0]}, {"rec": 0, "p": 0, "off": 0}, {"rec": 2, "p": 0, "off": 1},
                {"revoked": [0]}, {"assigned": [0]}, {"rec": 2, "p": 0, "off": 1})
    r = history.check(_producer(PLACED), LOG, {"a": a}, None)
    assert r.out_of_order == [] and r.redelivered == 1


def test_a_commit_lower_than_an_earlier_one_goes_backwards() -> None:
    members = _consumed_all()
    members["b"].append({"commit": {"0": 1}, "t": 500.0})
    r = history.check(_producer(PLACED), LOG, members, FINAL)
    assert r.commits_backwards == [(0, 3, 1)]
    assert set(r.violations) == {"commits_backwards"}


def test_a_history_cut_by_sigkill_loses_only_its_last_line(tmp_path) -> None:
    path = tmp_path / "member.jsonl"
    path.write_text(json.dumps({"assigned": [0], "t": 1}) + "\n"
                    + json.dumps({"rec": 0, "p": 0, "off": 0, "t": 2}) + "\n" + '{"rec": 2, "p"')
    assert history.load(path) == [{"assigned": [0], "t": 1}, {"rec": 0, "p": 0, "off": 0, "t": 2}]
    path.write_text('{"rec": 2, "p"\n' + json.dumps({"rec": 0, "p": 0, "off": 0, "t": 2}) + "\n")
    with pytest.raises(ValueError, match="line 1 is not JSON"):
        history.load(path)


def test_two_members_owning_one_partition_at_once_is_a_double_owner() -> None:
    members = _consumed_all()
    # b is given partition 0 while a still owns it (a never revoked it, and goes on)
    members["b"].append({"assigned": [0], "t": 200.0})
    members["a"].append({"commit": {"0": 3}, "t": 300.0})
    r = history.check(_producer(PLACED), LOG, members, FINAL)
    assert r.double_owner == [(0, "a", "b", 200.0)]
    assert set(r.violations) == {"double_owner"}


def test_a_handover_after_the_revocation_is_not_a_double_owner() -> None:
    members = _consumed_all()
    members["a"].append({"revoked": [0], "t": 199.0})
    members["b"].append({"assigned": [0], "t": 200.0})
    assert history.check(_producer(PLACED), LOG, members, FINAL).violations == {}
    # lost (the session expired) ends the ownership as a revocation does
    members = _consumed_all()
    members["a"].append({"lost": [0], "t": 199.0})
    members["b"].append({"assigned": [0], "t": 200.0})
    assert history.check(_producer(PLACED), LOG, members, FINAL).violations == {}
    # incremental (cooperative) events: a keeps 1 while handing 0 over, then takes 1 from b
    a = _member({"assigned": [0]}, {"assigned": [1]}, {"revoked": [0]}, start=100)
    b = _member({"assigned": [1]}, {"revoked": [1]}, {"assigned": [0]}, start=100.5)
    r = history.check(_producer(PLACED), LOG, {"a": a, "b": b}, None)
    assert r.double_owner == [(1, "b", "a", 101.0)]


def test_a_faulted_member_may_be_replaced_before_it_hears_so() -> None:
    members = _consumed_all()
    members["b"].append({"assigned": [0], "t": 200.0})
    members["a"].append({"commit": {"0": 3}, "t": 300.0})
    # a was SIGSTOPped at 150: the group rightly moved on; a's ownership ends there
    r = history.check(_producer(PLACED), LOG, members, FINAL, faults=[(150.0, "a")])
    assert r.violations == {}
    # a broker restart is everyone's fault
    r = history.check(_producer(PLACED), LOG, members, FINAL, faults=[(150.0, "*")])
    assert r.violations == {}
    # but a fault after the overlap began excuses nothing
    r = history.check(_producer(PLACED), LOG, members, FINAL, faults=[(250.0, "a")])
    assert r.double_owner == [(0, "a", "b", 200.0)]
    # nor one of another member
    r = history.check(_producer(PLACED), LOG, members, FINAL, faults=[(150.0, "c")])
    assert r.double_owner == [(0, "a", "b", 200.0)]


def test_an_async_answer_overtaken_by_a_later_one_is_not_a_commit_backwards() -> None:
    members = _consumed_all()
    # a's async commits 1 (offset 2) and 2 (offset 3), answered in the other order
    members["a"] += [{"commit": {"0": 3}, "seq": 2, "t": 110.0},
                     {"commit": {"0": 2}, "seq": 1, "t": 110.1}]
    assert history.check(_producer(PLACED), LOG, members, FINAL).violations == {}
    # the same offsets in the order sent: that is a commit going back
    members = _consumed_all()
    members["a"] += [{"commit": {"0": 3}, "seq": 1, "t": 110.0},
                     {"commit": {"0": 2}, "seq": 2, "t": 110.1}]
    r = history.check(_producer(PLACED), LOG, members, FINAL)
    assert r.commits_backwards == [(0, 3, 2)]


def test_an_async_answer_after_a_read_back_made_later_is_not_a_commit_backwards() -> None:
    members = _consumed_all()
    # commits 1 (offset 2) and 2 (offset 3) sent; the read-back sees 3; 1's answer comes last
    members["a"] += [{"commit": {"0": 3}, "seen": True, "seq": 2, "t": 110.0},
                     {"commit": {"0": 2}, "seq": 1, "t": 110.1}]
    assert history.check(_producer(PLACED), LOG, members, FINAL).violations == {}
    # a read-back that goes down is the broker's own
    members = _consumed_all()
    members["a"] += [{"commit": {"0": 3}, "seen": True, "seq": 2, "t": 110.0},
                     {"commit": {"0": 2}, "seen": True, "seq": 2, "t": 111.0}]
    assert history.check(_producer(PLACED), LOG, members, FINAL).commits_backwards == [(0, 3, 2)]


def test_commits_in_flight_at_once_may_be_heard_back_in_either_order() -> None:
    members = _consumed_all()
    # b's commit of 4 was sent before a's commit of 5 was answered (b was stopped between
    # the broker's answer and its log line): the broker may have applied b's first
    members["a"] += [{"commit": {"0": 5}, "sent": 109.0, "t": 110.0}]
    members["b"] += [{"commit": {"0": 4}, "sent": 109.5, "t": 112.0}]
    assert history.check(_producer(PLACED), LOG, members, FINAL).violations == {}
    # sent after a's was answered: that one went back
    members = _consumed_all()
    members["a"] += [{"commit": {"0": 5}, "sent": 109.0, "t": 110.0}]
    members["b"] += [{"commit": {"0": 4}, "sent": 110.5, "t": 112.0}]
    r = history.check(_producer(PLACED), LOG, members, FINAL)
    assert r.commits_backwards == [(0, 5, 4)]
