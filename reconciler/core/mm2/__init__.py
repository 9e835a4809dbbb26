"""MirrorMaker 2 compatibility: the byte layouts of MM2's internal topics (see `wire`)."""

from reconciler.core.mm2.wire import Checkpoint, Heartbeat, OffsetSync, TopicPartition

__all__ = ["Checkpoint", "Heartbeat", "OffsetSync", "TopicPartition"]
