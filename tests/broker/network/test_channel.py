"""The request channel shares its budget and its large-request lane among owners: one
principal (or, before anyone vouched for a connection, one client address) can neither fill
the node's queued-request budget alone nor make another's large request wait behind its
backlog."""

from __future__ import annotations

import threading

from kcodec.broker.network import HandlerPool, Request, RequestChannel


def _req(size: int, owner: str, cid: int = 1, api_key: int = 15) -> Request:
    return Request(0, None, api_key, 5, cid, b"\x00" * size, owner=owner)


def _queue(ch: RequestChannel, r: Request) -> Request:
    assert ch.book(r.size, r.owner)
    ch.put(r)
    return r


# ---------------------------------------------------------------- the share of the budget
def test_one_owner_holds_at_most_its_share_while_others_read_on():
    ch = RequestChannel(1000, max_queued_bytes_per_owner=500)
    _queue(ch, _req(300, "User:mallory"))
    _queue(ch, _req(200, "User:mallory"))
    assert not ch.book(1, "User:mallory")        # its share is full, its answers will free it
    assert ch.book(400, "User:alice")            # another reads on into the rest
    assert ch.booked_by == {"User:mallory": 500, "User:alice": 400}
    ch.release(400, "User:alice")
    assert ch.booked_by == {"User:mallory": 500} and ch.queued_bytes == 500


def test_an_owner_none_of_whose_requests_waits_is_never_held_back():
    ch = RequestChannel(1000, max_queued_bytes_per_owner=500)
    # a frame bigger than the share, read in pieces: nothing of its owner waits for an
    # answer, so waiting would free nothing (as for the node's whole budget)
    assert ch.book(400, "User:alice") and ch.book(400, "User:alice")
    big = Request(0, None, 15, 5, 1, b"\x00" * 800, owner="User:alice")
    ch.put(big)
    assert not ch.book(1, "User:alice")
    ch.done(big)
    assert ch.booked_by == {} and ch.pending_by == {} and ch.queued_bytes == 0
    assert ch.book(1, "User:alice")


def test_the_share_defaults_to_the_whole_budget():
    ch = RequestChannel(1000)
    _queue(ch, _req(600, "User:a"))
    assert ch.book(400, "User:a") and not ch.book(1, "User:b")


# ---------------------------------------------------------------- the large lane's turns
def test_the_large_lane_takes_owners_in_turn():
    ch = RequestChannel(1 << 30)
    for i in range(50):                                   # mallory's backlog
        _queue(ch, _req(20_000, "User:mallory", cid=i))
    _queue(ch, _req(20_000, "User:alice", cid=100))       # then alice's one request
    _queue(ch, _req(20_000, "host:10.0.0.7", cid=200))    # and a client not logged in
    order = [ch.take(0.1, large=True).correlation_id for _ in range(6)]
    # alice's is served after one of mallory's, not after fifty
    assert order == [0, 100, 200, 1, 2, 3]
    assert [ch.take(0.1, large=True).correlation_id for _ in range(46)] == list(range(4, 50))


def test_an_owner_coming_back_waits_for_its_turn():
    ch = RequestChannel(1 << 30)
    _queue(ch, _req(20_000, "a", cid=1))
    _queue(ch, _req(20_000, "a", cid=2))
    _queue(ch, _req(20_000, "b", cid=3))
    assert ch.take(0.1, large=True).correlation_id == 1
    _queue(ch, _req(20_000, "a", cid=4))                 # after b's turn, not before
    _queue(ch, _req(20_000, "c", cid=5))
    assert [ch.take(0.1, large=True).correlation_id for _ in range(4)] == [3, 2, 5, 4]


def test_a_backlog_of_large_requests_delays_another_owner_by_one():
    """Through the handler pool's one large-request thread: while mallory's requests
    take their time, alice's single one is answered after at most one of them."""
    ch = RequestChannel(1 << 30, large_request_bytes=1000)
    served: list[str] = []
    first = threading.Event()
    go = threading.Event()

    def handle(req: Request) -> bytes:
        if not first.is_set():
            first.set()
            go.wait(5)                     # the first of mallory's holds the thread
        served.append(req.owner)
        return b"ok"
    pool = HandlerPool(ch, handle, threads=1, name="t", large_threads=1)
    pool.start()
    try:
        backlog = [_queue(ch, _req(2000, "User:mallory", cid=i)) for i in range(20)]
        assert first.wait(5)
        alice = _queue(ch, _req(2000, "User:alice", cid=99))
        go.set()
        assert alice.future.result(5) == b"ok"
        assert served.index("User:alice") <= 2, served
        for r in backlog:
            r.future.result(5)
    finally:
        go.set()
        pool.stop()
