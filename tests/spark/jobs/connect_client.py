"""A Spark Connect client for tests/spark/test_spark_cluster.py: register kcodec's formats
explicitly, read a topic, write it back with the sink, read that back; then the same with
the exactly-once sink's batch write, read back with read_committed. One JSON line.

    connect_client.py URL BOOTSTRAP TOPIC OUT_TOPIC
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    url, bootstrap, topic, out_topic = sys.argv[1:5]
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
    print(json.dumps({"read": read, "back": back.count(),
                      "distinct_back": back.select("value").distinct().count(),
                      "eos": eos, "executors": report}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
