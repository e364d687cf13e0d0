"""A streaming copy job run as its own process (its own Spark driver) so a test can kill it with SIGKILL.

usage: eo_job.py BOOTSTRAP SRC DST CHECKPOINT {processing|availableNow}
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    bootstrap, src, dst, checkpoint, mode = sys.argv[1:6]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from odradek.spark import register

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    df = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("subscribe", src)
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "30").load())
    trigger = {"availableNow": True} if mode == "availableNow" else {"processingTime": "200 milliseconds"}
    q = (df.selectExpr("key", "value").writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", dst).option("exactlyOnce", "true").option("checkpointLocation", checkpoint)
         .trigger(**trigger).start())
    print("started", flush=True)
    q.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
