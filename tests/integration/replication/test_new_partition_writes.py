"""The job's sink producer writes to a remote topic the moment it exists without stalling or failing a batch.

A broker shows a new partition in its metadata a moment before it leads it. An idempotent producer that writes at
once can have its first request refused (NOT_LEADER_OR_FOLLOWER) while its next one, already in flight, is
appended; every retry of the first is then refused as out of order until delivery.timeout.ms expires it
(KAFKA-14359, fixed in brokers from 4.5 only). In the job that was a partition stalled for two minutes, a failed
batch and its records written again: the suite saw it when the job's keeper created a remote topic 39 ms before the
sink wrote to it. The job's interceptor (jvm/PartitionLeaders.java) holds a new partition's first record until the
partition's leader answers for it. Without it, this program lost 16-726 of its 24,000 records to expired batches
in five runs on the 4.x broker here; with it, none. It is run both ways the gate learns of a leader: asking for
each topic as its first record comes, and taking the answers the driver asks for ahead (`PartitionLeaders.confirmAhead`,
here for all the topics before they exist, each written to the moment it is created). With an ahead answer taken
on trust (the gate not waiting for it), the second way lost 16-240 records in three runs, as the first does
without the gate.

Needs a JDK: the program is compiled against the job's Kafka client and the interceptor jar.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from reconciler.artifacts import interceptor_jar
from reconciler.artifacts.jars import spark_kafka_jars
from reconciler.replication.interceptor import INTERCEPTOR_CLASS
from tests.conftest import KafkaCluster

pytestmark = [pytest.mark.integration]

TOPICS, PARTITIONS, PER_PARTITION = 5, 16, 300


@pytest.mark.parametrize("asked", ["each", "ahead"])
def test_records_written_to_new_partitions_at_once_are_all_acknowledged(
    tmp_path: Path, target: KafkaCluster, asked: str
) -> None:
    javac, java = shutil.which("javac"), shutil.which("java")
    assert javac is not None and java is not None, "a JDK is needed"
    import pyspark

    pyspark_jars = Path(pyspark.__file__).parent / "jars" / "*"  # slf4j, lz4 and the rest the connector leaves out
    classpath = ":".join(str(p) for p in [*spark_kafka_jars(), interceptor_jar(), pyspark_jars])
    source = Path(__file__).parent / "jvm" / "NewPartitionWrites.java"
    subprocess.run([javac, "-d", str(tmp_path), "-cp", classpath, str(source)], check=True, timeout=120)
    prefix = f"new-partitions-{uuid.uuid4().hex[:6]}-"
    run = subprocess.run(
        [java, "-cp", f"{tmp_path}:{classpath}", "NewPartitionWrites", target.bootstrap_servers, prefix,
         str(TOPICS), str(PARTITIONS), str(PER_PARTITION), INTERCEPTOR_CLASS, asked],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    counts = dict(field.split("=") for field in run.stdout.split())
    assert counts == {"acknowledged": str(TOPICS * PARTITIONS * PER_PARTITION), "failed": "0"}, run.stderr[-3000:]
    assert "without its leader's answer" not in run.stderr  # every partition was confirmed, none let through
