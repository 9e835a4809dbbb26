"""Fetching the JVM artifacts: Maven when it is there, Apache Ivy otherwise, from the one list in jvm/pom.xml."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from reconciler.artifacts import jars
from reconciler.artifacts.ivy import ivy_module

pytestmark = pytest.mark.unit


def test_the_ivy_module_has_each_profiles_dependencies_and_exclusions() -> None:
    pom = (resources.files("reconciler.artifacts") / "jvm" / "pom.xml").read_text()
    spark = ivy_module(pom, ["spark-kafka"], {"spark.version": "4.1.3"})
    assert 'name="spark-sql-kafka-0-10_2.13" rev="4.1.3"' in spark
    assert '<exclude org="org.apache.spark" module="spark-token-provider-kafka-0-10_2.13"/>' in spark
    assert 'name="spark-token-provider-kafka-0-10_2.13" rev="4.0.0"' in spark  # the pom's own property
    kafka = ivy_module(pom, ["kafka", "kafka4-logging"], {"kafka.version": "4.3.1"})
    assert 'name="kafka_2.13" rev="4.3.1"' in kafka and 'name="log4j-slf4j-impl"' in kafka
    with pytest.raises(ValueError, match="no profile nope"):
        ivy_module(pom, ["nope"], {})


def test_without_maven_the_jars_are_fetched_with_ivy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No `mvn` on PATH: the command run is Ivy's (from pyspark's jars), not Maven's."""
    monkeypatch.setenv("KMIRROR_CACHE", str(tmp_path))
    monkeypatch.delenv(jars.RESOLVER_ENV, raising=False)
    monkeypatch.setattr(jars.shutil, "which", lambda name: None if name == "mvn" else f"/usr/bin/{name}")
    ran: list[list[str]] = []

    class Done:
        returncode, stdout, stderr = 1, "", "offline"

    def fake_run(cmd: list[str], **kwargs: object) -> Done:
        ran.append(cmd)
        return Done()

    monkeypatch.setattr(jars.subprocess, "run", fake_run)
    with pytest.raises(jars.ArtifactError, match=r"Apache Ivy could not fetch kafka-4\.3\.1"):
        jars.kafka_libs("4.3.1")
    (cmd,) = ran
    assert cmd[1:3] == ["-jar", cmd[2]] and Path(cmd[2]).name.startswith("ivy-") and "-retrieve" in cmd
    monkeypatch.setenv(jars.RESOLVER_ENV, "maven")
    with pytest.raises(jars.ArtifactError, match=r"Maven .* is not on PATH"):
        jars.kafka_libs("4.3.1")
