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
                 broker_args: tuple[str, ...] = (), rate: int = 150) -> None:
        self.net, self.tmp = net, tmp
        self.bootstrap = getattr(net, "bootstrap", BOOTSTRAP)
        self.first_members, self.member_opts = members, member_opts or {}
        self.broker_args, self.rate = broker_args, rate
        self.partitions = PARTITIONS
        self.broker: subprocess.Popen | None = None
        self.members: dict[str, subprocess.Popen] = {}
        self.incarnation: dict[str, int] = {}
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

    def _stem(self, proc: subprocess.Popen) -> str:
        for name, p in self.members.items():
            if p is proc:
                return f"member-{name}-{self.incarnation[name]}"
        return "*"                            # the broker: everyone's fault

    def pause(self, proc: subprocess.Popen, seconds: float, what: str) -> None:
        self.faults.append((time.time(), self._stem(proc)))
        proc.send_signal(signal.SIGSTOP)
        self.note(f"{what} stopped (SIGSTOP) for {seconds:.0f} s")
        time.sleep(seconds)
        proc.send_signal(signal.SIGCONT)
        self.note(f"{what} continued")

    def workload(self, *argv: str) -> subprocess.Popen:
        return self.net.spawn(self.net.client_ns,
                              [sys.executable, "-m", "tests.support.fault_workload", *argv],
                              stderr=open(self.tmp / "clients.err", "ab"))

    def start_member(self, name: str) -> None:
        n = self.incarnation[name] = self.incarnation.get(name, 0) + 1
        self.members[name] = self.workload("consume", self.bootstrap, TOPIC, GROUP,
                                           str(self.tmp / f"member-{name}-{n}.jsonl"),
                                           str(self.stop_members),
                                           json.dumps(self.member_opts.get(name, {})))
        self.note(f"member {name} started")

    def kill_member(self, name: str) -> None:
        self.faults.append((time.time(), self._stem(self.members[name])))
        self.members[name].send_signal(signal.SIGKILL)
        self.members[name].wait(10)
        self.note(f"member {name} killed (SIGKILL)")

    def leave(self, name: str) -> None:
        """Member ``name`` closes (leaves the group as an application does at shutdown)."""
        p = self.members.pop(name)
        (self.tmp / f"member-{name}-{self.incarnation[name]}.jsonl.leave").touch()
        p.wait(60)
        self.note(f"member {name} left (exit {p.returncode})")

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
        caught_up = self._wait_for_group(ends, 120)
        self.note(f"group caught up: {caught_up}")
        self.stop_members.touch()
        for p in self.members.values():
            p.wait(60)
        committed = self.workload("committed", self.bootstrap, TOPIC, str(self.partitions), GROUP,
                                  str(self.tmp / "committed.jsonl"))
        committed.wait(120)
        report = history.check(history.load(self.tmp / "producer.jsonl"), log,
                               self._members(), history.load(self.tmp / "committed.jsonl"),
                               self.faults)
        link = self.net.counters()
        self.note("link in all: " + ", ".join(f"{v} {k}" for k, v in link.items())
                  + f" (seed {self.net.seed})")
        return report, {"seconds": time.monotonic() - self.t0, "caught_up": caught_up, **link}

    def _wait_for_start(self, limit: float) -> None:
        """Until the producer has a record acknowledged and every first member was given
        its partitions once: the schedule's clock starts there (starting processes takes
        seconds on a loaded machine, and a fault before the group formed tests nothing)."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            acked = (self.tmp / "producer.jsonl").exists() and any(
                "ack" in e for e in history.load(self.tmp / "producer.jsonl"))
            members = self._members()
            if acked and all(any("assigned" in e for e in members.get(f"member-{n}-1", []))
                             for n in self.first_members):
                break
            time.sleep(0.2)
        self.t0 = time.monotonic()
        self.note("the producer and the group are under way: the schedule starts")

    def _members(self) -> dict[str, list[dict]]:
        return {f.stem: history.load(f) for f in sorted(self.tmp.glob("member-*.jsonl"))}

    def _wait_for_group(self, ends: dict[str, int], limit: float) -> bool:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            high: dict[str, int] = {}
            for evs in self._members().values():
                for e in evs:
                    for p, off in e.get("commit", {}).items():
                        high[p] = max(high.get(p, 0), off)
            if all(high.get(p, 0) >= end for p, end in ends.items()):
                return True
            time.sleep(0.5)
        return False


def events(run: Run, n: int = 12) -> str:
    """The members' last events other than records and commits (for a failure's message)."""
    out = []
    for name, evs in run._members().items():
        rest = [json.dumps(e)[:200] for e in evs if "rec" not in e and "commit" not in e]
        out.append(f"== {name}: " + "\n".join(rest[-n:]))
    return "\n".join(out)


def tail(path: Path, n: int = 30) -> str:
    if not os.path.exists(path):
        return ""
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
