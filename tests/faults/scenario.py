"""One fault run: kcodec's broker in one namespace, an idempotent producer and a group of
members in the other, a schedule of faults, then the history checker.

``Run(net, tmp).go(schedule, seconds)`` starts everything, calls each ``(at, action)`` of
the schedule at ``at`` seconds (``action(run)``), heals the link at ``seconds``, stops
the producer, reads the whole log, waits until the group has committed the end of every
partition, and returns the checker's ``Report`` with the timings.

``LocalNet`` is a stand-in for ``FaultNet`` with no link and no namespaces (loopback, no
root needed) for runs whose faults are the processes' own (the group history matrix).
Members take options (``member_opts``: client, group protocol, assignor, commit pattern;
tests/support/fault_workload.py); SIGSTOP, SIGKILL and broker restarts are recorded as
the checker's ``faults``.

Several groups can share one run (``groups``: group id -> its members' options): one
broker, one producer, one topic and one schedule, each group consuming the whole topic;
a member action (``start_member("c")``, ``pause_member``, ``kill_member``, ``leave``)
acts on that member of every group, each group's histories go to ``tmp/GROUP/`` and the
checker judges each group alone (``Run.reports``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import history
from tests.support.faultnet import BROKER_IP, FaultNet, _repo

TOPIC, GROUP, PARTITIONS = "events", "checkers", 3
BOOTSTRAP = f"{BROKER_IP}:9092"


class LocalNet:
    """FaultNet's interface on loopback: no link (``set`` does nothing), no namespaces."""

    broker_ns = client_ns = None
    seed = None

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        with socket.socket() as s:     # a port for the broker, known before it starts
            s.bind(("127.0.0.1", 0))
            self.bootstrap = f"127.0.0.1:{s.getsockname()[1]}"

    def __enter__(self) -> LocalNet:
        return self

    def __exit__(self, *exc: Any) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait(10)

    def set(self, **faults: Any) -> None:
        pass

    def counters(self) -> dict[str, int]:
        return {}

    def spawn(self, ns: Any, argv: list[str], **kw: Any) -> subprocess.Popen:
        kw.setdefault("cwd", _repo())
        p = subprocess.Popen(argv, **kw)
        self.procs.append(p)
        return p


