"""The checkpoint emitter of one flow: MM2's MirrorCheckpointTask, run beside the replication job.

Every `offsets.checkpoint_interval` a cycle: read the new offset-syncs; list the source groups that pass the
flow's group filter and have offsets on replicated topics; translate and emit the checkpoints that are more
recent than the last ones (MM2's rules, `reconciler.core.offsets.checkpoints`) to `<source>.checkpoints.internal` on
the target; then, with `sync.group_offsets`, write the translated offsets of groups EMPTY (or absent) on the
target, never moving a target group backwards. Checkpoints and written offsets carry the metadata string the
source group committed with each offset, as MM2's do.

How it runs: `run_checkpointer(flow, source_config, target_config, stop_event)` loops until the event is set;
the replication job's driver starts it in a daemon thread. `checkpoint_once(...)` runs one cycle (cutover,
tests, `kmirror cutover`); `Checkpointer` is the object behind both.

Must not: commit offsets of the source cluster, write offsets of a group with members on the target, or stop
on one failed cycle (it logs it and tries again at the next interval).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from reconciler.core.offsets.checkpoints import checkpoints_from, offsets_to_sync, translate_group
from reconciler.core.offsets.readiness import FailoverReadiness, failover_readiness
from reconciler.core.topic_rules import COMPACT
from reconciler.errors import KmirrorError
from reconciler.kafka_clients.admin import KafkaAdmin
from reconciler.kafka_clients.offset_syncs import CheckpointWriter, OffsetSyncReader, read_checkpoints
from reconciler.spec.client_config import ClientConfig
from reconciler.spec.models import FlowSpec

log = logging.getLogger("kmirror.checkpoints")


@dataclass(frozen=True)
class CycleReport:
    """What one checkpoint cycle did, and how long its parts took (seconds)."""

    groups: int
    partitions: int
    translated: int
    emitted: int
    synced_groups: int
    synced_partitions: int
    failures: tuple[str, ...] = ()
    seconds: Mapping[str, float] = field(default_factory=dict)
    #: Per group partition: where the group would resume on the target now, and the records it would re-read.
    readiness: tuple[FailoverReadiness, ...] = ()

    @property
    def total_seconds(self) -> float:
        return sum(self.seconds.values())


class Checkpointer:
    """One flow's checkpoint state: its offset-syncs, its last checkpoints, its clients. Call `start()` first."""

    def __init__(
        self,
        flow: FlowSpec,
        source_config: ClientConfig,
        target_config: ClientConfig,
        *,
        timeout: float = 30.0,
        sync_group_offsets: bool | None = None,
    ) -> None:
        self.flow = flow
        self.timeout = timeout
        self.sync_group_offsets = flow.sync.group_offsets if sync_group_offsets is None else sync_group_offsets
        self.source_config = dict(source_config)
        self.target_config = dict(target_config)
        self.source_admin = KafkaAdmin(flow.source, source_config, timeout)
        self.target_admin = KafkaAdmin(flow.target, target_config, timeout)
        self.checkpoints_topic = flow.policy().checkpoints_topic(flow.source)
        self.syncs_cluster, self.syncs_topic = flow.syncs_location()
        self._syncs: OffsetSyncReader | None = None
        self._writer: CheckpointWriter | None = None
        self.emitted_total = 0

    def start(self) -> None:
        """Create the checkpoints topic if missing, load the last checkpoints, read the offset-syncs to the end."""
        if self.flow.offsets.emit_checkpoints:
            missing = self.checkpoints_topic not in self.target_admin.topics()
            if missing:
                for o in self.target_admin.create_topics([(self.checkpoints_topic, 1, -1, COMPACT)]):
                    if not o.ok:
                        raise KmirrorError(f"cannot create {o.key} on {self.flow.target}: {o.message}")
        self.store, _, loaded = read_checkpoints(self.target_config, self.checkpoints_topic, timeout=self.timeout)
        # The last checkpoints keep translation monotonic across restarts; without them, MM2 only trusts the
        # newest sync of each partition read at startup (initializationMustReadToEnd).
        syncs_config = self.source_config if self.syncs_cluster == self.flow.source else self.target_config
        self._syncs = OffsetSyncReader(
            syncs_config,
            self.syncs_topic,
            initialization_must_read_to_end=not loaded,
            timeout=self.timeout,
            cluster=self.syncs_cluster,
        )
        self._syncs.refresh()
        if self.flow.offsets.emit_checkpoints:
            self._writer = CheckpointWriter(
                self.target_config, self.checkpoints_topic, client_id=f"kmirror-{self.flow.name}-checkpoints"
            )

    def cycle(self) -> CycleReport:
        """One checkpoint cycle (see the module docstring)."""
        if self._syncs is None:
            self.start()
        assert self._syncs is not None
        flow = self.flow
        heartbeats = flow.policy().heartbeats_topic()
        seconds: dict[str, float] = {}
        t0 = time.monotonic()
        store = self._syncs.refresh()
        seconds["read_syncs"] = time.monotonic() - t0

        t0 = time.monotonic()
        groups = self.source_admin.groups(flow.group_matches)
        seconds["list_groups"] = time.monotonic() - t0

        t0 = time.monotonic()

        def replicated(topic: str) -> bool:
            return topic != heartbeats and flow.topic_matches(topic)

        new = []
        ready: list[FailoverReadiness] = []
        partitions = translated = n_groups = 0
        for group, info in sorted(groups.items()):
            offsets = {tp: o for tp, o in info.offsets.items() if replicated(tp[0])}
            if not offsets:
                continue
            n_groups += 1
            partitions += len(offsets)
            rows = translate_group(offsets, store, remote_topic=flow.remote_topic, replicated=replicated)
            translated += sum(1 for r in rows if r.target_offset is not None)
            found = checkpoints_from(group, rows, self.store.get(group), info.metadata)
            new.extend(found)
            ready += failover_readiness(group, offsets, store, remote_topic=flow.remote_topic, replicated=replicated)
        seconds["translate"] = time.monotonic() - t0

        t0 = time.monotonic()
        if self._writer is not None and new:
            self._writer.write(new)
            self.emitted_total += len(new)
        self.store.update(new)
        seconds["emit"] = time.monotonic() - t0

        synced_groups = synced_partitions = 0
        failures: list[str] = []
        if self.sync_group_offsets and len(self.store):
            t0 = time.monotonic()
            converted = self.store.converted_offsets()
            target_groups, incomplete = self.target_admin.read_groups(lambda g: g in converted)
            if incomplete is not None:  # a group not listed may exist: writing it could move it backwards
                unknown = sorted(g for g in converted if g not in target_groups)
                converted = {g: o for g, o in converted.items() if g in target_groups}
                failures += [f"group {g}: not listed on the target ({incomplete}); not written" for g in unknown]
            for group, offsets in offsets_to_sync(converted, target_groups).items():
                outcome = self.target_admin.alter_group_offsets(group, offsets, self.store.converted_metadata(group))
                if outcome.ok:
                    synced_groups += 1
                    synced_partitions += len(offsets)
                else:
                    failures.append(f"group {group}: {outcome.message}")
            seconds["sync_offsets"] = time.monotonic() - t0
        for f in failures:
            log.warning("flow %s: could not write translated offsets of %s", flow.name, f)
        return CycleReport(
            n_groups,
            partitions,
            translated,
            len(new),
            synced_groups,
            synced_partitions,
            tuple(failures),
            seconds,
            tuple(ready),
        )

    def close(self) -> None:
        if self._syncs is not None:
            self._syncs.close()
        if self._writer is not None:
            self._writer.close()


