"""kmirror's core library, under both the planner and the job (as MM2's `connect/mirror-client` sits under its
runtime): the naming policy and the topic and group filters (`policy`), MM2's wire formats (`mm2`), offset
translation (`offsets`), the internal-topic rules (`topic_rules`) and the resource addresses (`addresses`).

Must not: import the planner, the job, the control plane, an adapter, the spec or any Kafka or Spark client.
"""
