"""The pair of local clusters behind `kmirror dev`: a Kafka 3.9 `source` and a Kafka 4.x `target`.

They live under one root folder (`$KMIRROR_DEV_HOME`, default `.kmirror/dev`), one sub-folder per cluster,
and prefer the ports of the examples (19092 and 29092) so the example files work as they are; when those are
taken, any free loopback port is used and `kmirror dev status` tells which. With `--brokers N` each cluster is N
brokers (one KRaft quorum), broker i preferring the cluster's port + 10 * (i - 1).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from reconciler.devenv import kafka_local
from reconciler.devenv.jars import KAFKA_SOURCE_VERSION, KAFKA_TARGET_VERSION
from reconciler.devenv.kafka_local import BrokerOptions, LocalCluster


@dataclass(frozen=True)
class ClusterDef:
    name: str
    version: str
    preferred_port: int


DEV_CLUSTERS = (
    ClusterDef("source", KAFKA_SOURCE_VERSION, 19092),
    ClusterDef("target", KAFKA_TARGET_VERSION, 29092),
)


@dataclass(frozen=True)
class ClusterStatus:
    name: str
    version: str
    bootstrap_servers: str | None
    running: bool
    log_dir: str | None
    brokers: tuple[kafka_local.BrokerState, ...] = ()


def dev_root() -> Path:
    return Path(os.environ.get("KMIRROR_DEV_HOME") or ".kmirror/dev").resolve()


def up(root: Path, options: BrokerOptions | None = None) -> list[LocalCluster]:
    """Starts every dev cluster that is not running (in parallel: the JVMs start faster side by side)."""
    with ThreadPoolExecutor(max_workers=len(DEV_CLUSTERS)) as pool:
        futures = [
            pool.submit(kafka_local.start, d.name, d.version, root / d.name, options, d.preferred_port)
            for d in DEV_CLUSTERS
        ]
        return [f.result() for f in futures]


def up_brokers(root: Path, brokers: int, options: BrokerOptions | None = None) -> list[list[LocalCluster]]:
    """`up` with `brokers` brokers per cluster (one KRaft quorum each); starts any broker that is not running."""
    with ThreadPoolExecutor(max_workers=len(DEV_CLUSTERS)) as pool:
        futures = [
            pool.submit(kafka_local.start_brokers, d.name, d.version, root / d.name, brokers, options, d.preferred_port)
            for d in DEV_CLUSTERS
        ]
        return [f.result() for f in futures]


def down(root: Path) -> list[str]:
    """Stops the dev clusters (every broker); returns the names of those that were running."""
    return [d.name for d in DEV_CLUSTERS if kafka_local.stop_brokers(root / d.name)]


def status(root: Path) -> list[ClusterStatus]:
    result = []
    for d in DEV_CLUSTERS:
        homes = kafka_local.broker_homes(root / d.name)
        records = [r for r in (kafka_local.read_record(h) for h in homes or [root / d.name]) if r is not None]
        brokers = tuple(kafka_local.broker_states(root / d.name))
        result.append(
            ClusterStatus(
                name=d.name,
                version=records[0].version if records else d.version,
                bootstrap_servers=kafka_local.bootstrap_of(records) if records else None,
                running=bool(brokers) and all(b.running for b in brokers),
                log_dir=str(records[0].log_dir) if len(records) == 1 else str(root / d.name) if records else None,
                brokers=brokers,
            )
        )
    return result
