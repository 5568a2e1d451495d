"""A Spark Connect client for tests/spark/test_spark_cluster.py: register kcodec's formats
explicitly, read a topic, write it back with the sink, read that back; then the same with
the exactly-once sink's batch write and a streaming copy with it, read back with
read_committed. One JSON line.

    connect_client.py URL BOOTSTRAP TOPIC OUT_TOPIC CHECKPOINT
"""

from __future__ import annotations

import json
import sys


def _stream_copy(spark, bootstrap: str, topic: str, dst: str, checkpoint: str) -> object:
    """A streaming copy with the exactly-once sink (availableNow), read back with
    read_committed: [records, distinct values], or the query's error as text."""
    q = (spark.readStream.format("kcodec").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest").load()
         .select("key", "value")
         .writeStream.format("kcodec").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", dst).option("checkpointLocation", checkpoint)
         .option("kcodec.deliveryGuarantee", "exactly_once")
         .trigger(availableNow=True).start())
    try:
        q.awaitTermination(300)
    except Exception as exc:      # the cause, for the test to show
        return f"{type(exc).__name__}: {exc}"[:4000]
    if q.exception() is not None:
        return str(q.exception())[:4000]
    got = (spark.read.format("kcodec").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", dst).option("kafka.isolation.level", "read_committed").load())
    return [got.count(), got.select("value").distinct().count()]


def main() -> int:
    url, bootstrap, topic, out_topic, checkpoint = sys.argv[1:6]
    from pyspark.sql import SparkSession

    import kcodec.spark
    from kcodec.spark import workers

    spark = SparkSession.builder.remote(url).getOrCreate()
    kcodec.spark.register(spark)
    report = workers.check_executors(spark, 2)
    src = (spark.read.format("kcodec").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic).load())
    read = src.count()
    src.select("key", "value").write.format("kcodec") \
        .option("kafka.bootstrap.servers", bootstrap).option("topic", out_topic) \
        .mode("append").save()
    back = (spark.read.format("kcodec").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", out_topic).load())
    dst = f"{out_topic}-eos"
    src.select("key", "value").write.format("kcodec") \
        .option("kafka.bootstrap.servers", bootstrap).option("topic", dst) \
        .option("kcodec.deliveryGuarantee", "exactly_once").mode("append").save()
    got = (spark.read.format("kcodec").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", dst).option("kafka.isolation.level", "read_committed").load())
    eos = {"batch": [got.count(), got.select("value").distinct().count()]}
    eos["stream"] = _stream_copy(spark, bootstrap, topic, f"{out_topic}-eos-stream", checkpoint)
    print(json.dumps({"read": read, "back": back.count(),
                      "distinct_back": back.select("value").distinct().count(),
                      "eos": eos, "executors": report}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
