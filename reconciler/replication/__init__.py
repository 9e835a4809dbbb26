"""The replication job (PySpark Structured Streaming, one per flow) and the runners that deploy it.

`job` is the data path that spark-submit runs; `runners` starts, stops and reports jobs for the executor and
the planner. Nothing here plans: which flows should run, and with which spec, is the planner's decision.
"""
