"""Side effects at the edge: the one Kafka admin adapter and the live-state reader built on it."""
