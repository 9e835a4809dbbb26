"""A local Spark standalone cluster (one master, one worker) from pyspark's own scripts, for tests and trials.

`start(home)` runs `spark-class org.apache.spark.deploy.master.Master` with its REST submission server on
(`spark.master.rest.enabled=true`), then one `spark-class org.apache.spark.deploy.worker.Worker`, both on
loopback, each in its own process group, and returns once the worker is registered and the REST server
answers. Everything sits in `home`: `spark-defaults.conf`, `logs/master.log`, `logs/worker.log`, the worker's
folder `work/` (one folder per driver and per executor) and `cluster.json` (pids and ports). `stop(home)` ends
both process groups; drivers and executors are the worker's children and end with it.

Cores and memory are what the worker offers to the master's scheduler, not limits: a flow's job takes one core
and `spark.driver.memory` for its driver plus its executors' (one core each by default), so the default
2 cores / 2g is one job. The worker inherits this process's environment (or `environment`, given instead: e.g. one
without kmirror's venv or PYTHONPATH, like a worker that has only Java, Spark and Python), which is where drivers
resolve the spec's `${env:..}` references.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from reconciler.devenv.kafka_local import LOOPBACK, _pick_port, _pid_alive, _terminate
from reconciler.errors import DevEnvError

_RECORD = "cluster.json"


@dataclass(frozen=True)
class StandaloneCluster:
    """The record of a started master and worker (`<home>/cluster.json`)."""

    home: str
    port: int
    rest_port: int
    webui_port: int
    worker_webui_port: int
    master_pid: int
    worker_pid: int

    @property
    def master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    @property
    def rest_url(self) -> str:
        return f"http://{LOOPBACK}:{self.rest_port}"

    @property
    def webui_url(self) -> str:
        return f"http://{LOOPBACK}:{self.webui_port}"

    @property
    def running(self) -> bool:
        return _pid_alive(self.master_pid) and _pid_alive(self.worker_pid)


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def read_record(home: Path) -> StandaloneCluster | None:
    try:
        return StandaloneCluster(**json.loads((home / _RECORD).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def start(
    home: Path,
    *,
    cores: int = 2,
    memory: str = "2g",
    timeout: float = 120.0,
    rest_jws_key: str | None = None,
    environment: Mapping[str, str] | None = None,
) -> StandaloneCluster:
    """Start a master and a worker in `home` (or return the ones already running there).

    `rest_jws_key` (base64url, at least 32 bytes): the REST submission server requires a JWS signed with it
    (Spark's JWSFilter), as a production master should. `environment`: the processes' environment instead of this
    one's (SPARK_HOME and SPARK_LOG_DIR are added).
    """
    home = home.resolve()
    previous = read_record(home)
    if previous is not None and previous.running:
        return previous
    (home / "logs").mkdir(parents=True, exist_ok=True)
    (home / "work").mkdir(exist_ok=True)
    port = _pick_port(None)
    rest_port = _pick_port(None, {port})
    webui_port = _pick_port(None, {port, rest_port})
    worker_webui_port = _pick_port(None, {port, rest_port, webui_port})
    conf = home / "spark-defaults.conf"
    conf.write_text(
        "spark.master.rest.enabled true\n"
        f"spark.master.rest.port {rest_port}\n"
        f"spark.master.rest.host {LOOPBACK}\n"
        "spark.ui.reverseProxy false\n"
        "spark.worker.cleanup.enabled false\n"
        + (
            "spark.master.rest.filters org.apache.spark.ui.JWSFilter\n"
            f"spark.org.apache.spark.ui.JWSFilter.param.secretKey {rest_jws_key}\n"
            if rest_jws_key
            else ""
        )
    )
    conf.chmod(0o600)
    base = dict(os.environ if environment is None else environment)
    env = {**base, "SPARK_HOME": str(spark_home()), "SPARK_LOG_DIR": str(home / "logs")}
    env.pop("SPARK_CONF_DIR", None)
    spark_class = str(spark_home() / "bin" / "spark-class")
    master = _spawn(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", LOOPBACK, "--port", str(port),
         "--webui-port", str(webui_port), "--properties-file", str(conf)],
        home / "logs" / "master.log", home, env,
    )  # fmt: skip
    worker = _spawn(
        [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK, "--cores", str(cores),
         "--memory", memory, "--webui-port", str(worker_webui_port), "--work-dir", str(home / "work"),
         "--properties-file", str(conf), f"spark://{LOOPBACK}:{port}"],
        home / "logs" / "worker.log", home, env,
    )  # fmt: skip
    cluster = StandaloneCluster(str(home), port, rest_port, webui_port, worker_webui_port, master.pid, worker.pid)
    (home / _RECORD).write_text(json.dumps(asdict(cluster), indent=2) + "\n")
    try:
        _wait_ready(cluster, timeout)
    except BaseException:
        stop(home)
        raise
    return cluster


def stop(home: Path, grace: float = 30.0) -> bool:
    """Stop the worker (with its drivers and executors) and the master; whether anything was running."""
    cluster = read_record(home.resolve())
    if cluster is None:
        return False
    was_running = False
    for pid in (cluster.worker_pid, cluster.master_pid):
        if _pid_alive(pid):
            was_running = True
            _terminate(pid, grace)
    return was_running


def _spawn(cmd: list[str], log: Path, cwd: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd, env=env,
            start_new_session=True,
        )  # fmt: skip


def _wait_ready(cluster: StandaloneCluster, timeout: float) -> None:
    """Until the master lists the worker ALIVE and its REST server answers."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if not cluster.running:
            raise DevEnvError(f"the local Spark master or worker exited; see {Path(cluster.home) / 'logs'}")
        try:
            with urllib.request.urlopen(f"{cluster.webui_url}/json/", timeout=2) as resp:
                workers = json.loads(resp.read()).get("workers", [])
            if any(w.get("state") == "ALIVE" for w in workers):
                try:
                    with urllib.request.urlopen(f"{cluster.rest_url}/v1/submissions/status/none", timeout=2):
                        return
                except urllib.error.HTTPError as exc:
                    if exc.code in (401, 403):
                        return  # it answers, and wants a token: up
                    raise
            last = "worker not registered yet"
        except (OSError, ValueError) as exc:
            last = str(exc)
        time.sleep(0.5)
    raise DevEnvError(
        f"the local Spark cluster did not come up within {timeout:.0f}s ({last}); see {Path(cluster.home) / 'logs'}"
    )
