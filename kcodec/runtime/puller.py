"""A puller: one group member that fetches the topics and hands records on.

* ``file``/``redis``: batches (``--batch-size``, or what ``--linger-ms`` gathered) are
  appended to the store, and only then are their offsets committed. Past
  ``--max-pending`` waiting messages the partitions are paused (polling goes on, so the
  membership stays).
* ``direct``: the handler runs here, on a worker thread, while this thread keeps polling
  (partitions paused while records wait), so a slow handler never stalls heartbeats or
  outlives ``max_poll_interval_ms``. An offset is committed once every record before it is
  finished: done, retried (a copy in the local store's pending queue) or failed for good.

On revocation the puller commits what is durable (direct: the batch in hand is finished
first, then committed with the rest); records not yet durable are dropped and fetched again
by the partition's next owner. On a lost membership nothing is committed: the batch in hand
is abandoned to the partitions' new owner, which handles it again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from operator import itemgetter
from typing import Any

from kcodec.client import Consumer, RebalanceListener, TopicPartition
from kcodec.errors import DecodeError, FetchedBatchError, KcodecError
from kcodec.runtime.handler import Hung
from kcodec.runtime.message import Message, from_records
from kcodec.runtime.storage import append_all
from kcodec.runtime.work import Stats, Worker

__all__ = ["Puller", "next_offsets"]

log = logging.getLogger(__name__)
_tp_of = itemgetter(0, 1)       # a Message's (topic, partition)
_offset_of = itemgetter(2)


def next_offsets(batch: list[Message]) -> dict[TopicPartition, int]:
    """The offset after the last message of each partition in ``batch`` (in offset order
    within a partition, as pulled). The walk over the messages is C-level (a Python loop
    building a TopicPartition a message cost more than the store's write of it); the
    plain (topic, partition) keys, equal to and hashed as their TopicPartition, are made
    TopicPartitions only at the end, one a partition."""
    last = dict(zip(map(_tp_of, batch), map(_offset_of, batch), strict=True))
    return {TopicPartition(t, p): off + 1 for (t, p), off in last.items()}
# direct mode: seconds between offset commits while running (always on revoke and stop);
# the store modes commit after every append (one commit in flight at a time)
COMMIT_EVERY = 0.2
# the store modes: with a batch pulled, up to this many batches that were already fetched
# are taken at once and appended together (one fsync, one round trip), while fetches run
# ahead; each is still a batch of its own in the store
GROUP_BATCHES = 4
# at start with several pullers: how long one waits for the others to hold partitions
SETTLE_S = 15.0


class UndecodableBatch(Exception):
    """A fetched batch does not decode: the puller exits (code 5) and is restarted."""


class _Listener(RebalanceListener):
    def __init__(self, puller: Puller) -> None:
        self.p = puller

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.p.revoked(revoked, lost=False)

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.p.assigned(assigned)

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.p.revoked(lost, lost=True)


class Puller:
    def __init__(self, settings: Any, slot: int, store: Any, stop: threading.Event,
                 handler: Any = None) -> None:
        self.s = settings
        self.slot = slot
        self.store = store
        self.stop = stop
        self.stats = Stats()
        self.direct = settings.storage == "direct"
        self.worker = Worker(settings, handler, store, self.stats) if self.direct else None
        self.consumer: Consumer | None = None
        self.lock = threading.Lock()
        self.position: dict[TopicPartition, int] = {}    # next offset to pull
        self.durable: dict[TopicPartition, int] = {}     # next offset not yet durable/finished
        self.committed: dict[TopicPartition, int] = {}
        self.unsynced: dict[TopicPartition, int] = {}   # written, waiting for an fsync
        self.floor: dict[TopicPartition, int] = {}      # first offset pulled since assigned
        self.buf: deque[Message] = deque()
        self.buf_since = 0.0
        self._commit_fut: Any = None
        self._committed_at = 0.0
        self._commit_ok_at = time.monotonic()
        self._commit_failed = False
        self.gen = 0            # assignment generation: bumped on each revocation
        self._claim_at = 0.0
        self.paused = False
        self.recycle = False
        self.member_id = ""
        self.pulled_in_hand = False     # direct: the handler works on a pulled batch
        # at start, with several pullers: fetch nothing until every puller of this runtime
        # holds partitions (or SETTLE_S passed), so the group settles once with all of them
        # rather than the first member reading everything while the others join
        self.settling = settings.pullers > 1 and not settings.assign
        self._settle_until = 0.0

    # ------------------------------------------------------------------ life
    def run(self) -> int:
        cfg = self.s.consumer_config()
        cfg.setdefault("client_id", f"kcodec-run-{self.s.group}-p{self.slot}")
        self.consumer = c = Consumer(**cfg)
        if self.s.assign:
            # manual assignment: these partitions, no group membership (the group id only
            # keeps the committed offsets); nothing moves them, nothing revokes them
            tps = [TopicPartition(t, p) for t, p in self.s.my_partitions(self.slot)]
            c.assign(tps)
            self.assigned(tps)
        else:
            c.subscribe(list(self.s.topics), listener=_Listener(self))
        code = 0
        try:
            while not self.stop.is_set() and not self.recycle:
                if self.settling:
                    self._settle()
                elif self._uncommitted_over():
                    # commits are failing or behind (a rebalance, a broker away): pull no
                    # further, so a crash now re-reads at most this much
                    self._poll(0.1, 1)
                    self._commit()
                elif self.direct:
                    self._direct_round()
                else:
                    self._store_round()
        except Hung:
            code = 3
        except UndecodableBatch:
            code = 5
        finally:
            self._shutdown(code == 0)
        return code

    def _shutdown(self, clean: bool) -> None:
        c = self.consumer
        assert c is not None
        try:
            if not self.direct:
                self._flush()
                self._sync()
            self._commit(sync=True)
        except KcodecError as exc:
            log.warning("final commit failed (%s); the next owner re-reads from the last "
                        "commit (records may be handled twice)", exc)
        try:
            c.close(timeout=min(self.s.grace, 30))   # leaves the group: partitions move at once
        except KcodecError as exc:
            log.warning("leaving the group: %s", exc)
        if self.worker is not None:
            self.worker.close()

    # ------------------------------------------------------------------ polling
    def _poll(self, timeout: float, limit: int) -> int:
        c = self.consumer
        assert c is not None
        try:
            polled = c.poll(timeout, max_records=max(limit, 1))
        except FetchedBatchError as exc:
            # skipping it would lose its records unseen: stop, loudly, and say where
            log.error("the record batch of %s[%d] at offset %d does not decode (%s): its "
                      "records cannot be handed to the handler, and skipping them would lose "
                      "them; this puller exits (code 5) and is restarted with backoff until "
                      "the batch is readable. Check the partition (kcodec dump-log on the "
                      "broker's segment, or kcodec consume from that offset); to give those "
                      "records up, commit the offset after the batch for group %r "
                      "(kcodec ctl offsets shows where it stands)",
                      exc.topic, exc.partition, exc.fetch_offset, exc.cause, self.s.group)
            raise UndecodableBatch(str(exc)) from None
        except DecodeError as exc:
            log.error("a fetched record batch does not decode (%s): this puller exits "
                      "(code 5) and is restarted with backoff", exc)
            raise UndecodableBatch(str(exc)) from None
        except KcodecError as exc:
            if getattr(exc, "retriable", True) and not isinstance(exc, ValueError):
                log.warning("poll: %s (retrying)", exc)
                self.stop.wait(0.5)
                return 0
            raise
        n = 0
        with self.lock:
            for tp, recs in polled.items():
                if not recs:
                    continue
                t, p = tp
                if not self.buf:
                    self.buf_since = time.monotonic()
                self.buf.extend(from_records(t, p, recs))
                self.position[tp] = recs[-1].offset + 1
                if tp not in self.durable:
                    self.durable[tp] = self.floor[tp] = recs[0].offset
                n += len(recs)
        if n and not self.direct:
            self.stats.count(n)
        return n

    def _settle(self) -> None:
        """One step of the start: poll (paused: joining, heartbeats, no records) until every
        puller of this runtime has noted its member (it holds partitions), or SETTLE_S."""
        from kcodec.runtime.members import joined

        now = time.monotonic()
        if not self._settle_until:
            self._settle_until = now + SETTLE_S
        c = self.consumer
        assert c is not None
        if c.assignment():
            self._pause(True)
        self._poll(0.1, 1)
        want = min(self.s.pullers, self._partition_count())
        n = joined(self.s.state_dir, self.s.pullers)
        if n >= want or now > self._settle_until:
            if n < want:
                log.warning("%d of %d pullers hold partitions after %g s: fetching anyway "
                            "(more pullers than partitions leaves some idle)", n,
                            self.s.pullers, SETTLE_S)
            self.settling = False
            self.paused = True      # (so that _pause(False) resumes what was paused)
            self._pause(False)

    _partitions: int | None = None

    def _partition_count(self) -> int:
        """Partitions of the topics (asked once; the pullers' count while unknown)."""
        if self._partitions is None:
            try:
                md = self._admin().describe_cluster(list(self.s.topics))
                self._partitions = sum(len(t.partitions) for t in md.topics)
            except (KcodecError, OSError):
                return self.s.pullers
        return self._partitions

    def _pause(self, want: bool) -> None:
        c = self.consumer
        assert c is not None
        if want == self.paused:
            return
        tps = list(c.assignment())
        if want:
            c.pause(*tps)
        else:
            c.resume(*tps)
        self.paused = want

    def _uncommitted_over(self) -> bool:
        """Whether to stop pulling until commits catch up. Store modes: more than 4 batches
        a partition appended but not committed (what a crash re-reads stays that small; the
        chaos tests measure it). Direct: commits fail, or none succeeded for 2 s, while 50
        batches a partition wait (commits there run every 200 ms; a slow broker's commit
        round trip must not throttle the handler)."""
        if self.direct and not self._commit_failed and \
                time.monotonic() - self._commit_ok_at < 2.0:
            return False
        return self._uncommitted_room() < 0

    def _uncommitted_room(self) -> int:
        """How far the partition furthest ahead of its commit is from that limit."""
        limit = self.s.batch_size * (50 if self.direct else 4)
        with self.lock:
            worst = max((off - self.committed.get(tp, self.floor.get(tp, off))
                         for tp, off in self.durable.items()), default=0)
        return limit - worst

    # ------------------------------------------------------------------ store modes
    def _store_round(self) -> None:
        s = self.s
        linger = s.linger_ms / 1000
        left = linger - (time.monotonic() - self.buf_since) if self.buf else 0.2
        room = self._room()
        now = time.monotonic()
        if room - len(self.buf) > 0 and len(self.buf) < s.batch_size:
            self._poll(max(left, 0.0), min(s.batch_size - len(self.buf), room - len(self.buf)))
            self._polled_at = now
            # only what is already fetched (no wait), and never past the uncommitted limit,
            # even were it all of one partition (what a crash re-reads stays as bounded)
            # (near the limit with several pullers: a batch at a time, so that pullers
            # that read the store's count at once overshoot it by a batch each at most)
            group = 1 if self._near else GROUP_BATCHES
            more = min(s.batch_size * group, room, self._uncommitted_room()) - len(self.buf)
            if len(self.buf) >= s.batch_size and more > 0:
                self._poll(0.0, more)
        elif now - self._polled_at > 10.0:
            # full: records wait in this process, not the store; a poll now and then keeps
            # the member inside max_poll_interval_ms (paused: nothing new is fetched)
            self._poll(0.0, 1)
            self._polled_at = now
        else:
            self.stop.wait(0.02)
        if len(self.buf) >= s.batch_size or (self.buf and time.monotonic() - self.buf_since >= linger):
            self._flush(room)
        if self.store.sync_due():
            self._sync()
        self._commit()

    _polled_at = 0.0
    # the store's backlog as last read, and what this puller appended since
    _waiting_read = 0
    _appended_since = 0
    _read_at = 0.0
    _near = False       # several pullers, the store near --max-pending: no grouped appends

    def _room(self) -> int:
        """How many more records may be pulled before the store holds ``--max-pending``
        (pulled-but-not-appended ones count too). Checked before every fetch, so the bound
        holds per fetch: the store's count is read again once a second, and before every
        fetch while the estimate is near the limit (with several pullers: past a share of
        it, as the others append too; together they overshoot by at most a batch each).
        Pauses the partitions at the limit, resumes them below it."""
        s = self.s
        limit = s.max_pending
        now = time.monotonic()
        est = self._waiting_read + self._appended_since
        # one puller: the estimate only overstates (sinkers take, nobody else adds), so the
        # store is read again only near the limit; several: past a share of it, since the
        # others add too (a file store's count is a scan of its chunks: not every fetch)
        # several: near once this round's largest append (grouped batches) could take it
        # there; then the count is read before every fetch and appends go a batch at a
        # time, so the others' appends between a read and this one are a batch each at most
        if s.pullers == 1:
            near = limit - s.batch_size
            self._near = False
            close = est + len(self.buf) >= near
        else:
            near = limit // (2 * s.pullers)
            close = self._near = est + len(self.buf) + s.batch_size * GROUP_BATCHES >= near
        if now - self._read_at >= 1.0 or close:
            b = self.store.backlog()
            self._waiting_read = b["pending"] + b["delayed"]
            self._appended_since = 0
            self._read_at = now
            est = self._waiting_read
        room = limit - est
        full = room - len(self.buf) <= 0
        if full and not self.paused:
            log.info("%d messages wait in the store (--max-pending %d): pausing fetches",
                     est, limit)
        self._pause(full)
        return room

    def _flush(self, room: int | None = None) -> None:
        """Append what was pulled (at most ``room`` records: the rest wait for room) to the
        store; commit once it is durable."""
        with self.lock:
            if room is None or room >= len(self.buf):
                batch = list(self.buf)
                self.buf.clear()
            else:
                batch = [self.buf.popleft() for _ in range(max(room, 0))]
        if not batch:
            return
        size = max(self.s.batch_size, 1)
        append_all(self.store, [batch[i:i + size] for i in range(0, len(batch), size)])
        self._appended_since += len(batch)
        offs = next_offsets(batch)
        with self.lock:
            if self.store.needs_sync():     # --fsync interval: durable after the next sync
                self.unsynced.update(offs)
            else:
                self.durable.update(offs)
        self._commit()

    def _sync(self) -> None:
        self.store.sync()
        with self.lock:
            self.durable.update(self.unsynced)
            self.unsynced.clear()

    def _commit(self, sync: bool = False, only: list[TopicPartition] | None = None) -> None:
        c = self.consumer
        assert c is not None
        with self.lock:
            want = {tp: off for tp, off in self.durable.items()
                    if self.committed.get(tp) != off and (only is None or tp in only)}
        if not want:
            return
        if sync:
            c.commit(want)
            self.committed.update(want)
            self._commit_ok_at = time.monotonic()
            return
        fut = self._commit_fut
        if fut is not None and not fut.done():
            return          # one commit in flight at a time; the next one carries these too
        now = time.monotonic()
        if self.direct and now - self._committed_at < COMMIT_EVERY:
            return      # direct: a commit per batch would cost a fifth of the throughput
        self._committed_at = now

        def done(err: BaseException | None, want: dict = want) -> None:
            self._commit_failed = err is not None
            if err is None:
                self.committed.update(want)
                self._commit_ok_at = time.monotonic()
            else:
                log.warning("offset commit failed (%s); retried with the next batch", err)
        self._commit_fut = c.commit_async(want, callback=done)

    # ------------------------------------------------------------------ direct mode
    def _direct_round(self) -> None:
        s = self.s
        w = self.worker
        assert w is not None
        batch: list[Message] = []
        with self.lock:
            while self.buf and len(batch) < s.batch_size:
                batch.append(self.buf.popleft())
        if batch:
            hung = None
            gen = self.gen
            self.pulled_in_hand = True
            try:
                finished = w.process(batch, self._tick)
            except Hung as exc:     # settled (retried or failed) all the same
                hung, finished = exc, list(range(len(batch)))
            finally:
                self.pulled_in_hand = False
            if gen == self.gen:
                # after a revocation meanwhile it was finished and committed then (revoked),
                # or, the partitions lost, abandoned: their new owner handles it again
                self._finished(batch, finished)
            self._commit()
            if hung is not None:
                raise hung
            return
        now = time.monotonic()
        claim = None
        if now - self._claim_at > 0.5:              # retries and requeued messages
            self._claim_at = now
            claim = self.store.claim(s.batch_size)
        if claim is not None:
            self._claim_at = 0.0
            try:
                w.process(claim.messages, self._tick)
            except Hung:      # settled (retried or failed) before it was raised
                self.store.ack(claim, claim.refs)
                raise
            self.store.ack(claim, claim.refs)
            return
        self._pause(False)
        self._poll(0.1, s.batch_size)
        self._commit()

    def _finished(self, batch: list[Message], finished: list[int]) -> None:
        """Records of a pulled batch are finished: what may be committed moves on."""
        last = next_offsets(batch if len(finished) == len(batch) else [batch[i] for i in finished])
        with self.lock:
            for tp, off in last.items():
                if tp in self.position:
                    self.durable[tp] = max(self.durable.get(tp, 0), off)

    def _tick(self) -> None:
        """While the handler works: keep polling (paused past one batch in hand)."""
        self._pause(len(self.buf) >= self.s.batch_size)
        self._poll(0.0, self.s.batch_size)
        self.store.renew()

    # ------------------------------------------------------------------ rebalance
    def revoked(self, tps: list[TopicPartition], lost: bool) -> None:
        gone = set(tps)
        self.gen += 1
        if not lost and self.direct and self.worker is not None and self.pulled_in_hand:
            # the handler's batch is finished first, so it is committed before the
            # partitions go (the rebalance waits; heartbeats go on meanwhile)
            got = self.worker.complete_in_hand()
            if got is not None:
                batch, finished = got
                if any(TopicPartition(m.topic, m.partition) in gone for m in batch):
                    log.info("partitions revoked while a batch of %d was in hand: it was "
                             "finished first and is committed with them", len(batch))
                self._finished(batch, finished)
        if not lost:
            try:
                if not self.direct:
                    self._flush()
                    self._sync()
                self._commit(sync=True, only=list(gone))
            except KcodecError as exc:
                log.warning("commit on revocation failed (%s); the next owner re-reads from "
                            "the last commit", exc)
        with self.lock:
            self.buf = deque(m for m in self.buf if TopicPartition(m.topic, m.partition) not in gone)
            for tp in gone:
                self.position.pop(tp, None)
                self.durable.pop(tp, None)
                self.unsynced.pop(tp, None)
                self.floor.pop(tp, None)
                self.committed.pop(tp, None)
        self.paused = False
        log.info("partitions %s: %s", "lost" if lost else "revoked", _names(tps))

    def assigned(self, tps: list[TopicPartition]) -> None:
        if tps:
            log.info("partitions assigned: %s", _names(tps))
        self.paused = False
        c = self.consumer
        if c is not None and tps and self.settling:
            c.pause(*c.assignment())       # nothing fetched before the group has settled
            self.paused = True
        if c is not None and tps:
            try:    # where the group stands: the floor of what this member will commit
                got = c.committed(tps)
            except KcodecError as exc:
                log.warning("reading the committed offsets of %s: %s", _names(tps), exc)
                got = {}
            with self.lock:
                for tp, off in got.items():
                    if off is not None:
                        self.committed[tp] = off
                        self.position.setdefault(tp, off)
        if c is not None:
            try:
                self.member_id = c.group_metadata().member_id
            except (ValueError, AttributeError):
                pass
            else:
                self._tell_member(c)

    def _tell_member(self, c: Consumer) -> None:
        """Leave this member's id where the master finds it should this process die: it
        then removes the member at once (its partitions move in about a second, not after
        the session timeout)."""
        from kcodec.runtime.members import write_member

        try:
            write_member(self.s.state_dir, self.slot, self.member_id,
                         c.group_protocol() or "classic", len(c.assignment()))
        except OSError as exc:
            log.warning("cannot note the member id for the master: %s", exc)

    # ------------------------------------------------------------------ introspection
    def ready(self) -> bool:
        """Joined the group (a member id), or holding the partitions given by --assign."""
        c = self.consumer
        if c is None:
            return False
        if self.s.assign:
            return bool(c.assignment())
        try:
            return bool(c.group_metadata().member_id)
        except ValueError:
            return False

    def offsets(self) -> list[dict[str, Any]]:
        c = self.consumer
        if c is None:
            return []
        rows = []
        with self.lock:
            pos = dict(self.position)
            dur = dict(self.durable)
            com = dict(self.committed)
        tps = sorted(c.assignment())
        ends = {tp: c.highwater(tp) for tp in tps}
        unknown = [tp for tp, e in ends.items() if e < 0]
        if unknown:
            # no fetch answered for them since the assignment (an incremental fetch session
            # leaves out partitions without news): ask the broker
            try:
                ends.update(self._admin().list_offsets(unknown))
            except (KcodecError, OSError) as exc:
                log.warning("end offsets of %s: %s", _names(unknown), exc)
        for tp in tps:
            end = ends.get(tp, -1)
            p = pos.get(tp, com.get(tp))
            rows.append({"topic": tp.topic, "partition": tp.partition, "position": p,
                         "committed": com.get(tp), "finished": dur.get(tp),
                         "end": end if end >= 0 else None,
                         "lag": max(end - p, 0) if end >= 0 and p is not None else None,
                         "remaining": max(end - (com.get(tp) or 0), 0) if end >= 0 else None,
                         "member": self.member_id})
        return rows

    _admin_client: Any = None

    def _admin(self) -> Any:
        if self._admin_client is None:
            from kcodec.client import Admin

            self._admin_client = Admin(**self.s.admin_config())
        return self._admin_client

    def group(self) -> dict[str, Any]:
        """This member's view of the group: its id, generation and the leader's id."""
        c = self.consumer
        if c is None:
            return {}
        try:
            md = c.group_metadata()
        except ValueError:
            return {}
        leader = c.group_leader()
        return {"member_id": md.member_id, "generation": md.generation_id, "leader": leader,
                "protocol": c.group_protocol(),
                "assignment": [list(tp) for tp in sorted(c.assignment())]}


def _names(tps: list[TopicPartition]) -> str:
    return ", ".join(f"{t}[{p}]" for t, p in sorted(tps)) or "(none)"
