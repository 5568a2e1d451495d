"""A spark-submit job with kcodec's Kafka source and sink: read a topic, count records and
sum value bytes per key, write the totals to Parquet and back to Kafka.

    spark-submit --master spark://HOST:7077 \\
        --archives kcodec-env.tar.gz#env \\
        --conf spark.pyspark.python=./env/bin/python \\
        examples/spark_cluster_job.py --bootstrap BROKER:9092 --topic events \\
        --out hdfs:///jobs/events-by-key --results events-by-key

The same file runs with ``--remote sc://HOST:15002`` against a Spark Connect server, or
with no option under spark-submit (its master) or alone (local[2]). It prints one JSON line
on stdout: {"master": ..., "records": N, "keys": K, "written": K}. See the README,
"Running on a cluster and on Spark Connect".
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True, help="kafka.bootstrap.servers")
    ap.add_argument("--topic", required=True, help="the topic to read")
    ap.add_argument("--out", required=True,
                    help="Parquet output: a path or URI every executor can write to")
    ap.add_argument("--results", help="also write the totals to this topic")
    ap.add_argument("--remote", help="a Spark Connect server, sc://HOST:PORT")
    ap.add_argument("--poll-timeout-ms", default="120000",
                    help="kafkaConsumer.pollTimeoutMs: a task fails after this long "
                         "without progress (default 120000)")
    args = ap.parse_args(argv)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import kcodec.spark

    builder = SparkSession.builder.appName("kcodec-example-job")
    if args.remote:
        builder = builder.remote(args.remote)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ and not os.environ.get("MASTER"):
        builder = builder.master("local[2]")       # run alone: a local session
    spark = builder.getOrCreate()
    # explicitly: the formats then run the Python Spark gives this session's workers
    # (spark.pyspark.python, an --archives venv) and ship with its --py-files
    kcodec.spark.register(spark)

    events = (spark.read.format("kcodec")
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.topic)
              .option("kafkaConsumer.pollTimeoutMs", args.poll_timeout_ms)
              .option("kafka.default.api.timeout.ms", "60000")
              .load())
    totals = (events.groupBy("key")
              .agg(F.count("*").alias("records"), F.sum(F.length("value")).alias("bytes")))
    totals.write.mode("overwrite").parquet(args.out)
    back = spark.read.parquet(args.out)
    rows = back.agg(F.sum("records").alias("records"), F.count("*").alias("keys")).collect()[0]
    written = 0
    if args.results:
        (back.select("key", F.to_json(F.struct("records", "bytes")).alias("value"))
         .write.format("kcodec").option("kafka.bootstrap.servers", args.bootstrap)
         .option("topic", args.results).mode("append").save())
        written = int(rows["keys"])
    try:
        master = spark.conf.get("spark.master")
    except Exception:     # noqa: BLE001 - a Connect server that does not say
        master = args.remote
    print(json.dumps({"master": master, "records": int(rows["records"] or 0),
                      "keys": int(rows["keys"]), "written": written}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
