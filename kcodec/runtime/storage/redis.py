"""The Redis store: the reliable-queue pattern on a Redis server, so pullers and sinkers of
one or several runtimes (several machines) can share it.

Keys, under the prefix ``P`` (``--redis-prefix``, default ``kcodec:<group>``)::

    P:pending                 list   new messages pushed on the left, claimed from the right
    P:processing:<owner>      list   what one sinker holds (moved there atomically)
    P:lease:<owner>           string that sinker's lease: expires unless renewed; its value
                              names the claim call that last took work (a token of the
                              process's own)
    P:owners                  set    sinkers with a processing list
    P:delayed                 zset   retries, scored by the time they are due (ms)
    P:failed                  list   out of retries
    P:counts                  hash   messages in pending and in processing (every move
                                     updates them in the same script)

An element of pending or processing is what one append wrote: many messages in columns
(``kcodec.runtime.message.encode_many``, first byte 2), so a batch costs one element to
push, move and acknowledge, not one a message; a retried, failed or requeued message is
an element of its own (``encode``, first byte 1; what older runtimes wrote everywhere,
still read). A partly acknowledged element is replaced by one of what is left.

Every move is one Lua script, so a message is always in exactly one place. A sinker whose
lease expired (it died, or lost Redis for longer than ``--lease-ms``) has its processing list
moved back to pending by the next claim of any sinker. A sinker's ack of a whole claim is
owed until its next call: the next claim's script makes it before it claims (one script a
batch in a steady sinker, not two), and a release, a partial ack, a backlog or a close sends
it first (``RedisStore.ack``); a sinker killed in between has that batch handed out again
once its lease expires, as one killed before its ack. Durability is Redis's: run it with
``appendonly yes`` (the tests do, and kill it with -9 mid-work). At start the runtime reads
Redis's persistence settings and refuses one that can lose acknowledged messages
(``--redis-durability warn`` runs anyway, warning); and every process checks, about once a
second, that the key ``P:epoch`` the runtime made is still there: a Redis that came back
empty (a restart without persistence, a flush) is logged as an error naming what was lost.
The master notes the marker in its state dir, so a loss while the runtime was stopped is
logged at the next start too.

Needs the ``redis`` package: ``pip install kcodec[redis]``.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from kcodec.runtime.message import Message, decode, decode_many, encode, encode_many
from kcodec.runtime.storage import Claim

__all__ = ["RedisStore", "RedisSettings"]

log = logging.getLogger(__name__)


@dataclass
class RedisSettings:
    """The Redis store's settings (``--redis-url``, ``--redis-prefix``,
    ``--redis-durability``)."""

    redis_url: str = field(default="redis://127.0.0.1:6379/0", metadata={
        "help": "redis://host:port/db of the redis store", "secret": "url"})
    redis_prefix: str = field(default="", metadata={
        "help": "key prefix in Redis (default kcodec:<group>)"})
    redis_durability: str = field(default="require", metadata={
        "help": "require | warn: refuse or only warn about a Redis whose restart can lose "
                "messages (no appendonly)",
        "choices": ("require", "warn")})

    def prefix(self, group: str) -> str:
        """The key prefix: ``redis_prefix``, or ``kcodec:<group>``."""
        return self.redis_prefix or f"kcodec:{group}"

# how many messages an element holds: encode_many's count (first byte 2), else one
_CNT = """
local function cnt(v)
  if string.byte(v, 1) == 2 then
    local a, b, c, d = string.byte(v, 2, 5)
    return ((a * 256 + b) * 256 + c) * 256 + d
  end
  return 1
