"""A job for tests/spark/test_spark_cluster.py: count a topic per partition with every task
slowed down (so that a worker can be killed while tasks run), and report each executor's
Python and kcodec. Prints one JSON line."""

from __future__ import annotations

import json
import sys


def main() -> int:
    bootstrap, topic, started = sys.argv[1:4]
    from pyspark.sql import SparkSession

    import kcodec.spark
    from kcodec.spark import workers

    spark = SparkSession.builder.appName("kcodec-slow-count").getOrCreate()
    kcodec.spark.register(spark)
    report = workers.check_executors(spark)

    def slow(batches):
        import os
        import time
        import uuid

        open(os.path.join(started, uuid.uuid4().hex), "w").close()
        for rb in batches:
            time.sleep(0.3)
            yield rb

    df = (spark.read.format("kcodec").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("minPartitions", "16").load()
          .select("partition", "offset"))
    rows = df.mapInArrow(slow, df.schema).groupBy("partition").count().collect()
    print(json.dumps({"counts": {str(r["partition"]): int(r["count"]) for r in rows},
                      "executors": report}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
