"""The master: starts the pullers and sinkers, restarts them, stops them, and answers the
control socket.

* A child that exits (crash, signal, a handler past its deadline) is restarted after a
  backoff (0.5 s doubling to 30 s; back to 0.5 s once it has run a minute), its exit code or
  signal logged (the child logs its own traceback). One whose RSS passes ``--max-rss-mb`` is
  asked to finish its batch and exit, then restarted at once.
* First SIGINT/SIGTERM: every child is told to stop (pullers commit and leave the group,
  sinkers finish the batch in hand); after ``--grace`` seconds the stragglers are killed.
  A second signal kills the children and exits at once.
* ``kcodec ctl`` questions are answered from the children's replies (asked on their pipes)
  and, for the store's queues, from the store itself.

Children are started with the ``spawn`` method: a fresh interpreter that imports the handler
by name, so nothing of the master (threads, sockets, client loops) leaks into them.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from multiprocessing.connection import wait
from typing import Any

from kcodec.runtime import control, views
from kcodec.runtime.child import EXIT_HUNG, EXIT_RECYCLED, rss_bytes, set_title

__all__ = ["Master"]

log = logging.getLogger(__name__)
# how often the children's RSS is read against --max-rss-mb (a /proc read each)
RSS_CHECK_S = 0.1


class _Slot:
    def __init__(self, role: str, index: int) -> None:
        self.role, self.index = role, index
        self.proc: Any = None
        self.conn: Any = None
        self.lock = threading.Lock()
        self.restarts = 0
        self.fails = 0
        self.started = 0.0
        self.due = 0.0             # when to start it again (0: now)
        self.last_exit: str | None = None
        self.recycling = False

    @property
    def name(self) -> str:
        return f"{self.role} {self.index}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.exitcode is None


class Master:
    def __init__(self, settings: Any, handler_ref: str) -> None:
        self.s = settings
        self.handler_ref = handler_ref
        self.ctx = multiprocessing.get_context("spawn")
        self.slots = [_Slot("puller", i) for i in range(settings.pullers)]
        if settings.storage != "direct":
            self.slots += [_Slot("sinker", i) for i in range(settings.sinkers)]
        self.stopping = 0.0
        self.signals = 0
        self.exit_code = 0
        self.started = time.time()
        self._ids = itertools.count(1)
        self._store: Any = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._server: socket.socket | None = None
        self.metrics_port: int | None = None       # the Prometheus endpoint's, once serving
        self.health_port: int | None = None        # the health endpoint's, once serving
        from kcodec.runtime.health import Ticker

        self._ticker = Ticker()

    # ------------------------------------------------------------------ life
    def run(self) -> int:
        s = self.s
        from kcodec.runtime.statedir import lock_dir, wait_for_children
        from kcodec.runtime.storage.file import seal_stale

        lock_fd = lock_dir(s.state_dir)       # one runtime per state directory
        try:
            wait_for_children(s.state_dir, s.grace + 10, log)
        except BaseException:
            os.close(lock_fd)
            raise
        seal_stale(os.path.join(s.state_dir, "store"))
        if s.group_session_timeout_ms is not None:
            try:
                self._set_group_session_timeout()
            except BaseException:
                os.close(lock_fd)
                raise
        if s.storage != "direct":
            try:
                self.store().prepare(s)
            except BaseException:
                os.close(lock_fd)
                raise
        set_title(f"kcodec run: master (group {s.group})", "kcodec-master")
        self._server = control.listen(s.socket_path)
        control.write_description(s)
        exporter = None
        old = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        self._wake_w.setblocking(False)
        old_fd = signal.set_wakeup_fd(self._wake_w.fileno(), warn_on_full_buffer=False)
        log.info("kcodec run: group %r, topics %s, storage %s, %d puller(s)%s; control socket %s",
                 s.group, ",".join(s.topics), s.storage, s.pullers,
                 f", {s.sinkers} sinker(s)" if s.storage != "direct" else "", s.socket_path)
        health = None
        if s.pullers > 1 and not s.assign:
            threading.Thread(target=self._check_partitions, daemon=True,
                             name="kcodec-partitions").start()
        try:
            exporter = self._serve_metrics()
            health = self._serve_health()
            self._loop()
        finally:
            if health is not None:
                health.close()
            signal.set_wakeup_fd(old_fd)
            for sig, h in old.items():
                signal.signal(sig, h)
            self._server.close()
            if exporter is not None:
                exporter.close()
            try:
                os.unlink(s.socket_path)
            except OSError:
                pass
            if self._store is not None:
                self._store.close()
            os.close(lock_fd)
        return self.exit_code

    def _serve_metrics(self) -> Any:
        """With ``metrics_port``: a Prometheus endpoint whose every scrape asks each process
        for its metrics (the pullers' consumer metrics, every process's runtime counters)
        and adds the master's own (processes, restarts)."""
        if self.s.metrics_port is None:
            return None
        from kcodec.observe.metrics import Registry
        from kcodec.observe.prometheus import serve

        reg = Registry({"group": self.s.group})

        def collect() -> list[tuple[str, str, dict, float, str]]:
            g = "kcodec.runtime:Master"
            out: list[tuple[str, str, dict, float, str]] = [
                (g, "processes-alive", {}, sum(sl.alive for sl in self.slots), "gauge"),
                (g, "restarts", {}, sum(sl.restarts for sl in self.slots), "counter")]
            for _sl, got in self._ask_all("metrics"):
                if isinstance(got, list):
                    out += [tuple(x) for x in got]   # type: ignore[misc]
            try:     # the store's backlog: what waits (and what failed for good)
                b = self.store().backlog()
            except (ConnectionError, OSError, RuntimeError) as exc:
                log.warning("metrics: the store's backlog: %s", exc)
            else:
                out += [("kcodec.runtime:Store", k, {"storage": self.s.storage}, float(v), "gauge")
                        for k, v in b.items()]
            return out
        reg.collect(collect)
        try:
            exporter = serve(self.s.metrics_port, reg)
        except ImportError as exc:
            raise RuntimeError(f"--metrics-port: {exc}") from None
        except OSError as exc:
            raise RuntimeError(f"--metrics-port {self.s.metrics_port}: cannot listen: "
                               f"{exc.strerror or exc}") from None
        log.info("Prometheus metrics on http://%s:%d/metrics", exporter.addr, exporter.port)
        self.metrics_port = exporter.port
        return exporter

    def _set_group_session_timeout(self) -> None:
        """The consumer protocol's session timeout is the group's config
        ``consumer.session.timeout.ms`` (KIP-848), set here by IncrementalAlterConfigs on
        the GROUP resource; the broker checks it against its
        ``group.consumer.min/max.session.timeout.ms`` (Kafka's: 45000 to 60000)."""
        from kcodec.client import Admin
        from kcodec.client.config_admin import AlterConfigOp
        from kcodec.errors import KcodecError

        v = self.s.group_session_timeout_ms
        try:
            with Admin(**self.s.admin_config()) as a:
                got = a.incremental_alter_configs(
                    {("group", self.s.group): [AlterConfigOp("consumer.session.timeout.ms",
                                                             str(v))]})
        except KcodecError as exc:
            raise RuntimeError(f"--group-session-timeout-ms {v}: {exc}") from None
        err = next(iter(got.values()), None)
        if err is not None:
            raise RuntimeError(f"--group-session-timeout-ms {v}: the broker refused the group "
                               f"config consumer.session.timeout.ms ({err}); it must lie within "
                               "its group.consumer.min.session.timeout.ms and "
                               "group.consumer.max.session.timeout.ms (Kafka's: 45000 to 60000)")
        log.info("group %r: consumer.session.timeout.ms = %d (consumer protocol)",
                 self.s.group, v)

    def _check_partitions(self) -> None:
        """Warn when pullers outnumber the topics' partitions: the others idle."""
        from kcodec.client import Admin
        from kcodec.errors import KcodecError

        try:
            with Admin(**self.s.admin_config()) as a:
                md = a.describe_cluster(list(self.s.topics))
        except (KcodecError, OSError):
            return
        n = sum(len(t.partitions) for t in md.topics)
        if n and self.s.pullers > n:
            log.warning("%d pullers for %d partitions of %s: %d of them will hold nothing and "
                        "idle (a group gives each partition to one member); give --pullers %d",
                        self.s.pullers, n, ",".join(self.s.topics), self.s.pullers - n, n)

    def _serve_health(self) -> Any:
        """With ``health_port``: ``/health`` and ``/ready`` (kcodec.runtime.health)."""
        if self.s.health_port is None:
            return None
        from kcodec.runtime.health import HealthServer

        try:
            srv = HealthServer(self.s.health_port, self._health)
        except OSError as exc:
            raise RuntimeError(f"--health-port {self.s.health_port}: cannot listen: "
                               f"{exc.strerror or exc}") from None
        log.info("health on http://%s:%d/health and /ready", srv.addr, srv.port)
        self.health_port = srv.port
        return srv

    def _health(self) -> tuple[bool, bool, dict[str, Any]]:
        why: list[str] = []
        if self.stopping:
            why.append("stopping")
        for sl in self.slots:
            if not sl.alive:
                why.append(f"{sl.name} is not running" +
                           (f" ({sl.last_exit})" if sl.last_exit else ""))
        pullers = [sl for sl in self.slots if sl.role == "puller" and sl.alive]
        for sl, got in self._ask_all("ready", "puller"):
            if not got:
                why.append(f"{sl.name} has not joined its group yet")
        if len(pullers) and self.s.storage != "direct":
            try:
                self.store().backlog()
            except (ConnectionError, OSError, RuntimeError) as exc:
                why.append(f"the store does not answer: {exc}")
        return self._ticker.alive, not why, {"why": why}

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.signals += 1
        if self.signals == 1:
            self.stopping = time.monotonic()
            log.info("signal %s: stopping (pullers commit and leave the group, sinkers finish "
                     "their batch; at most %g s; a second signal stops at once)",
                     signal.Signals(signum).name, self.s.grace)
        else:
            log.warning("second signal: killing every process now")
            self.exit_code = 128 + signum

    def stop(self) -> None:
        """Ask for a graceful stop (as the first signal does)."""
        if not self.stopping:
            self.stopping = time.monotonic()
            self._wake_w.send(b"\0")

    def _loop(self) -> None:
        told = False
        next_rss = 0.0
        while True:
            now = time.monotonic()
            self._ticker.tick()
            if self.signals > 1:
                for sl in self.slots:
                    if sl.alive:
                        sl.proc.kill()
                for sl in self.slots:
                    if sl.proc is not None:
                        sl.proc.join(5)
                return
            if self.stopping:
                if not told:
                    told = True
                    for sl in self.slots:
                        if sl.alive:
                            self._tell(sl, "stop")
                if not any(sl.alive for sl in self.slots):
                    log.info("stopped")
                    return
                if now - self.stopping > self.s.grace:
                    for sl in self.slots:
                        if sl.alive:
                            log.error("%s (pid %d) did not stop within the grace of %g s: killed",
                                      sl.name, sl.proc.pid, self.s.grace)
                            sl.proc.kill()
                            sl.proc.join(5)
                    self.exit_code = self.exit_code or 1
                    return
            else:
                for sl in self.slots:
                    if sl.proc is None and now >= sl.due:
                        self._start(sl)
                if self.s.max_rss_mb and now >= next_rss:
                    next_rss = now + RSS_CHECK_S
                    self._check_rss()
            waitables: list[Any] = [self._wake_r, self._server]
            waitables += [sl.proc.sentinel for sl in self.slots if sl.alive]
            ready = wait(waitables, timeout=RSS_CHECK_S if self.s.max_rss_mb else 0.5)
            if self._wake_r in ready:
                try:
                    self._wake_r.recv(512)
                except BlockingIOError:
                    pass
            for sl in self.slots:
                if sl.proc is not None and sl.proc.exitcode is not None:
                    self._reap(sl)
            if self._server in ready:
                self._accept()

    def _start(self, sl: _Slot) -> None:
        parent, child = self.ctx.Pipe()
        from kcodec.runtime.child import main

        p = self.ctx.Process(target=main, name=f"kcodec-run-{sl.role}-{sl.index}",
                             args=(sl.role, sl.index, self.s.to_dict(), self.handler_ref, child))
        p.start()
        child.close()
        sl.proc, sl.conn, sl.started, sl.recycling = p, parent, time.monotonic(), False
        log.info("%s started (pid %d)", sl.name, p.pid)

    def _reap(self, sl: _Slot) -> None:
        code = sl.proc.exitcode
        pid = sl.proc.pid
        ran = time.monotonic() - sl.started
        sl.proc.join()
        sl.conn.close()
        sl.proc = sl.conn = None
        if code < 0:
            try:
                what = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                what = f"was killed by signal {-code}"
        else:
            what = f"exited with code {code}"
        sl.last_exit = what
        if sl.role == "puller" and code not in (0, EXIT_RECYCLED):
            # it may not have left the group: leave on its behalf, so its partitions move
            # now rather than when its session times out
            from kcodec.runtime.members import remove_dead_member

            remove_dead_member(self.s, sl.index, pid, what)
        if self.stopping:
            log.info("%s %s", sl.name, what)
            return
        sl.restarts += 1
        if code == EXIT_RECYCLED:
            sl.due = 0.0
            log.warning("%s %s after passing the memory limit (--max-rss-mb %d): restarting",
                        sl.name, what, self.s.max_rss_mb)
            return
        if ran > 60:
            sl.fails = 0
        sl.fails += 1
        delay = min(0.5 * 2 ** (sl.fails - 1), 30.0)
        if code == EXIT_HUNG:
            why = " (its handler ran past --handler-timeout)"
        elif code == 5:
            why = " (a fetched record batch does not decode: see its log)"
        elif code == 0:
            why = " unexpectedly"
        else:
            why = ""
        log.error("%s %s%s; restarting in %.1f s", sl.name, what, why, delay)
        sl.due = time.monotonic() + delay

    def _check_rss(self) -> None:
        limit = self.s.max_rss_mb << 20
        for sl in self.slots:
            if not sl.alive or sl.recycling:
                continue
            rss = rss_bytes(sl.proc.pid)
            if rss > limit:
                sl.recycling = True
                log.warning("%s (pid %d) uses %.0f MB, over --max-rss-mb %d: it restarts after "
                            "its current batch", sl.name, sl.proc.pid, rss / 2**20,
                            self.s.max_rss_mb)
                self._tell(sl, "recycle")

    # ------------------------------------------------------------------ asking children
    def _tell(self, sl: _Slot, op: str) -> None:
        # on the pipe, not by a signal: after a terminal's Ctrl-C (which reaches every
        # process of the group) another signal would count as the second one
        self._ask(sl, op, timeout=2.0)

    def _ask(self, sl: _Slot, op: str, timeout: float = 10.0) -> Any:
        with sl.lock:
            conn = sl.conn       # (the main thread may reap the process meanwhile)
            if not sl.alive or conn is None:
                return None
            rid = next(self._ids)
            try:
                conn.send({"id": rid, "op": op})
                end = time.monotonic() + timeout
                while True:
                    left = end - time.monotonic()
                    if left <= 0 or not conn.poll(left):
                        return None
                    msg = conn.recv()
                    if msg.get("id") == rid:
                        return msg.get("result")
            except (OSError, EOFError, ValueError):
                return None

    def _ask_all(self, op: str, role: str | None = None) -> list[tuple[_Slot, Any]]:
        slots = [sl for sl in self.slots if sl.alive and (role is None or sl.role == role)]
        out: list[tuple[_Slot, Any]] = [(sl, None) for sl in slots]
        threads = []
        for i, sl in enumerate(slots):
            def go(i: int = i, sl: _Slot = sl) -> None:
                out[i] = (sl, self._ask(sl, op))
            t = threading.Thread(target=go, daemon=True)
            t.start()
            threads.append(t)
        for t in threads:
            t.join(15)
        return out

    # ------------------------------------------------------------------ control socket
    def _accept(self) -> None:
        assert self._server is not None
        try:
            conn, _ = self._server.accept()
        except (BlockingIOError, InterruptedError):
            return
        threading.Thread(target=self._serve, args=(conn,), daemon=True, name="kcodec-ctl").start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            try:
                req = control.read_request(conn)
                result = self.handle(req)
                control.reply(conn, {"ok": True, "result": result})
            except (ValueError, RuntimeError, LookupError, ConnectionError) as exc:
                # (ConnectionError: the store's server is away, said in one line)
                control.reply(conn, {"ok": False, "error": str(exc)})
            except Exception as exc:   # answer what went wrong rather than hang up
                log.exception("control request failed")
                control.reply(conn, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        except OSError:
            pass
        finally:
            conn.close()

    def store(self) -> Any:
        if self._store is None:
            from kcodec.runtime.storage import open_store

            self._store = open_store(self.s, "master", quick=True)
        return self._store

    def handle(self, req: dict[str, Any]) -> Any:
        op = req["op"]
        if op not in control.QUESTIONS:
            raise ValueError(f"unknown question {op!r}; ask one of: {', '.join(control.QUESTIONS)}")
        if op == "status":
            return self._status()
        if op in ("lag", "offsets"):
            live: list[dict[str, Any]] = []
            for _sl, got in self._ask_all("offsets", "puller"):
                live += got or []
            if op == "offsets":
                return views.offsets(self.s, live)
            return views.lag(self.s, self.store(), live)
        if op in views.STORE_QUESTIONS:
            return views.store_answer(self.s, self.store(), op, req)
        if op == "stop":
            self.stop()
            return {"stopping": True}
        pullers = [sl for sl in self.slots if sl.alive and sl.role == "puller"]
        if not pullers:
            raise RuntimeError("no puller is running to ask the cluster; see `kcodec ctl status`")
        if op == "metadata":
            what = req.get("what", "brokers")
            if what not in ("brokers", "topics"):
                raise ValueError(f"metadata of what? brokers or topics, not {what!r}")
            md = self._ask(pullers[0], "metadata", timeout=30)
            if md is None:
                raise RuntimeError("the puller did not answer within 30 s")
            if "error" in md:
                raise RuntimeError(md["error"])
            return md["brokers"] if what == "brokers" else md["topics"]
        # members, leader
        seen = [v for _sl, v in self._ask_all("group", "puller") if v]
        leaders = {v["leader"] for v in seen if v.get("leader")}
        if op == "leader":
            if not leaders and seen and all(v.get("protocol") == "consumer" for v in seen):
                return {"leader": None, "ours": False, "protocol": "consumer",
                        "source": "the consumer protocol (KIP-848) has no leader member: the "
                                  "group coordinator on the broker assigns the partitions"}
            if not leaders:
                raise RuntimeError("no member knows a leader yet (still joining, or the "
                                   "group uses the consumer protocol, which has none)")
            mine = {v["member_id"] for v in seen}
            leader = sorted(leaders)[0]
            return {"leader": leader, "ours": leader in mine, "protocol": "classic",
                    "source": "the JoinGroup response each member got (classic protocol)"}
        md = self._ask(pullers[0], "members", timeout=30)
        if md is None:
            raise RuntimeError("the puller did not answer within 30 s")
        if "error" in md:
            raise RuntimeError(md["error"])
        ours = {v["member_id"] for v in seen}
        for m in md["members"]:
            m["leader"] = m["member_id"] in leaders
            m["ours"] = m["member_id"] in ours
        return md

    def _status(self) -> dict[str, Any]:
        answers = dict((id(sl), got) for sl, got in self._ask_all("status"))
        procs = []
        for sl in self.slots:
            got = answers.get(id(sl)) or {}
            row = {"role": sl.role, "slot": sl.index, "pid": sl.proc.pid if sl.alive else None,
                   "state": got.get("state") or ("running" if sl.alive else "restarting"),
                   "restarts": sl.restarts, "last_exit": sl.last_exit,
                   "rss": got.get("rss", 0), "records": got.get("records", 0),
                   "rate": got.get("rate", 0.0), "done": got.get("done", 0),
                   "retried": got.get("retried", 0), "dead": got.get("dead", 0),
                   "paused": got.get("paused", False), "in_hand": got.get("in_hand", 0)}
            if not sl.alive and sl.due:
                row["restart_in"] = round(max(sl.due - time.monotonic(), 0.0), 1)
            procs.append(row)
        return {"pid": os.getpid(), "group": self.s.group, "topics": self.s.topics,
                "storage": self.s.storage, "since": self.started,
                "state": "stopping" if self.stopping else "running", "rss": rss_bytes(),
                "processes": procs}
