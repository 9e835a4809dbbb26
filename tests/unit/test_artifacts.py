"""Fetching the JVM artifacts: a known set from its committed lock (parallel downloads, SHA-256 checked), any other
with Maven when it is there, Apache Ivy otherwise, from the one list in jvm/pom.xml.

All unit tests but one, which downloads a real set from Maven Central (marked integration)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import re
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pyspark
import pytest

from reconciler.artifacts import jars, pinned
from reconciler.artifacts.ivy import ivy_module


@pytest.mark.unit
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


@pytest.mark.unit
def test_without_maven_the_jars_are_fetched_with_ivy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No `mvn` on PATH and a set without a lock (a version only code asks for): the command run is Ivy's (from
    pyspark's jars), not Maven's. `KMIRROR_RESOLVER=ivy` resolves even a locked set with Ivy."""
    assert jars.locked(jars.kafka_set("4.2.0")) is None
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
    with pytest.raises(jars.ArtifactError, match=r"Apache Ivy could not fetch kafka-4\.2\.0"):
        jars.kafka_libs("4.2.0")
    (cmd,) = ran
    assert cmd[1:3] == ["-jar", cmd[2]] and Path(cmd[2]).name.startswith("ivy-") and "-retrieve" in cmd
    assert list((tmp_path / "jars").iterdir()) == []  # the staging folder went with the failure
    locked = jars.KAFKA_TARGET_VERSION
    assert jars.locked(jars.kafka_set(locked)) is not None
    monkeypatch.setenv(jars.RESOLVER_ENV, "ivy")
    with pytest.raises(jars.ArtifactError, match=f"Apache Ivy could not fetch kafka-{re.escape(locked)}"):
        jars.kafka_libs(locked)
    assert len(ran) == 2
    monkeypatch.setenv(jars.RESOLVER_ENV, "maven")
    with pytest.raises(jars.ArtifactError, match=r"Maven .* is not on PATH"):
        jars.kafka_libs(locked)


@pytest.mark.unit
def test_every_set_kmirror_fetches_has_a_lock_made_from_the_pom_as_it_is() -> None:
    """A pom, version or pyspark pin edited without `make lock` fails here (the fetch would fall back to Ivy)."""
    locks = resources.files("reconciler.artifacts") / "jvm" / "locks"
    sets = jars.known_sets(pyspark.__version__)
    for jar_set in sets:
        assert (locks / f"{jar_set.name}.json").is_file(), f"no lock for {jar_set.name}: run `make lock`"
        assert jars.locked(jar_set) is not None, f"{jar_set.name}: lock is stale (pom edited): run `make lock`"
    assert sorted(p.name for p in locks.iterdir()) == sorted(f"{s.name}.json" for s in sets), "run `make lock`"


@pytest.mark.unit
def test_a_lock_names_each_jar_as_maven_copies_it() -> None:
    """`<artifactId>-<version>[-<classifier>].jar`, once per set, with a SHA-256; kafka-3.9.2's broker is in it."""
    for jar_set in jars.known_sets(pyspark.__version__):
        lock = jars.locked(jar_set)
        assert lock is not None and lock.jars
        names = [jar.file for jar in lock.jars]
        assert len(names) == len(set(names)), jar_set.name
        for jar in lock.jars:
            classifier = f"-{jar.classifier}" if jar.classifier else ""
            assert jar.file == f"{jar.artifact}-{jar.version}{classifier}.jar", jar
            assert re.fullmatch(r"[0-9a-f]{64}", jar.sha256), jar
    kafka = jars.locked(jars.kafka_set("3.9.2"))
    assert kafka is not None
    assert any(j.group == "org.apache.kafka" and j.file == "kafka_2.13-3.9.2.jar" for j in kafka.jars)