end
"""

# KEYS: pending, counts ; ARGV: the elements' message count, element1, element2 ... (pushed
# in order: claimed first to last)
_APPEND = """
redis.call('LPUSH', KEYS[1], unpack(ARGV, 2))
redis.call('HINCRBY', KEYS[2], 'pending', tonumber(ARGV[1]))
return 1
"""

# the whole of the claim a sinker last made, acknowledged: the processing list deleted when
# the lease still names that claim (its token) and the list is as long as the claim is; false
# when not (a reaper took the claim back, a later claim call put more there): then nothing
# is changed and the caller acknowledges element by element (see RedisStore.ack)
_ACK_HELD = """
local function ack_held(proc, lease, counts, elems, msgs, token)
  if redis.call('GET', lease) ~= token or redis.call('LLEN', proc) ~= tonumber(elems) then
    return false
  end
  redis.call('DEL', proc)
  redis.call('HINCRBY', counts, 'processing', -tonumber(msgs))
  return true
end
"""

# KEYS: pending, processing, lease, owners, delayed, counts ; ARGV: limit, lease_ms, now_ms,
# owner, this call's token, then the whole ack owed for the last claim: its element count (''
# for none), message count and token -> {0 (none owed) or 1 (acknowledged), the elements
# claimed}, or {-1, {}}: the ack owed was not made (ack_held) and nothing was claimed
_CLAIM = _CNT + _ACK_HELD + """
if ARGV[6] ~= '' then
  if not ack_held(KEYS[2], KEYS[3], KEYS[6], ARGV[6], ARGV[7], ARGV[8]) then return {-1, {}} end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', ARGV[3], 'LIMIT', 0, 1000)
for _, v in ipairs(due) do
  redis.call('ZREM', KEYS[5], v)
  redis.call('RPUSH', KEYS[1], v)