def checkpoint_once(
    flow: FlowSpec,
    source_config: ClientConfig,
    target_config: ClientConfig,
    *,
    sync_group_offsets: bool | None = None,
    timeout: float = 30.0,
) -> CycleReport:
    """Start a checkpointer, run one cycle, close it."""
    cp = Checkpointer(flow, source_config, target_config, timeout=timeout, sync_group_offsets=sync_group_offsets)
    try:
        cp.start()
        return cp.cycle()
    finally:
        cp.close()


def run_checkpointer(
    flow: FlowSpec,
    source_config: ClientConfig,
    target_config: ClientConfig,
    stop_event: threading.Event,
    *,
    on_cycle: Callable[[CycleReport], None] | None = None,
    interval: float | None = None,
) -> None:
    """Checkpoint every `checkpoint_interval` until `stop_event` is set; a failed cycle is logged and retried."""
    period = interval if interval is not None else flow.offsets.checkpoint_interval.total_seconds()
    cp = Checkpointer(flow, source_config, target_config)
    try:
        started = False
        while not stop_event.is_set():
            began = time.monotonic()
            try:
                if not started:
                    cp.start()
                    started = True
                report = cp.cycle()
                log.info(
                    "flow %s: checkpoint cycle: %d groups, %d partitions, %d checkpoints emitted, "
                    "%d groups' offsets written, %.3fs",
                    flow.name,
                    report.groups,
                    report.partitions,
                    report.emitted,
                    report.synced_groups,
                    report.total_seconds,
                )
                if on_cycle is not None:
                    on_cycle(report)
            except Exception:  # the next cycle tries again; replication goes on regardless
                log.exception("flow %s: checkpoint cycle failed", flow.name)
            stop_event.wait(max(0.0, period - (time.monotonic() - began)))
    finally:
        cp.close()


def start_checkpointer_thread(
    flow: FlowSpec,
    source_config: ClientConfig,
    target_config: ClientConfig,
    stop_event: threading.Event,
    on_cycle: Callable[[CycleReport], None] | None = None,
) -> threading.Thread | None:
    """For the job driver: a started daemon thread running `run_checkpointer`, or None if the flow emits none.

    `on_cycle` gets each cycle's report (the job's metrics take the failover readiness from it)."""
    if not (flow.offsets.emit_checkpoints or flow.sync.group_offsets):
        return None
    thread = threading.Thread(
        target=run_checkpointer,
        args=(flow, source_config, target_config, stop_event),
        kwargs={"on_cycle": on_cycle},
        name=f"kmirror-checkpoints-{flow.name}",
        daemon=True,
    )
    thread.start()
    return thread
