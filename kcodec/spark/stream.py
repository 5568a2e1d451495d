"""``spark.readStream.format("kcodec")``: Spark's Kafka micro-batch source.

Offsets are Spark's JSON form, ``{"topic": {"0": next_offset}}``, kept in the query's
checkpoint by Spark: a restarted query resumes from the last committed micro-batch's end.
Each trigger asks the broker for the latest offsets (ListOffsets), limits them as
``maxOffsetsPerTrigger`` says (shared across partitions in proportion to their backlog, as
Spark does) or waits for ``minOffsetsPerTrigger`` up to ``maxTriggerDelay``; partitions and
topics that appear later (``subscribePattern``, partitions added) start at their earliest
offset. With ``commitOffsetsToGroup`` each finished micro-batch's end offsets are committed
to a consumer group, so ``kcodec lag`` and other lag tools can follow the query.

When a batch has finished, Spark says so only late: it calls ``commit(end)`` of batch N
while it plans batch N+1, that is only once new records have come, so the last batch of a
Trigger.AvailableNow run, or of a stream that has gone idle, would never be committed. But
every trigger starts by asking ``latestOffset(start)``, and ``start`` is the end of the last
batch Spark has run and recorded (a batch is planned only after the one before it has
finished, and a restarted query reruns an unfinished one first): the reader commits that
``start`` there, and ``commit(end)`` then finds it done.

pyspark >= 4.2 passes the start offset and the read limit to ``latestOffset(start, limit)``
and supports Trigger.AvailableNow; on 4.0 and 4.1 ``latestOffset()`` takes no argument and
the reader remembers the end it handed out last.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from kcodec.spark import _kafka, reach
from kcodec.spark._kafka import DataLossError, KafkaRange
from kcodec.spark.options import SourceOptions
from kcodec.spark.source import KafkaRangePartition

log = logging.getLogger(__name__)

try:   # pyspark >= 4.2
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )
    NEW_API = True
except ImportError:   # pragma: no cover - pyspark 4.0 / 4.1
    NEW_API = False

__all__ = ["KafkaStreamReader", "make_stream_reader", "limit_offsets"]

Offsets = dict[str, dict[str, int]]

_now = time.monotonic        # the trigger clock (seconds); tests replace it


def _flat(o: Offsets) -> dict[tuple[str, int], int]:
    return {(t, int(p)): int(v) for t, ps in (o or {}).items() for p, v in ps.items()}


def _nested(m: dict[tuple[str, int], int]) -> Offsets:
    out: Offsets = {}
    for (t, p), v in sorted(m.items()):
        out.setdefault(t, {})[str(p)] = v
    return out


def limit_offsets(start: dict[tuple[str, int], int], latest: dict[tuple[str, int], int],
                  max_rows: int | None) -> dict[tuple[str, int], int]:
    """The end offsets of a trigger: ``latest``, or with ``max_rows`` each partition's share
    of it in proportion to its backlog (Spark's rateLimit: the share rounded down, at least
    nothing is lost and the total never passes ``max_rows``)."""
    if max_rows is None:
        return dict(latest)
    backlog = {tp: max(latest[tp] - start.get(tp, latest[tp]), 0) for tp in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    out = {}
    given = 0
    for tp in sorted(latest):
        share = backlog[tp] * max_rows // total
        given += share
        out[tp] = start.get(tp, latest[tp]) + share
    # hand the rounding leftovers to the largest backlogs, one each
    left = max_rows - given
    for tp in sorted(latest, key=lambda tp: -backlog[tp]):
        if left <= 0:
            break
        if out[tp] < latest[tp]:
            out[tp] += 1
            left -= 1
    return out


class KafkaStreamReader(DataSourceStreamReader):
    """The driver's long-lived reader; pickled copies run ``read()`` on the workers."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._admin: Any = None
        self._latest: dict[tuple[str, int], int] = {}
        self._target: dict[tuple[str, int], int] | None = None    # Trigger.AvailableNow
        self._last_trigger: float | None = None                  # minOffsetsPerTrigger
        self._last_end: Offsets | None = None                     # 4.0/4.1 API
        self._committed: dict[tuple[str, int], int] | None = None  # commitOffsetsToGroup

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_admin"] = None          # never ship a live client to a worker
        return state

    # -- driver side --------------------------------------------------------------------

    def _client(self) -> Any:
        if self._admin is None:
            from kcodec.client import Admin

            self._admin = Admin(**_kafka.admin_kwargs(self.opts))
        return self._admin

    def _named(self) -> Any:
        return reach.named_cause(self.opts.bootstrap, _kafka.admin_kwargs(self.opts),
                                 reach.DRIVER)

    def _partitions(self) -> list[tuple[str, int]]:
        with self._named():
            return _kafka.topic_partitions(self._client(), self.opts)

    def _ends(self, tps: list[tuple[str, int]]) -> tuple[dict, dict]:
        admin = self._client()
        with self._named():
            return (_kafka.list_offsets(admin, tps, "earliest"),
                    _kafka.list_offsets(admin, tps, "latest"))

    def initialOffset(self) -> Offsets:
        tps = self._partitions()
        earliest, latest = self._ends(tps)
        start = _kafka.resolve(self._client(), self.opts.starting, tps, earliest, latest,
                               starting=True, strategy=self.opts.timestamp_strategy)
        return _nested(start)

    def _next_end(self, start: Offsets, max_rows: int | None, min_rows: int | None) -> Offsets:
        tps = self._partitions()
        earliest, latest = self._ends(tps)
        self._latest = latest
        begin = _flat(start)
        for tp in tps:              # a new partition (or topic) starts at its earliest offset
            begin.setdefault(tp, earliest[tp])
        if self._target is not None:
            latest = {tp: min(v, self._target.get(tp, begin[tp])) for tp, v in latest.items()}
            latest = {tp: max(v, begin[tp]) for tp, v in latest.items()}
        # minOffsetsPerTrigger: not with Trigger.AvailableNow, which would wait for records
        # that are not to come (Spark's ReadMinRows leaves that case to the source)
        if min_rows is not None and self._target is None and \
                self._delay(begin, latest, min_rows):
            return _nested(begin)
        end = limit_offsets(begin, latest, max_rows)
        # never move backwards (a partition whose log shrank stays at its position; the
        # data-loss check in partitions() reports it)
        for tp, v in begin.items():
            if tp in end and end[tp] < v:
                end[tp] = v
        return _nested(end)

    def _delay(self, begin: dict[tuple[str, int], int], latest: dict[tuple[str, int], int],
               min_rows: int) -> bool:
        """Whether to skip this trigger, as Spark's Kafka source decides it for
        minOffsetsPerTrigger: never once maxTriggerDelay has passed since the last trigger
        that ran (nor on the first trigger of the reader); else while fewer than
        ``min_rows`` new offsets are waiting across all partitions."""
        now = _now()
        last = self._last_trigger
        if last is None or (now - last) * 1000 >= self.opts.max_trigger_delay_ms:
            self._last_trigger = now
            return False
        waiting = sum(max(v - begin.get(tp, 0), 0) for tp, v in latest.items())
        if waiting < min_rows:
            return True
        self._last_trigger = now
        return False

    def getDefaultReadLimit(self) -> Any:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: Offsets, limit: Any) -> Offsets:
        self._commit_group(start)       # everything before start is done (module docstring)
        max_rows = min_rows = None
        if isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
            min_rows = self.opts.min_offsets_per_trigger
        elif isinstance(limit, ReadMinRows):
            min_rows = limit.min_rows
        return self._next_end(start, max_rows, min_rows)

    def reportLatestOffset(self) -> Offsets | None:
        return _nested(self._latest) if self._latest else None

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self._partitions()
        self._target = self._ends(tps)[1]

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        s, e = _flat(start), _flat(end)
        earliest: dict[tuple[str, int], int] = {}
        if any(tp not in s for tp in e) or self.opts.fail_on_data_loss:
            earliest = self._ends(sorted(e))[0] if e else {}
        gone = sorted(set(s) - set(e))
        if gone and self.opts.fail_on_data_loss:
            names = ", ".join(f"{t}[{p}]" for t, p in gone)
            raise DataLossError(f"partitions {names} disappeared (topic deleted?); set "
                                "failOnDataLoss=false to go on without them")
        out = []
        for tp, hi in sorted(e.items()):
            lo = s.get(tp, earliest.get(tp, 0))
            first = earliest.get(tp, lo)
            if lo < first:
                if self.opts.fail_on_data_loss:
                    raise DataLossError(
                        f"{tp[0]}[{tp[1]}]: offsets {lo}..{first - 1} are gone (retention) "
                        "before the query read them; set failOnDataLoss=false to skip them")
                lo = first
            if hi > lo:
                out.append(KafkaRange(tp[0], tp[1], lo, hi))
        out = _kafka.split_ranges(out, self.opts.min_partitions, None)
        if log.isEnabledFor(logging.INFO):
            log.info("micro-batch: %d records in %d tasks (%s)", sum(r.end - r.start for r in out),
                     len(out), ", ".join(f"{r.topic}[{r.partition}] {r.start}..{r.end}"
                                         for r in out[:8]) + (" ..." if len(out) > 8 else ""))
        return [KafkaRangePartition(r) for r in out]

    def commit(self, end: Offsets) -> None:
        self._commit_group(end)

    def _commit_group(self, done: Offsets) -> None:
        """Commit ``done`` (offsets every record before which the query has processed) to
        the group of ``commitOffsetsToGroup``, once: ``latestOffset`` and ``commit`` both
        see the same ends."""
        if self.opts.commit_to_group is None:
            return
        offsets = _flat(done)
        if not offsets or offsets == self._committed:
            return
        from kcodec.spark.groups import commit_offsets

        commit_offsets(self.opts, self.group_id(), offsets)
        self._committed = offsets

    def group_id(self) -> str:
        g = self.opts.commit_to_group
        if g:
            return g
        subs = self.opts.subscribe or ([self.opts.pattern] if self.opts.pattern else
                                       sorted({t for t, _ in self.opts.assign or []}))
        return f"{self.opts.group_id_prefix}-{'-'.join(str(x) for x in subs)}"

    def stop(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            finally:
                self._admin = None

    # -- worker side ---------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[Any]:
        r = partition.value
        if r.size:
            yield from _kafka.read_range(r, self.opts)


class _OldApiReader(KafkaStreamReader):
    """pyspark 4.0/4.1 call ``latestOffset()`` without the batch's start: the end this
    reader handed out last is the next start. Spark calls ``initialOffset()`` only for
    a new query; a reader made for a query restarted from its checkpoint has handed
    out nothing and cannot know where the checkpoint resumes, so its first trigger
    reads up to the latest offsets without ``maxOffsetsPerTrigger`` (an end before the
    checkpoint's start would read records twice)."""

    def getDefaultReadLimit(self) -> Any:
        raise NotImplementedError

    def initialOffset(self) -> Offsets:
        off = super().initialOffset()
        if self._last_end is None:
            self._last_end = off
        return off

    def latestOffset(self) -> Offsets:  # type: ignore[override]
        if self._last_end is not None:
            self._commit_group(self._last_end)      # the end of the last batch that ran
        if self._last_end is None:
            end = self._next_end({}, None, None)
        else:
            end = self._next_end(self._last_end, self.opts.max_offsets_per_trigger,
                                 self.opts.min_offsets_per_trigger)
        self._last_end = end
        return end

    def commit(self, end: Offsets) -> None:
        if self._last_end is None:
            self._last_end = end
        super().commit(end)


if NEW_API:
    class _AvailableNowReader(KafkaStreamReader, SupportsTriggerAvailableNow):
        pass


def make_stream_reader(opts: SourceOptions) -> DataSourceStreamReader:
    """The stream reader for the installed pyspark: ``latestOffset(start, limit)`` and
    Trigger.AvailableNow from 4.2, ``latestOffset()`` before."""
    if NEW_API:
        return _AvailableNowReader(opts)
    return _OldApiReader(opts)  # pragma: no cover - pyspark 4.0 / 4.1
