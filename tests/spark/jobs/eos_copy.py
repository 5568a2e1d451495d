"""spark-submit job of the exactly-once fault tests: a streaming copy of topic SRC to DST
(same partition), micro-batches of PER_TRIGGER records, until every record of SRC has gone
through a committed micro-batch; prints one JSON line. With FAIL_DIR, the task that meets
record FAIL_AT on its first attempt fails there (once: a file in FAIL_DIR says it did).

    eos_copy.py BOOTSTRAP SRC DST CHECKPOINT GUARANTEE PER_TRIGGER FAIL_AT FAIL_DIR
"""

import json
import os
import sys
import time

from pyspark.sql import SparkSession

bootstrap, src, dst, ck, guarantee, per_trigger, fail_at, fail_dir = sys.argv[1:9]
spark = (SparkSession.builder.appName("kcodec-eos-copy")
         .config("spark.sql.execution.arrow.maxRecordsPerBatch", "200")
         .config("spark.sql.streaming.pollingDelay", "50ms").getOrCreate())
spark.sparkContext.setLogLevel("WARN")
import kcodec.spark  # noqa: E402
from kcodec.client import Admin  # noqa: E402

kcodec.spark.register(spark)
with Admin(bootstrap_servers=bootstrap) as a:
    n_parts = len(a.describe_cluster([src]).topics[0].partitions)
    ends = a.list_offsets([(src, p) for p in range(n_parts)], "latest")
want = {str(p): off for (_, p), off in ends.items()}

df = (spark.readStream.format("kcodec").option("kafka.bootstrap.servers", bootstrap)
      .option("subscribe", src).option("startingOffsets", "earliest")
      .option("maxOffsetsPerTrigger", per_trigger).load()
      .select("key", "value", "partition"))
if fail_dir != "-":
    from pyspark.sql.functions import col, udf

    @udf("binary")
    def fail_once(v):
        from pyspark import TaskContext

        flag = os.path.join(fail_dir, "failed")
        if int(v) == int(fail_at) and TaskContext.get().attemptNumber() == 0 \
                and not os.path.exists(flag):
            open(flag, "w").close()
            raise RuntimeError(f"failing once at record {fail_at}")
        return v
    df = df.withColumn("value", fail_once(col("value")))
w = (df.writeStream.format("kcodec").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", dst).option("checkpointLocation", ck)
     .option("kafka.request.timeout.ms", "5000").option("kafka.reconnect.backoff.max.ms", "300"))
if guarantee == "exactly_once":
    w = w.option("kcodec.deliveryGuarantee", "exactly_once")
q = w.trigger(processingTime="0 seconds").start()


def reached(progress) -> bool:
    if not progress or not progress.get("sources"):
        return False
    end = progress["sources"][0].get("endOffset")
    if isinstance(end, str):
        end = json.loads(end)
    got = (end or {}).get(src, end) or {}
    return all(int(got.get(p, -1)) >= off for p, off in want.items())


deadline = time.monotonic() + 1200
while time.monotonic() < deadline and q.exception() is None and not reached(q.lastProgress):
    time.sleep(0.3)
err = q.exception()
q.stop()
print(json.dumps({"done": err is None, "error": str(err) if err else None,
                  "batches": len(q.recentProgress)}), flush=True)
spark.stop()
