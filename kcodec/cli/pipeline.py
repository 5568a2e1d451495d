"""``kcodec pipeline``: the whole data path on Spark, proved by its own numbers.

1. starts the local broker ``kcodec demo`` uses by default (or uses ``--bootstrap``);
2. produces a stream of purchase events (user key, JSON value with an amount, event time
   as the record timestamp) into a 4-partition topic with kcodec's producer;
3. runs a Structured Streaming query: the ``kcodec`` source reads the events, each
   micro-batch counts and sums the amounts per user per 10-second window, and writes that
   to Parquet (one directory per micro-batch, replaced when a batch is replayed, so a
   replay never counts twice) and to a results topic with the ``kcodec`` sink;
4. stops the query midway, produces the second half of the events, and restarts the query
   from its checkpoint;
5. re-aggregates the Parquet output and compares it with what was produced, per user and
   window: nothing lost, nothing double-counted. Exit code 0 only when everything matches.

Progress is printed per micro-batch. Spark needs Java 17 or newer; without it the command
says so and how to get it.

Where Spark runs: ``--master URL`` (``spark://HOST:7077``, ``yarn``, ``local[4]``, ...) or
``--remote sc://HOST:15002`` (Spark Connect); with neither, the master that spark-submit,
``SPARK_REMOTE``, ``MASTER``, ``PYSPARK_SUBMIT_ARGS`` or ``spark-defaults.conf`` sets, and
only otherwise ``local[2]``. The command prints the master it uses and where that came from.
``--workdir`` takes any path or URI Spark's Hadoop filesystems take (``hdfs://``,
``s3a://``, ``file:///shared/...``); on a cluster it must be one every machine sees.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from typing import Any

from kcodec.cli._client import UsageError, guarded

NAME = "pipeline"
HELP = "run a Spark Structured Streaming pipeline through the kcodec source and sink"

EXAMPLES = [
    "kcodec pipeline",
    "kcodec pipeline -n 100000 --bootstrap 127.0.0.1:9092",
]
WINDOW_MS = 10_000
USERS = 50
#: one record per partition, each in a batch of its own, ends every produce phase; the
#: query skips them (see _fence)
MARKER = b"__end_of_phase__"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--events", type=int, default=20000,
                        help="events to produce, half before and half after the restart "
                             "(default 20000)")
    parser.add_argument("--bootstrap", "-b", metavar="HOST:PORT",
                        help="use this broker instead of starting the local one")
    parser.add_argument("--max-per-trigger", type=int, default=6000,
                        help="maxOffsetsPerTrigger of the query (default 6000)")
    parser.add_argument("--workdir", metavar="DIR|URI",
                        help="checkpoint and Parquet output here: a directory, or any URI "
                             "Spark's Hadoop filesystems take (hdfs://, s3a://, "
                             "file:///shared/...); on a cluster, one the driver and every "
                             "executor can reach (default: a temporary directory on this "
                             "machine, removed at the end)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--master", metavar="URL",
                       help="the Spark master: spark://HOST:7077, yarn, k8s://..., local[N] "
                            "(default: what spark-submit, MASTER, PYSPARK_SUBMIT_ARGS or "
                            "spark-defaults.conf set, else local[2])")
    where.add_argument("--remote", metavar="sc://HOST:PORT",
                       help="run through this Spark Connect server (needs kcodec[connect]; "
                            "the server's executors need kcodec[spark])")


def _say(msg: str) -> None:
    print(msg, flush=True)


def java_problem() -> str | None:
    """Why Spark cannot start here, or None."""
    import shutil
    import subprocess

    java = shutil.which("java")
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        java = os.path.join(home, "bin", "java")
    how = ("Spark needs Java 17 or newer: install it (Debian/Ubuntu: sudo apt-get install "
           "openjdk-17-jre-headless; macOS: brew install openjdk@17) or set JAVA_HOME to a "
           "JDK/JRE 17+")
    if not java:
        return "no Java found. " + how
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{java} does not run ({exc}). " + how
    text = out.stderr + out.stdout
    for token in text.replace('"', " ").split():
        head = token.split(".")[0]
        if head.isdigit() and token[0].isdigit():
            major = int(head) if head != "1" else 8
            if major < 17:
                return f"{java} is Java {major}. " + how
            return None
    return None


def _events(start: int, count: int, base_ts: int) -> list[tuple[bytes, bytes, int]]:
    out = []
    for i in range(start, start + count):
        user = f"user-{i * 7919 % USERS:02d}"
        amount = (i * 31) % 97 + 1
        ts = base_ts + i * 5           # 5 ms of event time per event
        value = json.dumps({"user": user, "amount": amount, "i": i}).encode()
        out.append((user.encode(), value, ts))
    return out


def _expected(events: list[tuple[bytes, bytes, int]]) -> dict[tuple[str, int], list[int]]:
    exp: dict[tuple[str, int], list[int]] = {}
    for key, value, ts in events:
        amount = json.loads(value)["amount"]
        w = ts // WINDOW_MS * WINDOW_MS
        cell = exp.setdefault((key.decode(), w), [0, 0])
        cell[0] += 1
        cell[1] += amount
    return exp


def _produce(bootstrap: str, topic: str, events: list[tuple[bytes, bytes, int]]) -> float:
    from kcodec.client import Producer

    t0 = time.perf_counter()
    with Producer(bootstrap_servers=bootstrap, compression_type="lz4", linger_ms=5,
                  client_id="kcodec-pipeline") as p:
        for key, value, ts in events:
            p.send(topic, value, key=key, timestamp=ts)
        p.flush()
    _fence(bootstrap, topic, 4)
    return time.perf_counter() - t0


def _fence(bootstrap: str, topic: str, partitions: int) -> None:
    """End each partition with one record in a batch of its own. A correct broker does not
    need it; the Tansu broker (``--bootstrap`` to one) answers ListOffsets LATEST with the
    start of the last batch + 1 when that batch holds several records, which would leave
    the tail of each phase unread until more data arrives. The query filters these
    markers out."""
    from kcodec.client import Producer

    with Producer(bootstrap_servers=bootstrap, linger_ms=0, client_id="kcodec-pipeline") as p:
        for i in range(partitions):
            p.send(topic, MARKER, partition=i).result(30)


class Target:
    """Where the query runs: ``kind`` "remote" (Spark Connect at ``url``), "master" (the
    builder is given ``url``) or "inherited" (Spark applies the master set outside this
    command: ``url`` is it where known); ``source`` says where it came from."""

    def __init__(self, kind: str, url: str | None, source: str) -> None:
        self.kind, self.url, self.source = kind, url, source

    @property
    def local(self) -> bool:
        return self.kind != "remote" and bool(self.url) and str(self.url).startswith("local")

    def __repr__(self) -> str:
        return f"Target({self.kind!r}, {self.url!r}, {self.source!r})"


def _defaults_master() -> tuple[str, str] | None:
    """``spark.master`` from the spark-defaults.conf spark-submit would read, and its path."""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not conf_dir:
        home = os.environ.get("SPARK_HOME")
        if not home:
            try:
                import pyspark

                home = os.path.dirname(pyspark.__file__)
            except ImportError:
                return None
        conf_dir = os.path.join(home, "conf")
    path = os.path.join(conf_dir, "spark-defaults.conf")
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                parts = line.strip().split(None, 1)
                if len(parts) == 2 and parts[0] == "spark.master":
                    return parts[1].strip(), path
    except OSError:
        return None
    return None


def spark_target(master: str | None, remote: str | None) -> Target:
    """The command's arguments first, then what Spark itself would take, then local[2]."""
    if remote is not None:
        if not remote.startswith("sc://"):
            raise UsageError(f"--remote takes a Spark Connect URL sc://HOST:PORT, not {remote!r}")
        return Target("remote", remote, "--remote")
    if master is not None:
        if master.startswith("sc://"):
            raise UsageError(f"{master} is a Spark Connect URL: give it to --remote")
        return Target("master", master, "--master")
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        return Target("inherited", None, "spark-submit")
    if os.environ.get("SPARK_REMOTE"):
        return Target("remote", os.environ["SPARK_REMOTE"], "SPARK_REMOTE")
    if os.environ.get("MASTER"):
        return Target("inherited", os.environ["MASTER"], "MASTER")
    m = re.search(r"--master[= ]+(\S+)", os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    if m:
        return Target("inherited", m.group(1), "PYSPARK_SUBMIT_ARGS")
    found = _defaults_master()
    if found:
        return Target("inherited", found[0], found[1])
    return Target("master", "local[2]", "the default")


def _join(base: str, name: str) -> str:
    """``name`` under ``base``, a local path or a Hadoop URI (always with "/")."""
    return base.rstrip("/") + "/" + name


@guarded
def run(args: argparse.Namespace) -> int:
    if args.events < 2:
        raise UsageError(f"--events must be at least 2, got {args.events}")
    if args.max_per_trigger < 1:
        raise UsageError("--max-per-trigger must be positive")
    target = spark_target(args.master, args.remote)
    problem = java_problem()
    if problem:
        print(f"kcodec pipeline: error: {problem}", file=sys.stderr)
        return 1
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("kcodec pipeline: error: PySpark is missing: pip install 'kcodec[spark]'",
              file=sys.stderr)
        return 1
    from kcodec.cli.demo import start_broker

    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        _say("starting the local broker (the one `kcodec demo` uses) ...")
        try:
            broker = start_broker()
        except OSError as exc:
            print(f"kcodec pipeline: error: cannot start the broker: {exc}", file=sys.stderr)
            return 1
        bootstrap = broker.bootstrap
        _say(f"broker ready on {bootstrap}")
    if not target.local:
        if broker is not None:
            _say("  note: this broker listens on 127.0.0.1 of this machine: executors on "
                 "other machines cannot reach it (give --bootstrap HOST:PORT)")
        if args.workdir is None:
            _say("  note: the checkpoint and output go to a temporary directory on this "
                 "machine: executors on other machines cannot write there (give --workdir "
                 "on a filesystem they all see)")
    import shutil
    import tempfile

    work = args.workdir or tempfile.mkdtemp(prefix="kcodec-pipeline-")
    try:
        return _pipeline(args, bootstrap, work, target)
    finally:
        if broker is not None:
            broker.stop()
            _say("broker stopped")
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def _session(target: Target) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("kcodec-pipeline")
    if target.kind == "remote":
        if os.environ.pop("MASTER", None) is not None:
            _say("  (MASTER is ignored: --remote/SPARK_REMOTE chose Spark Connect)")
        builder = builder.remote(str(target.url))
    else:
        if target.kind == "master":
            if os.environ.pop("SPARK_REMOTE", None) is not None:
                _say("  (SPARK_REMOTE is ignored: --master chose the master)")
            builder = builder.master(str(target.url))
        if target.local:
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            builder = (builder.config("spark.driver.host", "127.0.0.1")    # loopback only
                       .config("spark.driver.bindAddress", "127.0.0.1")
                       .config("spark.ui.enabled", "false"))
        builder = (builder.config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.streaming.pollingDelay", "100ms"))
    spark = (builder.config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    if target.kind != "remote":
        spark.sparkContext.setLogLevel("ERROR")
    # explicitly, not through Spark's lookup of pyspark_* modules: that finds nothing where
    # its Python cannot see kcodec (another interpreter on PATH, an unusual install), and
    # what it finds ignores spark.pyspark.python, --archives and --py-files
    import kcodec.spark

    kcodec.spark.register(spark)
    return spark


def master_of(spark: Any, target: Target) -> str:
    """What the session really runs on, for people."""
    if target.kind == "remote":
        try:
            server = spark.conf.get("spark.master")
        except Exception:     # noqa: BLE001 - a server that does not say
            server = "not told"
        return f"Spark Connect {target.url} (from {target.source}; the server's master: {server})"
    return f"master {spark.sparkContext.master} (from {target.source})"


def _start_query(spark: Any, bootstrap: str, topic: str, results: str, work: str,
                 max_per_trigger: int) -> Any:
    import pyspark.sql.functions as F

    parquet = _join(work, "parquet")
    events = (spark.readStream.format("kcodec")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(max_per_trigger))
              .option("commitOffsetsToGroup", "kcodec-pipeline")
              .load()
              .where(F.col("value") != F.lit(MARKER))
              .select(F.col("key").cast("string").alias("user"),
                      F.get_json_object(F.col("value").cast("string"), "$.amount")
                      .cast("long").alias("amount"),
                      F.col("timestamp")))

    def each_batch(df: Any, batch_id: int) -> None:
        agg = (df.groupBy(F.window("timestamp", f"{WINDOW_MS // 1000} seconds").alias("w"),
                          "user")
               .agg(F.count("*").alias("count"), F.sum("amount").alias("sum"))
               .select("user", F.col("w.start").alias("window"), "count", "sum"))
        agg.persist()
        # one directory per micro-batch, replaced on a replay: exactly once in Parquet
        agg.write.mode("overwrite").parquet(_join(parquet, f"batch={batch_id:08d}"))
        (agg.select(F.col("user").alias("key"),
                    F.to_json(F.struct("window", "count", "sum")).alias("value"))
         .write.format("kcodec").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", results).mode("append").save())
        agg.unpersist()

    return (events.writeStream.foreachBatch(each_batch)
            .option("checkpointLocation", _join(work, "checkpoint"))
            .trigger(processingTime="500 milliseconds").start())


def _rows_and_rate(p: Any) -> tuple[int, float]:
    """A micro-batch's input rows and rows/s from its progress (a dict, or pyspark's
    progress object); Spark Connect's leaves the totals out and has them per source."""
    get = p.get if isinstance(p, dict) else (lambda k: getattr(p, k, None))
    n = get("numInputRows")
    if n is None:
        sources = get("sources") or []
        n = sum(int((s.get("numInputRows") if isinstance(s, dict) else s.numInputRows) or 0)
                for s in sources)
    return int(n), float(get("processedRowsPerSecond") or 0.0)


def _watch(q: Any, stop_after: int | None, total: int, done_before: int, deadline: float
           ) -> int:
    """Print progress per micro-batch; stop the query after ``stop_after`` rows (or when
    all ``total`` are in). Returns the rows read by this run."""
    seen = set()
    rows = 0
    while time.monotonic() < deadline:
        time.sleep(0.25)
        if q.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {q.exception()}")
        for p in q.recentProgress:
            bid = p["batchId"]
            if bid in seen:
                continue
            seen.add(bid)
            n, rate = _rows_and_rate(p)
            rows += n
            if n:
                _say(f"  batch {bid:3d}: {n:6d} records ({rate:9.0f}/s), "
                     f"{done_before + rows:7d} of {total} read")
        if stop_after is not None and rows >= stop_after:
            break
        # a batch's progress is posted once its foreachBatch has returned and the batch is
        # in the commit log: with every record read, the query has written them all (an
        # empty batch's progress would come only after Spark's no-data interval, 10 s)
        if done_before + rows >= total:
            break
    return rows


def _pipeline(args: argparse.Namespace, bootstrap: str, work: str, target: Target) -> int:
    import uuid

    import pyspark.sql.functions as F

    from kcodec.client import Admin

    run_id = uuid.uuid4().hex[:6]
    # each run in a folder of its own: a --workdir used before holds another run's
    # checkpoint (of other topics), which the query must not resume from
    work = _join(work, f"run-{run_id}")
    topic, results = f"pipeline-events-{run_id}", f"pipeline-results-{run_id}"
    with Admin(bootstrap_servers=bootstrap, client_id="kcodec-pipeline") as admin:
        for name, parts in ((topic, 4), (results, 2)):
            err = admin.create_topics([name], num_partitions=parts)[name]
            if err is not None:
                raise err
    half = args.events // 2
    base_ts = int(time.time() * 1000) // WINDOW_MS * WINDOW_MS - 3_600_000
    first, second = _events(0, half, base_ts), _events(half, args.events - half, base_ts)
    _say(f"producing {len(first)} events to {topic} (4 partitions, lz4) ...")
    _say(f"  done in {_produce(bootstrap, topic, first):.2f} s")
    _say("starting Spark ...")
    t0 = time.monotonic()
    spark = _session(target)
    _say(f"  {master_of(spark, target)}, ready in {time.monotonic() - t0:.1f} s")
    _say(f"  checkpoint and Parquet output under {work}")
    try:
        _say("query run 1: kcodec source -> per user per 10 s window count and sum -> "
             "Parquet + kcodec sink")
        q = _start_query(spark, bootstrap, topic, results, work, args.max_per_trigger)
        total = args.events + 8          # and the 4 end-of-phase markers of each phase
        stop_at = max(1, half // 2)
        read1 = _watch(q, stop_at, total, 0, time.monotonic() + 600)
        q.stop()
        _say(f"query stopped midway after {read1} events; producing {len(second)} more ...")
        _produce(bootstrap, topic, second)
        _say("query run 2: restarted from its checkpoint")
        q = _start_query(spark, bootstrap, topic, results, work, args.max_per_trigger)
        _watch(q, None, total, read1, time.monotonic() + 900)
        q.stop()
        _fence(bootstrap, results, 2)
        out = (spark.read.parquet(_join(work, "parquet"))
               .groupBy("user", "window").agg(F.sum("count").alias("count"),
                                              F.sum("sum").alias("sum")).collect())
        got = {(r["user"], int(r["window"].timestamp() * 1000)): [int(r["count"]),
                                                                   int(r["sum"])]
               for r in out}
        res_rows = (spark.read.format("kcodec").option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", results).load()
                    .where(F.col("value") != F.lit(MARKER)).count())
    finally:
        spark.stop()
    want = _expected(first + second)
    missing = sum(1 for k in want if k not in got)
    extra = sum(1 for k in got if k not in want)
    wrong = sum(1 for k in want if k in got and got[k] != want[k])
    n_got = sum(c for c, _s in got.values())
    s_got = sum(s for _c, s in got.values())
    n_want = sum(c for c, _s in want.values())
    s_want = sum(s for _c, s in want.values())
    _say("")
    _say("summary                        produced     in Parquet")
    _say(f"  events                       {n_want:10d}   {n_got:10d}")
    _say(f"  sum of amounts               {s_want:10d}   {s_got:10d}")
    _say(f"  (user, window) cells         {len(want):10d}   {len(got):10d}")
    _say(f"  cells missing / extra / off  {missing} / {extra} / {wrong}")
    _say(f"  aggregate rows in {results}: {res_rows} (the Kafka sink is at-least-once)")
    ok = not (missing or extra or wrong) and (n_got, s_got) == (n_want, s_want)
    _say("OK: every event counted exactly once" if ok else
         "MISMATCH: the Parquet totals differ from what was produced")
    return 0 if ok else 1