class Run:
    def __init__(self, net: FaultNet | LocalNet, tmp: Path, *,
                 members: tuple[str, ...] = ("a", "b"),
                 member_opts: dict[str, dict[str, Any]] | None = None,
                 groups: dict[str, dict[str, dict[str, Any]]] | None = None,
                 broker_args: tuple[str, ...] = (), rate: int = 150) -> None:
        self.net, self.tmp = net, tmp
        self.bootstrap = getattr(net, "bootstrap", BOOTSTRAP)
        self.first_members = members
        self.groups = groups if groups is not None else {GROUP: member_opts or {}}
        self.dirs = {g: tmp if len(self.groups) == 1 else tmp / g for g in self.groups}
        for d in self.dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        self.broker_args, self.rate = broker_args, rate
        self.partitions = PARTITIONS
        self.broker: subprocess.Popen | None = None
        # (group, member name) -> its process now, and how many times it was started
        self.procs: dict[tuple[str, str], subprocess.Popen] = {}
        self.incarnation: dict[tuple[str, str], int] = {}
        self.reports: dict[str, history.Report] = {}
        self.stop_producer = tmp / "stop-producer"
        self.stop_members = tmp / "stop-members"
        self.log: list[str] = []
        # (wall time, the faulted member's history name or "*"): the checker's faults
        self.faults: list[tuple[float, str]] = []
        self.t0 = time.monotonic()

    def note(self, what: str) -> None:
        self.log.append(f"{time.monotonic() - self.t0:6.1f}s {what}")

    # ------------------------------------------------------------------ processes
    def start_broker(self) -> None:
        host, port = self.bootstrap.rsplit(":", 1)
        self.broker = self.net.spawn(self.net.broker_ns, [
            sys.executable, "-m", "kcodec", "broker", "--host", host, "--port", port,
            "--data-dir", str(self.tmp / "data"), "--partitions", str(PARTITIONS), "--json",
            "--config", "group.initial.rebalance.delay.ms=0",     # groups form at once
            *self.broker_args],
            stdout=subprocess.PIPE, stderr=open(self.tmp / "broker.err", "ab"), text=True)
        assert self.broker.stdout is not None
        line = self.broker.stdout.readline()
        assert line and json.loads(line)["bootstrap"] == self.bootstrap, line
        self.note("broker up")

    def kill_broker(self) -> None:
        assert self.broker is not None
        self.faults.append((time.time(), "*"))
        self.broker.send_signal(signal.SIGKILL)
        self.broker.wait(10)
        self.note("broker killed (SIGKILL)")

    def restart_broker(self, down: float = 2.0) -> None:
        self.kill_broker()
        time.sleep(down)
        self.start_broker()

    @property
    def members(self) -> dict[str, subprocess.Popen]:
        """The first group's members now, by name."""
        first = next(iter(self.groups))
        return {n: p for (g, n), p in self.procs.items() if g == first}

    def _stem(self, proc: subprocess.Popen) -> str:
        for (g, name), p in self.procs.items():
            if p is proc:
                stem = f"member-{name}-{self.incarnation[(g, name)]}"
                return stem if len(self.groups) == 1 else f"{g}/{stem}"
        return "*"                            # the broker: everyone's fault

    def faults_of(self, group: str) -> list[tuple[float, str]]:
        """The checker's faults for ``group``: its members' (by history name) and
        everyone's."""
        if len(self.groups) == 1:
            return list(self.faults)
        return [(t, who.split("/", 1)[1] if "/" in who else who) for t, who in self.faults
                if who == "*" or who.startswith(group + "/")]

    def pause(self, proc: subprocess.Popen, seconds: float, what: str) -> None:
        self.faults.append((time.time(), self._stem(proc)))
        proc.send_signal(signal.SIGSTOP)
        self.note(f"{what} stopped (SIGSTOP) for {seconds:.0f} s")
        time.sleep(seconds)
        proc.send_signal(signal.SIGCONT)
        self.note(f"{what} continued")

    def pause_member(self, name: str, seconds: float) -> None:
        """SIGSTOP member ``name`` of every group for ``seconds``."""
        procs = [p for (_g, n), p in self.procs.items() if n == name]
        for p in procs:
            self.faults.append((time.time(), self._stem(p)))
            p.send_signal(signal.SIGSTOP)
        self.note(f"member {name} stopped (SIGSTOP) for {seconds:.0f} s")
        time.sleep(seconds)
        for p in procs:
            p.send_signal(signal.SIGCONT)
        self.note(f"member {name} continued")

    def workload(self, *argv: str) -> subprocess.Popen:
        return self.net.spawn(self.net.client_ns,
                              [sys.executable, "-m", "tests.support.fault_workload", *argv],
                              stderr=open(self.tmp / "clients.err", "ab"))

    def start_member(self, name: str, limit: float = 90) -> None:
        """Member ``name`` of every group starts (again); returns once each process is under
        way (its history's first line; up to ``limit`` s): on a loaded machine a process
        takes seconds to start, and a fault done to a member not yet running tests nothing
        (the schedule's later steps come late instead)."""
        paths = []
        for g, opts in self.groups.items():
            n = self.incarnation[(g, name)] = self.incarnation.get((g, name), 0) + 1
            paths.append(self.dirs[g] / f"member-{name}-{n}.jsonl")
            self.procs[(g, name)] = self.workload(
                "consume", self.bootstrap, TOPIC, g, str(paths[-1]),
                str(self.stop_members), json.dumps(opts.get(name, {})))
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline and not all(
                path.exists() and path.stat().st_size for path in paths):
            time.sleep(0.1)
        self.note(f"member {name} started")

    def kill_member(self, name: str) -> None:
        procs = [p for (_g, n), p in self.procs.items() if n == name]
        for p in procs:
            self.faults.append((time.time(), self._stem(p)))
            p.send_signal(signal.SIGKILL)
        for p in procs:
            p.wait(10)
        self.note(f"member {name} killed (SIGKILL)")

    def leave(self, name: str) -> None:
        """Member ``name`` of every group closes (leaves the group as an application does
        at shutdown)."""
        procs = [self.procs.pop((g, name)) for g in self.groups]
        for g in self.groups:
            (self.dirs[g] / f"member-{name}-{self.incarnation[(g, name)]}.jsonl.leave").touch()
        for p in procs:
            p.wait(120)
        self.note(f"member {name} left (exit {', '.join(str(p.returncode) for p in procs)})")

    def add_partitions(self, total: int) -> None:
        """The topic grows to ``total`` partitions (CreatePartitions, from this process:
        a client process would take seconds to start on a loaded machine)."""
        from kcodec.protocol import CreatePartitionsRequest as C
        from tests.support.protocol_conn import Conn

        for _ in range(10):
            with Conn(self.bootstrap) as conn:
                got = conn.call(C(topics=[C.CreatePartitionsTopic(name=TOPIC, count=total)],
                                  timeout_ms=10000), 3)
            codes = [(r.error_code, r.error_message) for r in got.results]
            self.note(f"CreatePartitions to {total}: {codes}")
            if all(c == 0 for c, _ in codes):
                break
            time.sleep(0.5)
        assert all(c == 0 for c, _ in codes), codes
        self.partitions = total
        (self.tmp / "partitions").write_text(str(total))
        self.note(f"partitions: {total}")

    # ------------------------------------------------------------------ the run
    def go(self, schedule: list[tuple[float, Callable[[Run], Any]]], seconds: float,
           base: dict[str, Any]) -> tuple[history.Report, dict[str, float]]:
        self.net.set(**base)
        self.start_broker()
        (self.tmp / "partitions").write_text(str(self.partitions))
        producer = self.workload("produce", self.bootstrap, TOPIC,
                                 "@" + str(self.tmp / "partitions"),
                                 str(self.tmp / "producer.jsonl"), str(self.stop_producer),
                                 str(self.rate))
        for name in self.first_members:
            self.start_member(name)
        self._wait_for_start(90)
        for at, action in sorted(schedule, key=lambda x: x[0]):
            time.sleep(max(0.0, at - (time.monotonic() - self.t0)))
            action(self)
        time.sleep(max(0.0, seconds - (time.monotonic() - self.t0)))
        faulty = self.net.counters()
        self.net.set(delay_ms=0, jitter_ms=0, loss=0, dup=0, reorder=0, block="none")
        self.note("link healed; until then it had "
                  + ", ".join(f"{v} {k}" for k, v in faulty.items()))
        self.stop_producer.touch()
        producer.wait(180)
        self.note(f"producer done (exit {producer.returncode})")
        reader = self.workload("read", self.bootstrap, TOPIC, str(self.partitions),
                               str(self.tmp / "log.jsonl"))
        reader.wait(180)
        log = history.load(self.tmp / "log.jsonl")
        end = next((e for e in log if "ends" in e), {})
        assert end.get("complete"), f"the final read did not reach the end of the log: {end}"
        ends = end["ends"]
        caught = self._wait_for_group(ends, 120)
        caught_up = all(caught.values())
        self.note(f"group caught up: {caught_up}" if len(caught) == 1 else
                  "groups caught up: " + ", ".join(f"{g} {ok}" for g, ok in caught.items()))
        self.stop_members.touch()
        for p in self.procs.values():
            p.wait(60)
        readers = [self.workload("committed", self.bootstrap, TOPIC, str(self.partitions), g,
                                 str(self.dirs[g] / "committed.jsonl")) for g in self.groups]
        for reader in readers:
            reader.wait(120)
        produced = history.load(self.tmp / "producer.jsonl")
        for g in self.groups:
            self.reports[g] = history.check(produced, log, self._members(g),
                                            history.load(self.dirs[g] / "committed.jsonl"),
                                            self.faults_of(g))
        link = self.net.counters()
        self.note("link in all: " + ", ".join(f"{v} {k}" for k, v in link.items())
                  + f" (seed {self.net.seed})")
        return self.reports[next(iter(self.groups))], {
            "seconds": time.monotonic() - self.t0, "caught_up": caught_up,
            "caught_up_groups": caught, **link}

    def _wait_for_start(self, limit: float) -> None:
        """Until the producer has a record acknowledged and every first member was given
        its partitions once: the schedule's clock starts there (starting processes takes
        seconds on a loaded machine, and a fault before the group formed tests nothing)."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            acked = (self.tmp / "producer.jsonl").exists() and any(
                "ack" in e for e in history.load(self.tmp / "producer.jsonl"))
            if acked and all(any("assigned" in e for e in self._members(g).get(f"member-{n}-1", []))
                             for g in self.groups for n in self.first_members):
                break
            time.sleep(0.2)
        self.t0 = time.monotonic()
        self.note("the producer and the group are under way: the schedule starts")

    def _members(self, group: str | None = None) -> dict[str, list[dict]]:
        """The histories of ``group``'s members (the first group's by default), by name."""
        d = self.dirs[group if group is not None else next(iter(self.groups))]
        return {f.stem: history.load(f) for f in sorted(d.glob("member-*.jsonl"))}

    def _wait_for_group(self, ends: dict[str, int], limit: float) -> dict[str, bool]:
        """Until every group has committed ``ends`` (or ``limit`` s): whether each did."""
        deadline = time.monotonic() + limit
        done = dict.fromkeys(self.groups, False)
        while True:
            for g in [g for g, ok in done.items() if not ok]:
                high: dict[str, int] = {}
                for evs in self._members(g).values():
                    for e in evs:
                        for p, off in e.get("commit", {}).items():
                            high[p] = max(high.get(p, 0), off)
                done[g] = all(high.get(p, 0) >= end for p, end in ends.items())
            if all(done.values()) or time.monotonic() >= deadline:
                return done
            time.sleep(0.5)


def events(run: Run, n: int = 12, group: str | None = None) -> str:
    """The members' last events other than records and commits (for a failure's message)."""
    out = []
    for name, evs in run._members(group).items():
        rest = [json.dumps(e)[:200] for e in evs if "rec" not in e and "commit" not in e]
        out.append(f"== {name}: " + "\n".join(rest[-n:]))
    return "\n".join(out)


def tail(path: Path, n: int = 30) -> str:
    if not os.path.exists(path):
        return ""
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
