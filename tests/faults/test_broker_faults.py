"""Brokers going away while records flow: a rolling restart of every broker of both three-broker clusters
(controlled shutdowns and kill -9), and the whole target cluster down for longer than every client timeout.

Every record the source acknowledged (acks=all, idempotent producer, RF 3, min.insync.replicas 2) must be on
the target afterwards; duplicates are counted (at-least-once delivery allows them), lost records must be 0.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from reconciler.devenv import kafka_local
from reconciler.jobcontract.layout import local_job_folder, local_state_keys
from tests.faults.conftest import (
    BROKERS,
    FaultCluster,
    FaultWorld,
    Load,
    bounce,
    create_topic,
    read_values,
    report,
    tally,
    wait_copied,
    wait_until,
)

pytestmark = [pytest.mark.faults, pytest.mark.integration]


def _job_restarts(status_file: Path) -> float:
    """kmirror_job_restarts_total from the running job's metrics endpoint (0 when it cannot be read)."""
    try:
        port = json.loads(status_file.read_text())["metrics_port"]
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except (OSError, ValueError, KeyError):
        return 0.0
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln.startswith("kmirror_job_restarts_total"))


def _start_flow(
    world: FaultWorld,
    topic: str,
    load: Load,
    producer: dict[str, str] | None = None,
    conf: dict[str, str] | None = None,
) -> str:
    world.kmirror("apply", "-f", str(world.spec(producer=producer, conf=conf)), "--auto-approve", check=True)
    remote = world.remote(topic)
    wait_until(f"records on {remote}", lambda: sum(len(v) for v in read_values(world.target, remote).values()), 180)
    return remote


def _roll(
    world: FaultWorld, load: Load, remote: str, cluster: FaultCluster, kills: tuple[bool, ...]
) -> list[dict[str, Any]]:
    """Every broker of `cluster` stopped and started again, one at a time, each back in sync before the next."""
    bounces: list[dict[str, Any]] = []
    before = tally(load, world.target, remote).duplicates
    for broker, kill in zip(range(1, BROKERS + 1), kills, strict=True):
        seconds = bounce(cluster, broker, kill)
        now = tally(load, world.target, remote).duplicates
        bounces.append(
            {
                "broker": f"{cluster.name}-{broker}",
                "how": "kill -9" if kill else "SIGTERM",
                "back_in_sync_s": round(seconds, 1),
                "duplicates": now - before,  # the other cluster's bounce at the same time counts here too
            }
        )
        before = now
    return bounces


@pytest.mark.timeout(900)
def test_a_rolling_restart_of_every_broker_loses_no_acknowledged_record(world: FaultWorld) -> None:
    topic = f"{world.prefix}orders"
    create_topic(world.source, topic, 3)
    with Load(world.source, topic, 3, rate=1000) as load:
        remote = _start_flow(world, topic, load)
        # Each cluster sees both a controlled shutdown and a kill -9; one broker at a time, each back in sync first.
        # The two clusters roll at the same time (half the wait; a source and a target broker down at once).
        with ThreadPoolExecutor(max_workers=2) as pool:
            rolls = [
                pool.submit(_roll, world, load, remote, cluster, kills)
                for cluster, kills in ((world.source, (False, True, False)), (world.target, (True, False, True)))
            ]
            bounces = [b for roll in rolls for b in roll.result()]
        time.sleep(2)
    result, recovery = wait_copied(load, world.target, remote, 300)
    report(
        "rolling_restart",
        records=result.records,
        lost=result.lost,
        duplicates=result.duplicates,
        recovery_s=round(recovery, 1),
        producer_failures=load.failed,
        bounces=bounces,
    )
    assert load.failed == 0, f"{load.failed} records the source never acknowledged (not losses; but unexpected)"
    assert result.lost == 0, f"{result.lost} acknowledged records missing on the target, e.g. {result.lost_examples}"


@pytest.mark.outage
@pytest.mark.timeout(1500)
def test_replication_resumes_without_apply_after_the_target_was_down_longer_than_every_timeout(
    world: FaultWorld,
) -> None:
    """Needs the job to retry forever with capped backoff (it gave up after five failed restarts in a row)."""
    topic = f"{world.prefix}outage"
    create_topic(world.source, topic, 3)
    target = world.target
    # Clients that give up within 6 s, so the job's query fails, and is restarted, every ~6 s plus its backoff.
    fast = {"delivery.timeout.ms": "6000", "request.timeout.ms": "5000", "max.block.ms": "5000"}
    with Load(world.source, topic, 3, rate=500) as load:
        # Restarts at most 5 s apart (spark.kmirror.restartBackoffMaxMs; 60 s by default), so five in a row come
        # within about a minute.
        remote = _start_flow(world, topic, load, producer=fast, conf={"spark.kmirror.restartBackoffMaxMs": "5000"})
        pids = [target.broker_pid(b) for b in range(1, BROKERS + 1)]
        for pid in pids:
            os.killpg(pid, signal.SIGKILL)
        down_at = time.monotonic()
        # Down past every client timeout and until the job has restarted its query five times in a row (where it
        # used to give up), at least 60 s and at most 240 s (the test's budget in a 30-minute suite);
        # its metrics show the restarts (its status file names the port).
        restarts_seen = 0.0
        (key,) = local_state_keys(world.state_topic)  # `<state topic>@<state cluster id>`: one state, one key
        report_file = local_job_folder(key, world.flow).status
        while time.monotonic() - down_at < 240 and (restarts_seen < 5 or time.monotonic() - down_at < 60):
            time.sleep(5)
            restarts_seen = max(restarts_seen, _job_restarts(report_file))
        target.start()
        back_at = time.monotonic()
        time.sleep(10)
    result, recovery = wait_copied(load, target, remote, 600)
    report(
        "target_outage",
        records=result.records,
        lost=result.lost,
        duplicates=result.duplicates,
        outage_s=round(back_at - down_at, 1),
        restarts_while_down=restarts_seen,
        recovery_s=round(recovery, 1),
    )
    assert result.lost == 0, f"{result.lost} acknowledged records missing on the target, e.g. {result.lost_examples}"
    assert all(b.running for b in kafka_local.broker_states(target.home))
    assert restarts_seen >= 1, "the job's metrics never showed it restarting its query while the target was down"
    status = world.kmirror("status", "-f", str(world.spec()), "--format", "json", check=True)
    (flow,) = json.loads(status.stdout)["flows"]
    assert flow["running"] and flow["restarts"] >= 1, flow  # kmirror status tells the story afterwards
