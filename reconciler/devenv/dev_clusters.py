"""The pair of local clusters behind `kmirror dev`: a Kafka 3.9 `source` and a Kafka 4.x `target`.

They live under one root folder (`$KMIRROR_DEV_HOME`, default `.kmirror/dev`), one sub-folder per cluster,
and prefer the ports of the examples (19092 and 29092) so the example files work as they are; when those are
taken, any free loopback port is used and `kmirror dev status` tells which.
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


def down(root: Path) -> list[str]:
    """Stops the dev clusters; returns the names of those that were running."""
    return [d.name for d in DEV_CLUSTERS if kafka_local.stop(root / d.name)]


def status(root: Path) -> list[ClusterStatus]:
    result = []
    for d in DEV_CLUSTERS:
        record = kafka_local.read_record(root / d.name)
        result.append(
            ClusterStatus(
                name=d.name,
                version=record.version if record else d.version,
                bootstrap_servers=record.bootstrap_servers if record else None,
                running=record is not None and kafka_local.is_running(record),
                log_dir=str(record.log_dir) if record else None,
            )
        )
    return result
