"""The file spark-submit runs for a replication application (several flows' queries in one driver); everything it
does is in `reconciler.replication.application`.

Must not: hold logic. It exists because spark-submit takes a file path, not a module name.
"""

import sys

if __name__ == "__main__":
    from reconciler.replication.spark_warmup import start_spark_warmup

    start_spark_warmup()  # first: the JVM warms Spark up while Python imports the driver
    from reconciler.replication.application import main

    sys.exit(main())