end
if #due > 0 then redis.call('HINCRBY', KEYS[6], 'pending', #due) end
local out = {}
local n = 0
local limit = tonumber(ARGV[1])
while n < limit do
  local v = redis.call('RPOPLPUSH', KEYS[1], KEYS[2])
  if not v then break end
  out[#out + 1] = v
  n = n + cnt(v)
end
if #out > 0 then
  redis.call('HINCRBY', KEYS[6], 'pending', -n)
  redis.call('HINCRBY', KEYS[6], 'processing', n)
  redis.call('SET', KEYS[3], ARGV[5], 'PX', ARGV[2])
  redis.call('SADD', KEYS[4], ARGV[4])
end
if ARGV[6] ~= '' then return {1, out} end
return {0, out}
"""

# KEYS: pending, owners, counts ; ARGV: prefix -> owners whose lease is gone, their work back
_REAP = _CNT + """
local n = 0
for _, o in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if redis.call('EXISTS', ARGV[1] .. ':lease:' .. o) == 0 then
    local p = ARGV[1] .. ':processing:' .. o
    while true do
      local v = redis.call('RPOPLPUSH', p, KEYS[1])
      if not v then break end
      n = n + cnt(v)
    end
    redis.call('SREM', KEYS[2], o)
  end
end
if n > 0 then
  redis.call('HINCRBY', KEYS[3], 'processing', -n)
  redis.call('HINCRBY', KEYS[3], 'pending', n)
end
return n
"""

# KEYS: processing, counts ; ARGV: old1, new1, old2, new2 ... (new "": all of old acknowledged;
# else what is left of it) -> messages acknowledged
_ACK = _CNT + """
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('LREM', KEYS[1], 1, ARGV[i]) == 1 then
    n = n + cnt(ARGV[i])
    if ARGV[i + 1] ~= '' then
      redis.call('LPUSH', KEYS[1], ARGV[i + 1])
      n = n - cnt(ARGV[i + 1])
    end
  end
end
if n ~= 0 then redis.call('HINCRBY', KEYS[2], 'processing', -n) end
return n
"""

# KEYS: processing, counts, lease ; ARGV: the claim's element count, its message count, its
# token -> the messages acknowledged, or -1 when ack_held did not (then _ACK, element by
# element): the whole ack a sinker owes, sent on its own (RedisStore._settle)
_ACK_ALL = _ACK_HELD + """
if not ack_held(KEYS[1], KEYS[3], KEYS[2], ARGV[1], ARGV[2], ARGV[3]) then return -1 end
return tonumber(ARGV[2])
"""

# KEYS: processing, pending, counts ; ARGV: elements -> back to pending at once
_RELEASE = _CNT + """
local n = 0
for _, v in ipairs(ARGV) do
  if redis.call('LREM', KEYS[1], 1, v) == 1 then
    redis.call('LPUSH', KEYS[2], v)
    n = n + cnt(v)
  end
end
if n > 0 then
  redis.call('HINCRBY', KEYS[3], 'processing', -n)
  redis.call('HINCRBY', KEYS[3], 'pending', n)
end
return n
"""

# KEYS: failed, pending, counts ; ARGV: old1, new1, old2, new2 ...
_REQUEUE = """
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('LREM', KEYS[1], -1, ARGV[i]) == 1 then
    redis.call('LPUSH', KEYS[2], ARGV[i + 1])
    n = n + 1
  end
end
if n > 0 then redis.call('HINCRBY', KEYS[3], 'pending', n) end
return n
"""

# KEYS: pending, owners, counts ; ARGV: prefix -> the counts, made from the lists where
# missing (a store an older runtime wrote, or a Redis that came back empty)
_COUNTS = _CNT + """
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local function total(key)
  local n = 0
  for _, v in ipairs(redis.call('LRANGE', key, 0, -1)) do n = n + cnt(v) end
  return n
end
local busy = 0
for _, o in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  busy = busy + total(ARGV[1] .. ':processing:' .. o)
end
redis.call('HSET', KEYS[3], 'pending', total(KEYS[1]), 'processing', busy)
return 1
"""


def _import_redis() -> Any:
    try:
        import redis
    except ImportError:
        raise ImportError("--storage redis needs the redis package: pip install "
                          "'kcodec[redis]'") from None
    return redis


class RedisStore:
    kind = "redis"

    def __init__(self, url: str, prefix: str, owner: str, lease_ms: int = 30000,
                 give_up_s: float = 120.0) -> None:
        redis = _import_redis()
        self._errors = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                        redis.exceptions.BusyLoadingError)
        from kcodec.runtime.config import redact_url

        self.url = redact_url(url)       # for messages: never the password
        wait = min(10.0, max(give_up_s, 1.0))
        self.r = redis.Redis.from_url(url, socket_timeout=wait, socket_connect_timeout=min(wait, 5))
        self.prefix = prefix
        self.owner = f"{owner}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_ms = lease_ms
        self.give_up = give_up_s
        p = prefix
        self.k_pending, self.k_owners = f"{p}:pending", f"{p}:owners"
        self.k_delayed, self.k_failed = f"{p}:delayed", f"{p}:failed"
        self.k_proc, self.k_lease = f"{p}:processing:{self.owner}", f"{p}:lease:{self.owner}"
        self.k_counts = f"{p}:counts"
        self._append = self.r.register_script(_APPEND)
        self._claim = self.r.register_script(_CLAIM)
        self._reap = self.r.register_script(_REAP)
        self._ack = self.r.register_script(_ACK)
        self._ack_all = self.r.register_script(_ACK_ALL)
        self._release = self.r.register_script(_RELEASE)
        self._requeue = self.r.register_script(_REQUEUE)
        self._counts = self.r.register_script(_COUNTS)
        self._counted = False
        self._inhand: dict[bytes, list[Message]] = {}   # element -> its messages (held)
        self._reaped = 0.0
        self._held: Claim | None = None
        self._calls = 0                       # claim calls made: each one's token
        self._token = b""                     # the lease's value: the last claim that took work
        # the whole ack owed for the last claim (see ack): its elements, messages and token
        self._owed: tuple[list[bytes], int, bytes] | None = None
        self.k_epoch = f"{p}:epoch"
        self._epoch: bytes | None = None     # the marker as this process first saw it
        self._epoch_at = 0.0
        self.lost = 0                         # times Redis came back without the marker

    # ------------------------------------------------------------------ durability
    def check_durability(self, require: bool = True) -> str | None:
        """Read the server's persistence settings: a RuntimeError (``require``) or a
        warning when a restart of it can lose acknowledged messages; the reason, or None
        when it is safe. A server that hides CONFIG (managed services) is a warning."""
        redis = _import_redis()
        try:
            cfg = self._call("config", self.r.config_get, "*")
        except redis.exceptions.ResponseError as exc:
            log.warning("redis at %s does not show its persistence settings (%s): make sure it "
                        "runs with appendonly yes, or a restart of it loses messages the "
                        "runtime has committed in Kafka", self.url, exc)
            return None
        get = {(k.decode() if isinstance(k, bytes) else k):
               (v.decode() if isinstance(v, bytes) else v) for k, v in cfg.items()}
        why = None
        if get.get("appendonly", "no") != "yes":
            snap = "RDB snapshots only (save " + get["save"] + ")" if get.get("save") else                 "no persistence at all (appendonly no, save \"\")"
            why = (f"redis at {self.url} runs with {snap}: a restart of it loses messages "
                   "whose offsets are already committed in Kafka. Run it with appendonly yes "
                   "(appendfsync always or everysec), or give --redis-durability warn to run "
                   "anyway")
        if why is not None:
            if require:
                raise RuntimeError(why)
            log.warning("%s", why)
            return why
        if get.get("appendfsync") == "no":
            log.warning("redis at %s runs with appendfsync no: a crash of its machine may lose "
                        "the last writes (appendfsync everysec or always bounds that)", self.url)
        return None

    def prepare(self, settings: Any) -> None:
        """Refuse (or warn about) a Redis that can lose messages; make the epoch marker, and
        say whether Redis lost it while the runtime was stopped (``check_stopped_loss``)."""
        self.check_durability(settings.store_settings("redis").redis_durability == "require")
        self.check_stopped_loss(settings.state_dir)

    def check_stopped_loss(self, state_dir: str) -> bool:
        """Make the epoch marker and remember it in ``state_dir`` (a file per Redis address
        and prefix). If a run from this state dir had seen another marker there, Redis lost
        its data while the runtime was stopped (a restart without persistence, a flush): an
        error is logged, as a loss seen while running is. True: nothing was lost."""
        import hashlib
        import json

        key = hashlib.sha256(f"{self.url}\0{self.prefix}".encode()).hexdigest()[:16]
        path = os.path.join(state_dir, f"redis-epoch-{key}.json")
        try:
            with open(path) as f:
                known = json.load(f).get("epoch")
        except (OSError, ValueError, AttributeError):
            known = None
        existed = self._call("epoch", self.r.get, self.k_epoch)
        self.mark()
        ok = known is None or existed is not None and existed.decode("ascii", "replace") == known
        if not ok:
            self.lost += 1
            log.error("redis at %s lost the runtime's data while the runtime was stopped (the "
                      "key %s is %s since the last run from %s): it restarted without "
                      "persistence or was flushed. Messages it held (pending, retries, "
                      "failed) whose offsets were committed in Kafka are lost; to handle them "
                      "again, reset the group's offsets to before the loss (kcodec ctl "
                      "offsets shows where it stands)", self.url, self.k_epoch,
                      "gone" if existed is None else "another runtime's", state_dir)
        try:
            os.makedirs(state_dir, exist_ok=True)
            tmp = f"{path}.tmp"
            with open(tmp, "w") as f:
                json.dump({"url": self.url, "prefix": self.prefix,
                           "epoch": (self._epoch or b"").decode("ascii", "replace")}, f)
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("could not note the redis store's marker in %s (%s): a loss while "
                        "the runtime is stopped would not be seen at the next start", path, exc)
        return ok

    def mark(self) -> None:
        """Make the epoch marker if it is not there (the master, at start) and remember it."""
        self._call("epoch", self.r.set, self.k_epoch, uuid.uuid4().hex.encode(), nx=True)
        self._epoch = self._call("epoch", self.r.get, self.k_epoch)
        self._epoch_at = time.monotonic()
        self._counted = False
        self._ensure_counts()

    def _ensure_counts(self) -> None:
        """Make P:counts from the lists where it is missing (once per process)."""
        if not self._counted:
            self._call("counts", self._counts, keys=[self.k_pending, self.k_owners,
                                                     self.k_counts], args=[self.prefix])
            self._counted = True

    def check_epoch(self, force: bool = False) -> bool:
        """At most once a second (or ``force``): whether the epoch marker is still the one
        this process knew; when not, Redis lost its data: an error is logged (once per
        loss) and a new marker made. True: nothing was lost."""
        now = time.monotonic()
        if not force and now - self._epoch_at < 1.0:
            return True
        self._epoch_at = now
        got = self._call("epoch", self.r.get, self.k_epoch)
        if self._epoch is None:
            if got is None:
                self.mark()
            else:
                self._epoch = got
            return True
        if got == self._epoch:
            return True
        self.lost += 1
        log.error("redis at %s came back without the runtime's data (the key %s is %s): it "
                  "restarted without persistence or was flushed. Messages it held (pending, "
                  "being handled, retries, failed) whose offsets were committed in Kafka are "
                  "lost; to handle them again, reset the group %s's offsets to before the "
                  "loss (kcodec ctl offsets shows where it stands)", self.url, self.k_epoch,
                  "gone" if got is None else "another runtime's", self.prefix)
        if got is None:
            self.mark()
        else:
            self._epoch = got
        return False

    @classmethod
    def from_settings(cls, s: Any, owner: str, quick: bool = False, *,
                      config: RedisSettings | None = None) -> RedisStore:
        """The store of settings ``s`` and ``config`` (``quick``: an operator's, giving up
        in 2 s)."""
        c = config or RedisSettings()
        return cls(c.redis_url, c.prefix(s.group), owner, s.lease_ms, 2.0 if quick else 120.0)

    def _call(self, what: str, fn: Any, *args: Any, **kw: Any) -> Any:
        """``fn`` with retries while Redis is unreachable (a restart, a failover), up to
        ``give_up`` seconds; then the error, naming the server."""
        start = time.monotonic()
        delay = 0.1
        warned = False
        while True:
            try:
                return fn(*args, **kw)
            except self._errors as exc:
                if time.monotonic() - start > self.give_up:
                    raise ConnectionError(f"redis at {self.url} unreachable for "
                                          f"{self.give_up:g} s ({exc}): {what} failed") from None
                if not warned:
                    log.warning("redis at %s: %s (%s); retrying", self.url, exc, what)
                    warned = True
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    # ------------------------------------------------------------------ writing
    def append(self, messages: list[Message]) -> None:
        self.check_epoch()
        if messages:
            self._ensure_counts()
            self._call("append", self._append, keys=[self.k_pending, self.k_counts],
                       args=[len(messages), encode_many(messages)])

    def append_batches(self, batches: list[list[Message]]) -> None:
        """An element a batch, all in one script (one round trip)."""
        self.check_epoch()
        batches = [b for b in batches if b]
        if batches:
            self._ensure_counts()
            self._call("append", self._append, keys=[self.k_pending, self.k_counts],
                       args=[sum(map(len, batches)), *map(encode_many, batches)])

    def needs_sync(self) -> bool:
        return False

    def sync_due(self) -> bool:
        return False

    def sync(self) -> None:
        pass

    def retry(self, messages: list[Message]) -> None:
        if messages:
            self._call("retry", self.r.zadd, self.k_delayed,
                       {encode(m): m.not_before for m in messages})

    def fail(self, messages: list[Message]) -> None:
        if messages:
            self._call("fail", self.r.lpush, self.k_failed, *[encode(m) for m in messages])

    # ------------------------------------------------------------------ claiming
    def reap(self) -> int:
        n = int(self._call("reap", self._reap, keys=[self.k_pending, self.k_owners,
                                                     self.k_counts], args=[self.prefix]))
        if n:
            log.warning("%d messages of sinkers whose lease expired are pending again", n)
        return n

    def claim(self, limit: int) -> Claim | None:
        self.check_epoch()
        self._ensure_counts()
        now = time.monotonic()
        if now - self._reaped > 1.0:
            self._reaped = now
            self.reap()
        while True:
            owed = self._owed
            self._calls += 1
            token = b"%d" % self._calls
            done, vals = self._call(
                "claim", self._claim, keys=[self.k_pending, self.k_proc, self.k_lease,
                                            self.k_owners, self.k_delayed, self.k_counts],
                args=[limit, self.lease_ms, int(time.time() * 1000), self.owner, token,
                      *(("", 0, b"") if owed is None else (len(owed[0]), owed[1], owed[2]))])
            if owed is None or int(done) >= 0:
                break
            # the ack owed was not made, and nothing was claimed: by element, then claim
            self._ack_each(owed[0])
            self._owed = None
        self._owed = None
        if not vals:
            return None
        self._token = token                 # (the lease's value now)
        msgs: list[Message] = []
        refs: list[tuple[bytes, int]] = []
        bad = []
        for v in vals:
            try:
                got = decode_many(v) if v[:1] == b"\x02" else [decode(v)]
            except ValueError as exc:   # not a message of ours: keep it, out of the way
                log.error("redis %s holds something that is not a stored message (%s): moved "
                          "to %s", self.k_pending, exc, self.k_failed + ":corrupt")
                bad.append(v)
                continue
            self._inhand[v] = got
            refs += [(v, i) for i in range(len(got))]
            msgs += got
        if bad:
            self._call("corrupt", self.r.lpush, self.k_failed + ":corrupt", *bad)
            self._call("corrupt", self._ack, keys=[self.k_proc, self.k_counts],
                       args=[x for v in bad for x in (v, b"")])
        if not msgs:
            return None
        self._held = Claim(self.k_proc, refs, msgs)
        return self._held

    def renew(self) -> None:
        if self._held is not None:
            self._call("renew", self.r.set, self.k_lease, self._token, px=self.lease_ms)

    def ack(self, claim: Claim, refs: list) -> None:
        """Refs of ``claim`` acknowledged. The whole claim (refs are some of claim.refs,
        never twice; the usual case, a batch all done) is owed, not sent: the next claim's
        script makes it before it claims (ack_held in _CLAIM), so a steady sinker makes one
        call a batch; a release, a partial ack, a backlog and a close send it first
        (``_settle``, one script). For the caller the claim is settled at once.

        Why deleting the list then drops that claim and nothing else: only this process
        pushes onto its processing list (the owner name is its own), and only in a claim call
        (RPOPLPUSH) and in a partial ack (LPUSH of an element's rest, in place of the
        element, the claim's refs following); others only take from it (a reaper all of it,
        and only once the lease is gone). Every claim call that takes work sets the lease to
        a token of its own, which renew keeps. So while the lease holds the owed claim's
        token, no claim call has taken work since, not even one whose answer was lost: the
        list is the claim's elements (unless a reaper took them) plus what earlier calls
        whose answers were lost left there. After a reaper only a claim call could push, so
        the list is empty, shorter than any claim; leftovers only make it longer. So the
        list is the claim alone exactly when it is as long as the claim: deleted whole.
        Otherwise nothing is changed and nothing claimed, and the caller acknowledges the
        claim's elements one by one (_ACK, LREM by value) before it claims again: those
        LREMs meet only the old claim's elements, never a new claim's copy of the same bytes
        (a reaped element claimed back, a batch appended twice). A claim script run twice
        (a timeout, a retry) whose first run made the ack and claimed finds that run's token
        in the lease: by element then, and nothing is left there to count."""
        if claim is self._held and (refs is claim.refs or len(refs) == len(claim.refs)):
            self._settle()    # (none is owed while a claim is held: the claim made it)
            elems = list(dict.fromkeys(e for e, _ in claim.refs))
            for e in elems:
                self._inhand.pop(e, None)
            self._owed = (elems, len(claim.refs), self._token)
            claim.refs = []
            self._held = None
            return
        self._settle()
        done: dict[bytes, set[int]] = {}
        for e, i in refs:
            done.setdefault(e, set()).add(i)
        pairs: list[bytes] = []
        left: list[tuple[bytes, int]] = []
        for e in dict.fromkeys(e for e, _ in claim.refs):
            mine = [i for ee, i in claim.refs if ee == e]
            gone = done.get(e, set())
            rest = [i for i in mine if i not in gone]
            if not gone:
                left += [(e, i) for i in rest]
                continue
            msgs = self._inhand.pop(e, [])
            if not rest:
                pairs += [e, b""]
                continue
            kept = [msgs[i] for i in rest]      # what is left: an element of its own
            new = encode_many(kept)
            self._inhand[new] = kept
            pairs += [e, new]
            left += [(new, j) for j in range(len(kept))]
        if pairs:
            self._call("ack", self._ack, keys=[self.k_proc, self.k_counts], args=pairs)
        claim.refs = left
        if not claim.refs:
            self._held = None

    def _settle(self) -> None:
        """Send the whole ack owed (see ``ack``), if any: one script, or by element when the
        processing list is not that claim alone."""
        owed = self._owed
        if owed is None:
            return
        n = int(self._call("ack", self._ack_all, keys=[self.k_proc, self.k_counts, self.k_lease],
                           args=[len(owed[0]), owed[1], owed[2]]))
        if n < 0:
            self._ack_each(owed[0])
        self._owed = None

    def _ack_each(self, elems: list[bytes]) -> None:
        """``elems`` acknowledged whole, each found by its value (_ACK)."""
        self._call("ack", self._ack, keys=[self.k_proc, self.k_counts],
                   args=[x for e in elems for x in (e, b"")])

    def release(self, claim: Claim) -> None:
        """Unacknowledged messages back to pending at once (no lease wait)."""
        self._settle()
        elems = list(dict.fromkeys(e for e, _ in claim.refs))
        if elems:
            self._call("release", self._release,
                       keys=[self.k_proc, self.k_pending, self.k_counts], args=elems)
        for e in elems:
            self._inhand.pop(e, None)
        claim.refs = []
        self._held = None

    # ------------------------------------------------------------------ operator views
    def backlog(self) -> dict[str, int]:
        self._ensure_counts()
        self._settle()          # this process's own ack owed counted

        def counts() -> dict[str, int]:
            pipe = self.r.pipeline(transaction=True)
            pipe.hmget(self.k_counts, ["pending", "processing"])
            pipe.zcard(self.k_delayed)
            pipe.llen(self.k_failed)
            (pending, busy), delayed, failed = pipe.execute()
            return {"pending": max(int(pending or 0), 0), "delayed": int(delayed),
                    "processing": max(int(busy or 0), 0), "failed": int(failed)}
        return dict(self._call("backlog", counts))

    def failed_messages(self, limit: int) -> list[Message]:
        vals = self._call("failed", self.r.lrange, self.k_failed, -limit, -1)
        return [decode(v) for v in reversed(vals)]

    def requeue(self) -> int:
        n = 0
        while True:
            vals = self._call("requeue", self.r.lrange, self.k_failed, -500, -1)
            if not vals:
                return n
            pairs: list[bytes] = []
            for v in vals:
                pairs += [v, encode(decode(v)._replace(attempts=0, not_before=0, error=None))]
            moved = int(self._call("requeue", self._requeue,
                                   keys=[self.k_failed, self.k_pending, self.k_counts],
                                   args=pairs))
            n += moved
            if moved == 0:
                return n

    def clear(self) -> int:
        def go() -> int:
            pipe = self.r.pipeline(transaction=True)
            pipe.llen(self.k_failed)
            pipe.delete(self.k_failed)
            return int(pipe.execute()[0])
        return int(self._call("clear", go))

    def close(self) -> None:
        owed = self._owed
        if owed is not None:
            try:
                self._settle()
            except Exception as exc:   # its lease's expiry hands those messages out again
                log.warning("redis at %s: the ack of %d handled messages was not sent (%s): "
                            "they are handed out again once the lease expires", self.url,
                            owed[1], exc)
        if self._held is not None:
            try:
                self.release(self._held)
            except Exception:   # closing: the lease expiry returns them anyway
                pass
        try:
            self.r.close()
        except Exception:
            pass
