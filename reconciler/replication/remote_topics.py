"""Creates and grows remote topics from inside the running job, by the planner's own rules.

Every remote topic the job writes to must exist with at least as many partitions as its source (brokers run
with `auto.create.topics.enable=false`, and the job keeps partition numbers). `RemoteTopicKeeper.refresh` reads
the source's topic list and makes the target match: the same `replicated_topics` and `synced_configs` the
planner's create action uses, the source's partition count, the flow's replication factor. Partitions only
grow. The job refreshes once before its query starts and then every `WATCH_INTERVAL` seconds from a thread
(`watch`): Spark notices a new source topic or partition within `metadata.max.age.ms` (3 s), and the sink's
producer waits (up to its `max.block.ms`) for a topic or partition its metadata does not show yet, so a record
for a new topic is written once the keeper has created its remote topic. `ensure` checks given partitions
against what was already ensured and refreshes when one is new.

Must not: delete anything, shrink anything, or touch a topic the flow does not replicate.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from reconciler.errors import KmirrorError
from reconciler.kafka_clients.admin import KafkaAdmin, TopicMeta
from reconciler.live.model import ClusterState, TopicInfo
from reconciler.spec.models import FlowSpec

log = logging.getLogger(__name__)

#: Metadata can lag a moment behind a batch that already saw a new partition; retry before giving up.
_ENSURE_ATTEMPTS = 8
#: Seconds between two refreshes of the running job's watcher thread.
WATCH_INTERVAL = 2.0


class RemoteTopicError(KmirrorError):
    """A remote topic could not be created or grown; the batch is not written."""


class RemoteTopicKeeper:
    def __init__(
        self, flow: FlowSpec, source: KafkaAdmin, target: KafkaAdmin, *, refresh_interval: float = 5.0
    ) -> None:
        self.flow = flow
        self.source = source
        self.target = target
        self.refresh_interval = refresh_interval
        #: source topic -> partition count its remote topic is known to have (at least)
        self._ensured: dict[str, int] = {}
        self._refreshed_at = float("-inf")
        self.created: list[str] = []
        self.grown: list[str] = []
        #: The remote topics the job writes to, as of the last refresh (all exist on the target).
        self.remote_topics: list[str] = []

    def ensure(self, touched: Mapping[str, int]) -> None:
        """Make sure each source topic's remote topic holds partition `touched[topic]` (the highest seen)."""
        if not self._missing(touched) and time.monotonic() - self._refreshed_at < self.refresh_interval:
            return
        for attempt in range(_ENSURE_ATTEMPTS):
            self.refresh()
            missing = self._missing(touched)
            if not missing:
                return
            time.sleep(min(0.25 * 2**attempt, 4.0))
        raise RemoteTopicError(
            f"flow {self.flow.name}: the remote topics of {sorted(missing)} could not be made to hold the "
            f"partitions the batch writes to ({dict(sorted(missing.items()))}); see the job log."
        )

    def watch(self, stop: threading.Event, interval: float = WATCH_INTERVAL) -> threading.Thread:
        """Refresh every `interval` seconds from a daemon thread until `stop` is set; failures are logged."""

        def loop() -> None:
            while not stop.wait(interval):
                try:
                    self.refresh()
                except Exception as exc:  # a broker hiccup: the next round tries again
                    log.warning("remote topics of flow %s not refreshed: %s", self.flow.name, exc)

        thread = threading.Thread(target=loop, name=f"kmirror-remote-topics-{self.flow.name}", daemon=True)
        thread.start()
        return thread

    def _missing(self, touched: Mapping[str, int]) -> dict[str, int]:
        return {t: p for t, p in touched.items() if self._ensured.get(t, 0) <= p}

    def replicated_partitions(self) -> int:
        """Partitions of the source topics the flow replicates now (read from the source; creates nothing)."""
        source, wanted = self._wanted()
        return sum(source[s].partitions for s in wanted)

    def source_partitions(self) -> dict[str, int]:
        """The replicated source topics and their partition counts, as the source has them now."""
        source, wanted = self._wanted()
        return {s: source[s].partitions for s in wanted}

    def _wanted(self) -> tuple[dict[str, TopicMeta], dict[str, str]]:
        """The source's topics, and the replicated ones with their remote names."""
        source = self.source.topics()
        state = ClusterState(
            self.flow.source,
            {n: TopicInfo(n, m.partitions, m.replication_factor) for n, m in source.items()},
            None,
        )
        return source, {s: r for s, r in self.flow.remote_topics(state.topics).items() if s in source}

    def refresh(self) -> None:
        """Read the source's topics and create or grow every remote topic that is missing or too small."""
        source, wanted = self._wanted()
        target = self.target.topics()
        new = sorted(s for s, r in wanted.items() if r not in target)
        configs = self.source.explicit_topic_configs(new) if new else {}
        creates = [
            (
                wanted[s],
                source[s].partitions,
                self.flow.topic_defaults.replication_factor,
                self.flow.synced_configs(configs.get(s, {})),
            )
            for s in new
        ]
        grows = {
            r: source[s].partitions
            for s, r in wanted.items()
            if r in target and target[r].partitions < source[s].partitions
        }
        failed = set()
        for outcome in self.target.create_topics(creates) + self.target.create_partitions(grows):
            if not outcome.ok:
                failed.add(outcome.key)
                log.warning("remote topic %s on %s: %s", outcome.key, self.target.cluster, outcome.message)
        for name, *_ in creates:
            if name not in failed:
                self.created.append(name)
                log.info("created remote topic %s on %s", name, self.target.cluster)
        for name, count in grows.items():
            if name not in failed:
                self.grown.append(name)
                log.info("grew remote topic %s on %s to %d partitions", name, self.target.cluster, count)
        changed = {name: count for name, count, *_ in creates} | grows
        changed = {name: count for name, count in changed.items() if name not in failed}
        if changed:
            target = self._await_metadata(changed)
        self._ensured = {
            s: max(source[s].partitions, target[r].partitions if r in target else 0)
            for s, r in wanted.items()
            if r not in failed
        }
        self.remote_topics = sorted(r for r in wanted.values() if r not in failed)
        self._refreshed_at = time.monotonic()

    def _await_metadata(self, changed: Mapping[str, int], timeout: float = 15.0) -> dict[str, TopicMeta]:
        """Wait until the target's metadata shows the new partitions (clients look leaders up there)."""
        deadline = time.monotonic() + timeout
        while True:
            target = self.target.topics()
            if all(n in target and target[n].partitions >= c for n, c in changed.items()):
                return target
            if time.monotonic() > deadline:
                log.warning("target metadata does not show all of %s yet", sorted(changed))
                return target
            time.sleep(0.2)
