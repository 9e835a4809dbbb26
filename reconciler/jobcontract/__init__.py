"""The contract between the runners that deploy a replication job (`reconciler.runners`, the control plane) and
the job that runs inside the Spark driver (`reconciler.replication`, the data plane).

Neither side imports the other; both import this package: the job spec the runner hands over (`spec.py`), where a
job's files live, keyed by state topic and flow (`layout.py`), and the status record the job writes and the CLI
reads (`status.py`).

Must not: import a Kafka or Spark client, or anything from the runners or the job.
"""
