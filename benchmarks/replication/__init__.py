"""Replication throughput, CPU and latency: the Kafka ceiling, Apache MirrorMaker 2 and kmirror, in one run.

On fresh local clusters (Kafka 3.9 source, 4.x target, started here and stopped at the end) it:
  1. loads the source set: T topics `bench.dNN` of P partitions, N records of S bytes (Kafka's ProducerPerformance);
  2. measures the ceiling: ConsumerPerformance reading the set from the source while ProducerPerformance writes
     as many records into the target (both at once, as a replicator does), then a plain confluent-kafka
     consume -> produce copy loop (librdkafka, one Python process);
  3. runs MirrorMaker 2 (dedicated mode, `org.apache.kafka.connect.mirror.MirrorMaker`; with --mm2-eos also in
     its exactly-once mode) over the set and times it from its start to the first and to the last record on the
     target; then, with MM2 still running, measures end-to-end latency at a steady rate below saturation;
  4. does the same with the kmirror job (`LocalRunner.deploy`, the path `kmirror apply` takes) and each variant;
  5. writes JSON (`--out`) and a PNG chart beside it, and prints a table.

`--suite standard` does that for 1 KB x (1 topic x 6 partitions), 100 B x (1 x 6) and 1 KB x (10 x 24) into one
report; `--soak-minutes N --soak-rate R` soaks kmirror (and MM2 with --soak-mm2) instead.

    python -m benchmarks.replication [--record-size 1024] [--partitions 6] [--topics 1]
        [--records 500000] [--latency-rate 10000] [--latency-seconds 60] [--suite standard]
        [--kmirror-conf spark.kmirror.maxOffsetsPerTrigger=200000] [--kmirror-producer linger.ms=20]
        [--variant 'eos delivery=exactly_once'] [--mm2-eos]
    python -m benchmarks.replication --soak-minutes 30 --soak-rate 10000 [--soak-mm2]

Modules: `phases` (ceiling, MM2, kmirror runs), `load` (perf tools, the paced producer, the copy loop),
`measure` (CPU from /proc, the machine's conditions, latency, RSS and GC sampling, growth verdicts), `report`
(ratios, table, charts), `soak`, `cli`.

Must not: leave a broker, MM2 or a Spark job running (everything started here is stopped in `finally`), or
touch clusters it did not start.
"""
