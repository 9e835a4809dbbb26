"""The file spark-submit runs for a replication job; everything it does is in `reconciler.replication.job`.

Must not: hold logic. It exists because spark-submit takes a file path, not a module name.
"""

import sys

if __name__ == "__main__":
    from reconciler.replication.spark_warmup import start_spark_warmup

    start_spark_warmup()  # first: the JVM warms Spark up while Python imports the job
    from reconciler.replication.job import main

    sys.exit(main())
