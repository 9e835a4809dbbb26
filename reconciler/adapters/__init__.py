"""The control plane's reads of the live clusters: the live-state reader, group offsets and record ranges for the
planner and the cutover, replication lag for `kmirror status`. Built on `reconciler.kafka_clients`.

Must not: import the planner or the application layer (what to read comes from `reconciler.live.selection`).
"""
