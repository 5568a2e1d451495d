"""Run librdkafka's own integration tests against ``kcodec broker`` and write a table.

    python -m tools.conformance /path/to/librdkafka [--protocol classic|consumer|both]
        [--tests 0001,0113,...] [--out results.md] [--logs DIR] [--timeout S]

The librdkafka checkout stays outside this repository. Its test runner is built there if it
is missing (``./configure``, ``make libs``, ``make -C tests build``). Each test number gets a
fresh broker, set up as librdkafka's own test clusters are: ``--partitions 4``, the ACL
authorizer allowing everyone when no ACL matches, ``User:admin`` a super user,
``group.share.min.record.lock.duration.ms=1000``, and for fetch from follower each node
in its own rack (``broker.rack=RACK<node id>``) with Kafka's rack-aware
``replica.selector.class``. Its cluster
tests (those not flagged local or manual) run with ``TEST_KAFKA_VERSION=4.2.0`` in full
mode (not ``-Q``) under each ``TEST_CONSUMER_GROUP_PROTOCOL`` asked for. A test whose run
says the cluster has too few brokers for its replication factor runs again on three nodes
(``--nodes 3``), and the 3-node result is the one reported. Tests of the ``noautocreate``
scenario run on a broker started with ``--no-auto-create``. The tests of SASL itself
(``SASL_TESTS``: credentials, re-authentication), which librdkafka's runner skips on a
plaintext cluster, run on a broker whose one listener is SASL_PLAINTEXT (PLAIN and SCRAM
users, ``User:admin`` the super user, ``connections.max.reauth.ms`` set as its SASL clusters
set it) and log in as admin with SCRAM-SHA-256. The tests of TLS itself (``SSL_TESTS``:
certificate verification), which need the certificate files and ``SSL_*`` variables
librdkafka's SSL clusters provide, get a certificate set made for the run
(:mod:`.ssl_certs`: a root CA, an intermediate CA signing the broker's certificate, a client
certificate in PEM, DER and PKCS#12) and a broker whose one listener is SSL and requires a
client certificate (``ssl.client.auth=required``). The tests of OAUTHBEARER with OIDC
(``OIDC_TESTS``), which need the token endpoints and key files of an identity provider in
``VALID_OIDC_URL``, ``EXPIRED_TOKEN_OIDC_URL``, ``INVALID_OIDC_URL`` and
``OAUTHBEARER_CLIENT_PRIVATE_KEY*``, get a mock provider started for the run
(:mod:`.oidc`: JWTs signed by a key it makes, its JWKS) and three nodes (their topics
have three replicas) whose one listener is SASL_PLAINTEXT with OAUTHBEARER only, checking
tokens against that JWKS (``sasl.oauthbearer.jwks.endpoint.url``, the expected audience
and issuer); test.conf logs in with ``sasl.oauthbearer.method=oidc``. ``kafka-topics.sh`` and
``kafka-acls.sh`` are stand-ins on kcodec's Admin and CLI (:mod:`.kafka_scripts`).

The table (Markdown) lists every test with its result per protocol; a run's logs are kept
in ``--logs`` (one file per test number, protocol and node count).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:     # ssl_certs and oidc need the cryptography package: imported when used
    from tools.conformance.oidc import Provider
    from tools.conformance.ssl_certs import Certs

REPO = Path(__file__).resolve().parents[2]
KAFKA_VERSION = "4.2.0"
# as librdkafka's test clusters (its cluster_testing.py and CI scripts)
BROKER_ARGS = ["--partitions", "4", "--authorizer", "--allow-everyone-if-no-acl-found",
               "--super-users", "User:admin",
               "--share-config", "group.share.min.record.lock.duration.ms=1000",
               # broker.rack=RACK${appid} and the rack-aware selector, as its clusters set
               # them for Kafka 2.4+ (cluster_testing.py); {id} is each node's id here
               "--config", "broker.rack=RACK{id}",
               "--config", "replica.selector.class="
                           "org.apache.kafka.common.replica.RackAwareReplicaSelector"]
#: tests that need a SASL listener (they skip without one); they run on a SASL broker
SASL_TESTS = {"0135", "0142"}
SASL_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
#: tests that need an SSL listener and the SSL_* certificate variables (they skip without)
SSL_TESTS = {"0097"}
#: tests of OAUTHBEARER with an OIDC provider (they skip without its token endpoints); they
#: run on three nodes from the start (their topics have replication factor 3)
OIDC_TESTS = {"0126"}
SASL_ARGS = ["--sasl-mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
             "--connections-max-reauth-ms", "10000"]
# what a run prints when a topic needs more brokers than the cluster has
_TOO_FEW_BROKERS = re.compile(r"INVALID_REPLICATION_FACTOR|Replication factor: \d+ larger than "
                              r"available brokers|replication factor.*larger than"
                              r"|replication factor \d+: this cluster has \d+ node", re.I)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ROW = re.compile(r"^\|\s*(\S+)\s*\|\s*([A-Z]+)\s*\|\s*([0-9.]+)s\s*\|")
# without a summary (the runner aborted): the per-test lines
_FAILED = re.compile(r'^### Test "(\w+)[ "]')
_ENDED = re.compile(r"=+ Test (\w+) (PASSED|SKIPPED) =+")


@dataclass
class Test:
    name: str
    number: str
    flags: str
    scenario: str = "default"

    @property
    def cluster(self) -> bool:
        """A test that needs a broker (librdkafka's runner skips manual ones itself)."""
        return "TEST_F_LOCAL" not in self.flags and "TEST_F_MANUAL" not in self.flags


def list_tests(checkout: Path) -> list[Test]:
    """The tests of ``tests/test.c``'s table, in its order."""
    src = (checkout / "tests" / "test.c").read_text(encoding="utf-8", errors="replace")
    start = src.index("struct test tests[] = {")
    table = src[start:src.index("\n};", start)]
    out = []
    # each entry runs from its _TEST( to the next one
    parts = re.split(r"(?=_TEST\()", table)
    for part in parts:
        m = re.match(r"_TEST\(\s*(\w+),\s*([^,)]*)", part)
        if not m:
            continue
        scen = re.search(r'\.scenario\s*=\s*"([^"]*)"', part)
        name = m.group(1)
        out.append(Test(name, name.split("_", 1)[0], m.group(2).strip(),
                        scen.group(1) if scen else "default"))
    return out


def build(checkout: Path, log: Path) -> Path:
    """The test runner, built if it is missing."""
    runner = checkout / "tests" / "test-runner"
    if runner.exists():
        return runner
    with open(log, "w", encoding="utf-8") as f:
        steps = [["./configure"], ["make", "-j2", "libs"], ["make", "-C", "tests", "build"]]
        for step in steps:
            print(f"building: {' '.join(step)} (log {log})", flush=True)
            subprocess.run(["nice", *step], cwd=checkout, stdout=f, stderr=subprocess.STDOUT,
                           check=True)
    return runner


class Broker:
    """A fresh ``kcodec broker`` in its own process."""

    def __init__(self, nodes: int = 1, auto_create: bool = True, log: Path | None = None,
                 sasl_users: Path | None = None, certs: Certs | None = None,
                 oidc: Provider | None = None) -> None:
        args = [sys.executable, "-m", "kcodec", "broker", "--json", *BROKER_ARGS]
        if nodes > 1:
            args += ["--nodes", str(nodes)]
        if not auto_create:
            args.append("--no-auto-create")
        if sasl_users is not None:     # one listener, SASL_PLAINTEXT (SASL_TESTS)
            args += ["--listeners", "SASL_PLAINTEXT://127.0.0.1:0", "--sasl-users",
                     str(sasl_users), *SASL_ARGS]
        if certs is not None:          # one listener, SSL with client certificates (SSL_TESTS)
            args += ["--listeners", "SSL://127.0.0.1:0",
                     "--ssl-certfile", str(certs.broker_certfile),
                     "--ssl-keyfile", str(certs.broker_keyfile),
                     "--ssl-cafile", str(certs.cafile), "--ssl-client-auth", certs.client_auth]
        if oidc is not None:           # one listener, SASL_PLAINTEXT OAUTHBEARER (OIDC_TESTS)
            args += ["--listeners", "SASL_PLAINTEXT://127.0.0.1:0",
                     "--sasl-mechanisms", "OAUTHBEARER"]
            for name, value in oidc.broker_config().items():
                args += ["--config", f"{name}={value}"]
        env = dict(os.environ, PYTHONPATH=_pythonpath())
        self._err: Any = open(log, "w", encoding="utf-8") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.stop()
            raise RuntimeError(f"kcodec broker did not start (log: {log})")
        self.bootstrap = json.loads(line)["bootstrap"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._err is not subprocess.DEVNULL:
            self._err.close()


def _pythonpath() -> str:
    old = os.environ.get("PYTHONPATH")
    return str(REPO) + (os.pathsep + old if old else "")


def stand_ins(root: Path) -> Path:
    """A ``KAFKA_PATH`` whose ``bin/`` has kafka-topics.sh and kafka-acls.sh on kcodec."""
    bindir = root / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    for script in ("kafka-topics", "kafka-acls"):
        path = bindir / f"{script}.sh"
        path.write_text("#!/bin/sh\n"
                        f"PYTHONPATH='{_pythonpath()}' exec '{sys.executable}' "
                        f"-m tools.conformance.kafka_scripts {script} \"$@\"\n", encoding="utf-8")
        path.chmod(0o755)
    return root


def parse_summary(output: str) -> dict[str, tuple[str, float]]:
    """The runner's summary rows: test name -> (PASSED/FAILED/SKIPPED/..., seconds)."""
    rows: dict[str, tuple[str, float]] = {}
    ended: dict[str, tuple[str, float]] = {}
    for line in _ANSI.sub("", output).splitlines():
        m = _ROW.match(line)
        if m and m.group(1) != "<MAIN>":
            rows[m.group(1)] = (m.group(2), float(m.group(3)))
        elif (m := _FAILED.match(line)) and m.group(1) != "MAIN":
            ended[m.group(1)] = ("FAILED", 0.0)
        elif m := _ENDED.search(line):
            ended.setdefault(m.group(1), (m.group(2), 0.0))
    return rows or ended


def run_number(runner: Path, kafka_path: Path, number: str, protocol: str, scenario: str,
               nodes: int, timeout: float, logs: Path, multiplier: float = 1.0
               ) -> tuple[dict[str, tuple[str, float]], str]:
    """Run the tests ``NNNN_*`` of one scenario on a fresh broker; (rows, output)."""
    tag = f"{number}-{scenario}-{protocol}-{nodes}n"
    work = Path(tempfile.mkdtemp(prefix=f"rdk-{number}-"))
    users = None
    if number in SASL_TESTS:
        users = work / "sasl-users"
        users.write_text("".join(f"{u}:{pw}\n" for u, pw in SASL_USERS.items()),
                         encoding="utf-8")
    provider = None
    try:
        certs = None
        if number in SSL_TESTS:
            from tools.conformance import ssl_certs
            certs = ssl_certs.make(work / "ssl")
        if number in OIDC_TESTS:
            from tools.conformance.oidc import Provider
            provider = Provider(work / "oidc")
        broker = Broker(nodes, auto_create=scenario != "noautocreate",
                        log=logs / f"{tag}.broker.log", sasl_users=users, certs=certs,
                        oidc=provider)
    except BaseException:
        if provider is not None:
            provider.close()
        shutil.rmtree(work, ignore_errors=True)
        raise
    try:
        conf = work / "test.conf"
        text = f"bootstrap.servers={broker.bootstrap}\n"
        if users is not None:
            text += ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                     f"sasl.username=admin\nsasl.password={SASL_USERS['admin']}\n")
        if certs is not None:
            text += "security.protocol=SSL\n" + certs.client_conf()
        if provider is not None:    # 0126 looks for "sasl" in lower case
            text += "security.protocol=sasl_plaintext\n" + provider.client_conf()
        if multiplier != 1.0:       # librdkafka's own knob: its tests' timeouts, scaled
            text += f"test.timeout.multiplier={multiplier}\n"
        conf.write_text(text, encoding="utf-8")
        checkout = runner.parent.parent
        env = dict(os.environ,
                   LD_LIBRARY_PATH=f"{checkout / 'src'}:{checkout / 'src-cpp'}",
                   RDKAFKA_TEST_CONF=str(conf), TEST_KAFKA_VERSION=KAFKA_VERSION,
                   TEST_CONSUMER_GROUP_PROTOCOL=protocol, TESTS=f"{number}_",
                   KAFKA_PATH=str(kafka_path), BROKERS=broker.bootstrap,
                   **(certs.env() if certs is not None else {}),
                   **(provider.env() if provider is not None else {}))
        args = [str(runner), "-L", "-p1"]
        if scenario != "default":
            args += ["-s", scenario]
        try:
            done = subprocess.run(args, cwd=runner.parent, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=timeout)
            output = done.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as exc:
            output = (exc.stdout or b"").decode("utf-8", "replace") + f"\n[harness: timed out after {timeout:.0f}s]\n"
    finally:
        broker.stop()
        if provider is not None:
            provider.close()
            (logs / f"{tag}.oidc.log").write_text("".join(f"{r}\n" for r in provider.requests),
                                                 encoding="utf-8")
        shutil.rmtree(work, ignore_errors=True)
    (logs / f"{tag}.log").write_text(output, encoding="utf-8")
    rows = parse_summary(output)
    if "[harness: timed out" in output:
        rows = {**rows, **{n: ("TIMEOUT", timeout) for n, (s, _) in rows.items() if s == "RUNNING"}}
        if not rows:
            rows = {f"{number}_*": ("TIMEOUT", timeout)}
    return rows, output


def run(checkout: Path, protocols: list[str], only: set[str] | None, timeout: float,
        logs: Path, nodes3: set[str], multiplier: float = 1.0
        ) -> dict[str, dict[str, tuple[str, float, int]]]:
    """{protocol: {test name: (status, seconds, nodes)}}."""
    runner = build(checkout, logs / "build.log")
    tests = [t for t in list_tests(checkout) if t.cluster and (only is None or t.number in only)]
    kafka_path = stand_ins(logs / "kafka")
    groups: dict[tuple[str, str], list[Test]] = {}
    for t in tests:
        for scen in t.scenario.split(","):
            groups.setdefault((t.number, scen), []).append(t)
    results: dict[str, dict[str, tuple[str, float, int]]] = {}
    for protocol in protocols:
        res = results[protocol] = {}
        for (number, scen), members in groups.items():
            nodes = 3 if number in nodes3 or number in OIDC_TESTS else 1
            began = time.monotonic()
            rows, output = run_number(runner, kafka_path, number, protocol, scen, nodes,
                                      timeout, logs, multiplier)
            if nodes == 1 and _TOO_FEW_BROKERS.search(output) and any(
                    s != "PASSED" for s, _ in rows.values()):
                nodes = 3
                rows, output = run_number(runner, kafka_path, number, protocol, scen, 3,
                                          timeout, logs, multiplier)
            if number in OIDC_TESTS and "OAuth/OIDC depends on libcurl" in output:
                print(f"[{protocol}] {number}: this librdkafka was built without libcurl, so "
                      "without OIDC: install libcurl's headers (libcurl4-openssl-dev) and "
                      "build it again", flush=True)
            names = {t.name for t in members}
            for name, (status, secs) in rows.items():
                if status == "SKIPPED" and res.get(name, ("SKIPPED",))[0] != "SKIPPED":
                    continue      # another scenario's run of the number skips it
                if name in names or name.endswith("_*"):
                    res[name] = (status, secs, nodes)
            for name in names - set(rows):
                res.setdefault(name, ("NOT RUN", 0.0, nodes))
            line = ", ".join(f"{n} {res[n][0]}" for n in sorted(names) if n in res)
            print(f"[{protocol}] {number} ({scen}, {nodes} node{'s' if nodes > 1 else ''}, "
                  f"{time.monotonic() - began:.0f}s): {line}", flush=True)
    return results


def from_logs(logs: Path, only: set[str] | None = None
              ) -> dict[str, dict[str, tuple[str, float, int]]]:
    """The results a run left in ``logs`` (``NNNN-scenario-protocol-Kn.log``) for the tests
    named in ``only`` (default all), the last log of a test number winning (a 3-node run
    over the 1-node one, a rerun over both) except that a scenario's skip never hides
    another scenario's result."""
    results: dict[str, dict[str, tuple[str, float, int]]] = {}
    name = re.compile(r"^(\d{4})-(\w+)-(classic|consumer)-(\d+)n\.log$")
    for path in sorted(logs.glob("*.log"), key=lambda q: q.stat().st_mtime):
        m = name.match(path.name)
        if not m:
            continue
        rows = parse_summary(path.read_text(encoding="utf-8", errors="replace"))
        res = results.setdefault(m.group(3), {})
        for test, (status, secs) in rows.items():
            if only is not None and test not in only:
                continue
            if status == "SKIPPED" and res.get(test, ("SKIPPED",))[0] != "SKIPPED":
                continue      # another scenario's run of the number skips it
            res[test] = (status, secs, int(m.group(4)))
    return results


def table(results: dict[str, dict[str, tuple[str, float, int]]]) -> str:
    protocols = list(results)
    names = sorted({n for r in results.values() for n in r})
    out = ["| test | " + " | ".join(protocols) + " |", "|---|" + "---|" * len(protocols)]
    for n in names:
        cells = []
        for p in protocols:
            st = results[p].get(n)
            cells.append("" if st is None else
                         f"{st[0]} ({st[1]:.0f}s{', 3 nodes' if st[2] == 3 else ''})")
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    out.append("")
    for p in protocols:
        counts: dict[str, int] = {}
        for st in results[p].values():
            counts[st[0]] = counts.get(st[0], 0) + 1
        out.append(f"- {p}: " + ", ".join(f"{v} {k.lower()}" for k, v in sorted(counts.items())))
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.conformance", description=__doc__.split("\n")[0])
    p.add_argument("librdkafka", nargs="?", default=os.environ.get("LIBRDKAFKA_SRC"),
                   help="a librdkafka checkout (default: $LIBRDKAFKA_SRC)")
    p.add_argument("--protocol", choices=["classic", "consumer", "both"], default="both")
    p.add_argument("--tests", help="comma-separated test numbers (default: every cluster test)")
    p.add_argument("--nodes3", default="", help="test numbers to run on 3 nodes from the start")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per test number")
    p.add_argument("--timeout-multiplier", type=float, default=1.0,
                   help="scale the tests' own timeouts (librdkafka's test.timeout.multiplier; "
                        "its CI runs with at least 3) on a loaded machine")
    p.add_argument("--out", type=Path, help="write the Markdown table here (default: stdout)")
    p.add_argument("--logs", type=Path, help="keep the runs' logs here (default: a temp dir)")
    p.add_argument("--from-logs", type=Path, help="only tabulate the logs a run left in DIR")
    a = p.parse_args(argv)
    if a.from_logs:
        cluster = None
        if a.librdkafka:     # the checkout tells which tests are cluster tests
            cluster = {t.name for t in list_tests(Path(a.librdkafka)) if t.cluster}
        text = table(from_logs(a.from_logs, cluster))
        if a.out:
            a.out.write_text(text, encoding="utf-8")
        else:
            print(text)
        return 0
    if not a.librdkafka:
        print("no librdkafka checkout given (argument or $LIBRDKAFKA_SRC): nothing run")
        return 0
    checkout = Path(a.librdkafka).resolve()
    if not (checkout / "tests" / "test.c").exists():
        p.error(f"{checkout} is not a librdkafka checkout (no tests/test.c)")
    logs = (a.logs or Path(tempfile.mkdtemp(prefix="kcodec-conformance-"))).resolve()
    logs.mkdir(parents=True, exist_ok=True)
    protocols = ["classic", "consumer"] if a.protocol == "both" else [a.protocol]
    only = {t.strip() for t in a.tests.split(",")} if a.tests else None
    nodes3 = {t.strip() for t in a.nodes3.split(",") if t.strip()}
    print(f"librdkafka {checkout}, logs in {logs}", flush=True)
    results = run(checkout, protocols, only, a.timeout, logs, nodes3, a.timeout_multiplier)
    text = table(results)
    if a.out:
        a.out.write_text(text, encoding="utf-8")
    else:
        print(text)
    failed = sum(1 for r in results.values() for st in r.values()
                 if st[0] not in ("PASSED", "SKIPPED"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
