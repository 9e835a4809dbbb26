"""`kmirror verify`: prove, record by record, that a flow's target holds what its source holds.

`compare` (pure) plans the ranges of a partition from its offset-syncs and walks both sides in order, classifying
every record; `report` (pure) holds the per-partition results and renders them; `kafka_reads` (the adapter) reads
both clusters read_committed, group-less and rate-bounded; `run` plans one flow's partitions and scans them here
(`--engine python`) or as the tasks of a Spark batch job (`spark_scan`, `--engine spark`).

Must not: write to either cluster or commit a consumer offset.
"""
