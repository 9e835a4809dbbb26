"""kmirror's record of what it applied, kept in a compacted, single-partition Kafka topic, and its lock."""