def _repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int = 2, wrong: str = "") -> pinned.Lock:
    """A Maven repository folder with `count` jars (the first ~100 kB, in a two-level group), a lock of them
    (`wrong`'s hash garbled), served as `file://`; `_serve` serves it over HTTP instead."""
    repo = tmp_path / "repo"
    locked = []
    for i in range(count):
        group, artifact, body = ("org.example.deep" if i else "org.example"), f"a{i}", f"jar {i}".encode() * (i or 9999)
        jar = pinned.LockedJar(group, artifact, "1.0", "", f"{artifact}-1.0.jar", hashlib.sha256(body).hexdigest())
        if jar.file == wrong:
            jar = pinned.LockedJar(group, artifact, "1.0", "", jar.file, "0" * 64)
        path = Path(jar.url(str(repo)))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        locked.append(jar)
    lock = pinned.Lock("kafka-9.9.9", ("kafka",), {"kafka.version": "9.9.9"}, "sha256:test", tuple(locked))
    monkeypatch.setenv("KMIRROR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(pinned.REPOSITORY_ENV, repo.as_uri())
    monkeypatch.delenv(jars.RESOLVER_ENV, raising=False)
    monkeypatch.setattr(jars, "locked", lambda jar_set: lock if jar_set.name == lock.name else None)
    monkeypatch.setattr(jars.subprocess, "run", lambda *a, **k: pytest.fail("a resolver ran"))
    monkeypatch.setattr(pinned, "_BACKOFF_S", 0.0)
    return lock


@contextlib.contextmanager
def _serve(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """`folder` over HTTP/1.1 (keep-alive) on localhost as the repository; yields the client address of each
    connection the server accepted."""
    connections: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            connections.append(f"{self.client_address}")
            super().setup()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        for proxy in ("http_proxy", "HTTP_PROXY"):
            monkeypatch.delenv(proxy, raising=False)
        monkeypatch.setenv(pinned.REPOSITORY_ENV, f"http://127.0.0.1:{server.server_address[1]}/")
        yield connections
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.unit
def test_a_locked_set_is_downloaded_over_few_connections_checked_and_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = _repository(tmp_path, monkeypatch, count=40)
    with _serve(tmp_path / "repo", monkeypatch) as connections:
        folder = jars.kafka_libs("9.9.9")
    assert folder == tmp_path / "cache" / "jars" / "kafka-9.9.9"
    assert {j.file: j.sha256 for j in lock.jars} == {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.glob("*.jar")
    }
    assert (folder / ".complete").is_file()
    assert len(connections) <= pinned.WORKERS  # kept alive from jar to jar
    assert f"fetching kafka-9.9.9 from Maven Central with {jars.LOCK_TOOL}" in capsys.readouterr().err
    monkeypatch.setattr(pinned, "fetch", lambda *a: pytest.fail("downloaded again"))
    assert jars.kafka_libs("9.9.9") == folder
    assert capsys.readouterr().err == ""


@pytest.mark.unit
def test_a_jar_that_does_not_match_its_lock_fails_the_fetch_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _repository(tmp_path, monkeypatch, wrong="a1-1.0.jar")
    actual = hashlib.sha256(b"jar 1").hexdigest()
    with pytest.raises(jars.ArtifactError) as failed:
        jars.kafka_libs("9.9.9")  # from file://, through urllib
    message = str(failed.value)
    assert "a1-1.0.jar" in message and f"SHA-256 {actual}" in message and "0" * 64 in message
    assert "KMIRROR_MAVEN_REPOSITORY" in message and "KMIRROR_RESOLVER=maven" in message
    assert list((tmp_path / "cache" / "jars").iterdir()) == []  # no set folder, no marker, no staging
    with _serve(tmp_path / "repo", monkeypatch), pytest.raises(jars.ArtifactError, match=f"SHA-256 {actual}"):
        jars.kafka_libs("9.9.9")  # over HTTP
    assert list((tmp_path / "cache" / "jars").iterdir()) == []


@pytest.mark.unit
def test_a_jar_the_repository_does_not_have_fails_the_fetch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = _repository(tmp_path, monkeypatch)
    Path(lock.jars[1].url(str(tmp_path / "repo"))).unlink()
    with pytest.raises(jars.ArtifactError, match=r"could not download file://.*a1-1\.0\.jar \(3 attempts"):
        jars.kafka_libs("9.9.9")
    assert list((tmp_path / "cache" / "jars").iterdir()) == []
    with (
        _serve(tmp_path / "repo", monkeypatch),
        pytest.raises(jars.ArtifactError, match=r"a1-1\.0\.jar answered HTTP 404 .* does not serve a1-1\.0\.jar"),
    ):
        jars.kafka_libs("9.9.9")
    assert list((tmp_path / "cache" / "jars").iterdir()) == []


@pytest.mark.integration
def test_a_locked_set_is_fetched_from_maven_central_as_locked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The smallest real set (MirrorMaker 2, ~34 MB) from Maven Central into an empty cache: exactly the locked
    files with the locked hashes, and once."""
    monkeypatch.setenv("KMIRROR_CACHE", str(tmp_path))
    monkeypatch.delenv(jars.RESOLVER_ENV, raising=False)
    monkeypatch.delenv(pinned.REPOSITORY_ENV, raising=False)
    monkeypatch.setattr(jars.subprocess, "run", lambda *a, **k: pytest.fail("a resolver ran"))
    lock = jars.locked(jars.mm2_set(jars.KAFKA_TARGET_VERSION))
    assert lock is not None
    folder = jars.mm2_libs(jars.KAFKA_TARGET_VERSION)
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.name != ".complete"} == {
        j.file: j.sha256 for j in lock.jars
    }
    monkeypatch.setattr(pinned, "fetch", lambda *a: pytest.fail("downloaded again"))
    assert jars.mm2_libs(jars.KAFKA_TARGET_VERSION) == folder
