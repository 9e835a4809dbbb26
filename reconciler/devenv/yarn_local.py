"""A local Hadoop for `spark.deploy: yarn`: a MiniDFSCluster (one DataNode) and a MiniYARNCluster (one
NodeManager), Hadoop's own test clusters, in one JVM started by `kmirror dev up --yarn` and by the tests.

The JVM runs `jvm/MiniHadoop.java` (shipped in this package, compiled once per source version with `javac` into the
kmirror cache, like the client-quota tool) on the unshaded `hadoop-minicluster` jar set (`artifacts.jars`, pinned
in `jvm/locks`, fetched on first use: ~100 MB). Everything sits in `home` (`<dev root>/yarn`): the clusters' data,
`logs/minihadoop.log`, `conf/` (the HADOOP_CONF_DIR a client needs: `fs.defaultFS`, `dfs.replication`, the
NameNode's HTTP address, the ResourceManager's addresses) and `ready.json` (the JVM's pid and the addresses, written
by the JVM once both clusters serve). `stop(home)` sends SIGTERM (the JVM stops YARN, whose NodeManager ends its
containers, then HDFS), kills what is left after a grace period, and then any container process still running from
the NodeManager's folders under `home` (containers run in sessions of their own).

`start(home, yarn=False)` starts the MiniDFSCluster alone (no `yarn-site.xml`, `resource_manager` ""): for a
checkpoint root on HDFS without YARN (the standalone runner's tests), it saves the MiniYARNCluster's start and its
ResourceManager's and NodeManager's threads.

Sizes: the NodeManager offers `memory_mb` and `vcores` to the scheduler (not limits: one job's AM + one executor is
~2 GB of requests on 2 real cores); the JVM itself is ~0.45 GB resident and ready in 6-30 s on 2 busy cores.

Must not: be imported by production code (only `cli/` and the tests); touch a process that is not this JVM or one of
its containers (found by `home` in their command lines).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from reconciler.artifacts.jars import hadoop_minicluster_libs
from reconciler.artifacts.java_build import cached_jar, jdk_tool
from reconciler.devenv.kafka_local import _pid_alive
from reconciler.errors import DevEnvError

SOURCE = "MiniHadoop.java"
MAIN_CLASS = "io.kmirror.dev.MiniHadoop"
_READY = "ready.json"
_PID = "minihadoop.pid"
#: Guice (the YARN web applications) defines classes through java.lang's internals; Hadoop reflects into java.base.
_ADD_OPENS = [
    f"--add-opens=java.base/{pkg}=ALL-UNNAMED"
    for pkg in (
        "java.lang", "java.lang.reflect", "java.util", "java.util.concurrent", "java.io", "java.net", "java.nio",
        "sun.nio.ch", "sun.security.action",
    )
]  # fmt: skip


@dataclass(frozen=True)
class YarnCluster:
    """The record of a started MiniDFSCluster + MiniYARNCluster (`<home>/ready.json`)."""

    home: str
    pid: int
    resource_manager: str  # "" when started without YARN (`start(home, yarn=False)`)
    hdfs: str
    webhdfs: str
    hadoop_conf_dir: str

    @property
    def running(self) -> bool:
        return _pid_alive(self.pid)

    def status(self) -> dict[str, object]:
        """What `kmirror dev status --format json` shows under "yarn"."""
        return {
            "resource_manager": self.resource_manager,
            "hdfs": self.hdfs,
            "hadoop_conf_dir": self.hadoop_conf_dir,
            "webhdfs": self.webhdfs,
            "running": self.running,
        }


#: The credential-store writer, compiled into the same jar.
CREDENTIALS_SOURCE = "HadoopCredentials.java"
CREDENTIALS_CLASS = "io.kmirror.dev.HadoopCredentials"


def _source(name: str = SOURCE) -> bytes:
    return (resources.files("reconciler.devenv") / "jvm" / name).read_bytes()


def minihadoop_jar() -> Path:
    """The MiniHadoop main's jar, compiled on first use (needs a JDK's `javac`)."""
    return cached_jar(
        "kmirror-minihadoop",
        {SOURCE: _source(), CREDENTIALS_SOURCE: _source(CREDENTIALS_SOURCE)},
        lambda: [f"{hadoop_minicluster_libs()}/*"],
        what="the local Hadoop's main",
        no_javac="`kmirror dev up --yarn` compiles a small Java main once with `javac`: install a JDK 17",
        error=DevEnvError,
    )


def store_credentials(cluster: YarnCluster, path: str, values: Mapping[str, str]) -> str:
    """Store `values` (alias -> secret, e.g. `fs.s3a.secret.key`) in a Hadoop credential provider at `path` on the
    local HDFS, as an operator does with `hadoop credential create`; the provider's URI
    (`jceks://hdfs@host:port/path`), which `hadoop.security.credential.provider.path` or S3A's
    `fs.s3a.security.credential.provider.path` names. The values go to the JVM on stdin, never a command line."""
    java = jdk_tool("java")
    if java is None:
        raise DevEnvError("storing Hadoop credentials needs Java 17 (`java` on PATH or in $JAVA_HOME/bin)")
    hdfs = urllib.parse.urlsplit(cluster.hdfs)
    uri = f"jceks://hdfs@{hdfs.netloc}/{path.lstrip('/')}"
    cmd = [java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", f"{minihadoop_jar()}:{hadoop_minicluster_libs()}/*"]
    env = {k: v for k, v in os.environ.items() if k not in ("HADOOP_CONF_DIR", "YARN_CONF_DIR", "CLASSPATH")}
    result = subprocess.run(
        [*cmd, CREDENTIALS_CLASS, uri], input="".join(f"{k}={v}\n" for k, v in values.items()),
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise DevEnvError(f"could not store credentials in {uri}: {result.stderr.strip()[-800:]}")
    return uri


def read_record(home: Path) -> YarnCluster | None:
    try:
        data = json.loads((home / _READY).read_text())
        return YarnCluster(home=str(home), **data)
    except (OSError, ValueError, TypeError):
        return None


def start(
    home: Path, *, memory_mb: int = 4096, vcores: int = 4, timeout: float = 180.0, yarn: bool = True
) -> YarnCluster:
    """Start the local HDFS and YARN in `home` (or return the ones already running there, if they are what is
    asked for). `yarn=False`: HDFS alone."""
    home = home.resolve()
    previous = read_record(home)
    if previous is not None and previous.running and (previous.resource_manager or not yarn):
        return previous
    stop(home)  # leftovers of a JVM that died: its containers
    java = jdk_tool("java")
    if java is None:
        raise DevEnvError("`kmirror dev up --yarn` needs Java 17 (`java` on PATH or in $JAVA_HOME/bin)")
    jar = minihadoop_jar()
    libs = hadoop_minicluster_libs()
    (home / _READY).unlink(missing_ok=True)
    for data in ("hdfs", "target", "conf"):  # a fresh cluster each time: HDFS formatted, YARN's ids new
        shutil.rmtree(home / data, ignore_errors=True)
    (home / "logs").mkdir(parents=True, exist_ok=True)
    log = home / "logs" / "minihadoop.log"
    cmd = [
        java, "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *_ADD_OPENS,
        "-cp", f"{jar}:{libs}/*", MAIN_CLASS, str(home),
        *((str(memory_mb), str(vcores)) if yarn else ("hdfs-only",)),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("HADOOP_CONF_DIR", "YARN_CONF_DIR", "CLASSPATH")}
    with log.open("ab") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=home, env=env,
            start_new_session=True,
        )  # fmt: skip
    (home / _PID).write_text(f"{proc.pid}\n")
    try:
        return _wait_ready(home, proc, timeout)
    except BaseException:
        stop(home)
        raise


def stop(home: Path, grace: float = 30.0) -> bool:
    """Stop the JVM (YARN, then HDFS) and any container left from it; whether the JVM was running."""
    home = home.resolve()
    pid = _recorded_pid(home)
    was_running = pid is not None and _pid_alive(pid)
    if pid is not None and was_running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _pid_alive(pid):
            time.sleep(0.3)
        if _pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    for leftover in _container_pids(home):
        with contextlib.suppress(ProcessLookupError):
            os.kill(leftover, signal.SIGKILL)
    (home / _READY).unlink(missing_ok=True)
    return was_running


def _recorded_pid(home: Path) -> int | None:
    record = read_record(home)
    if record is not None:
        return record.pid
    try:
        return int((home / _PID).read_text().strip())
    except (OSError, ValueError):
        return None


def _container_pids(home: Path) -> list[int]:
    """Processes whose command line names the NodeManager's folders under `home` (its containers)."""
    marker = str(home / "target").encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _wait_ready(home: Path, proc: subprocess.Popen[bytes], timeout: float) -> YarnCluster:
    """Until the JVM wrote `ready.json` and the ResourceManager's REST API answers (HDFS alone: WebHDFS)."""
    deadline = time.monotonic() + timeout
    log = home / "logs" / "minihadoop.log"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DevEnvError(f"the local Hadoop exited with code {proc.returncode} while starting; see {log}")
        record = read_record(home)
        if record is not None:
            try:
                if _serves(record):
                    return record
            except (OSError, ValueError):
                pass
        time.sleep(0.5)
    raise DevEnvError(f"the local Hadoop did not come up within {timeout:.0f}s; see {log}")


def _serves(record: YarnCluster) -> bool:
    """The ResourceManager says STARTED; without YARN, WebHDFS lists the root folder."""
    if not record.resource_manager:
        with urllib.request.urlopen(f"{record.webhdfs}/webhdfs/v1/?op=GETFILESTATUS", timeout=5) as resp:
            return bool(json.loads(resp.read()).get("FileStatus"))
    with urllib.request.urlopen(f"{record.resource_manager}/ws/v1/cluster/info", timeout=5) as resp:
        return bool(json.loads(resp.read()).get("clusterInfo", {}).get("state") == "STARTED")
