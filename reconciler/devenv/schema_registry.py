"""The local schema registries of `kmirror dev up --schema-registry`: one Apicurio Registry 2.4.2.Final per cluster.

Apicurio's container image needs Docker, which the machines kmirror is developed on do not have, so the registry is
built from Maven Central once, by the Maven project beside this module (`registry_app/pom.xml`: a
`quarkus-maven-plugin` build of `apicurio-registry-app` with its parent as BOM, and the three workarounds its
comments name), into `$KMIRROR_CACHE/registry/apicurio-<version>` (the build runs in a temporary folder and is
renamed into place only when it succeeded). Each registry stores in H2 in memory (a restart forgets every subject,
like a fresh cluster would) and serves the Confluent API under `/apis/ccompat/v7` on a loopback port recorded in
`<cluster home>/schema-registry/registry.json`.

Must not: be imported by production code (only `cli/` and the tests start registries), bind anything but loopback,
or signal a process that is not the registry of the record's folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from reconciler.artifacts.jars import cache_lock, cache_root
from reconciler.devenv.kafka_local import LOOPBACK, _pick_port, _pid_alive, _tail, _terminate
from reconciler.errors import DevEnvError

APICURIO_VERSION = "2.4.2.Final"
#: The Confluent-compatible API of the registry, relative to its root.
CCOMPAT_PATH = "/apis/ccompat/v7"
_RECORD = "registry.json"
_COMPLETE_MARKER = ".complete"
_RUNNER = f"kmirror-dev-registry-{APICURIO_VERSION}-runner.jar"


@dataclass(frozen=True)
class LocalRegistry:
    """The record of one started registry."""

    cluster: str
    home: str
    port: int
    pid: int | None
    started_at: float

    @property
    def root_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        """What a Confluent client (and `clusters.<name>.schema_registry.url`) is given."""
        return self.root_url + CCOMPAT_PATH


def registry_home(cluster_home: Path) -> Path:
    return cluster_home / "schema-registry"


def ensure_built() -> Path:
    """The folder holding the registry's runner jar and its `lib/`, built with Maven the first time (~25 s and
    ~210 MB of downloads into ~/.m2)."""
    target = cache_root() / "registry" / f"apicurio-{APICURIO_VERSION}"
    if (target / _COMPLETE_MARKER).exists():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevEnvError("the dev schema registry is built with Maven, which is not on PATH (apt-get install maven)")
    with cache_lock(cache_root() / ".registry.lock"):
        if (target / _COMPLETE_MARKER).exists():  # another process built it while this one waited
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(target, ignore_errors=True)  # no marker: an interrupted build
        print(
            f"kmirror: building Apicurio Registry {APICURIO_VERSION} from Maven Central (once; cached in {target})",
            file=sys.stderr,
        )
        staging = Path(tempfile.mkdtemp(prefix=".apicurio-", dir=target.parent))
        try:
            project = staging / "project"
            jvm = resources.files("reconciler.artifacts") / "jvm"
            app = resources.files("reconciler.devenv") / "registry_app"
            with resources.as_file(app) as app_dir, resources.as_file(jvm) as jvm_dir:
                shutil.copytree(app_dir, project)
                cmd = [mvn, "-B", "-q", "-s", str(jvm_dir / "settings.xml"), "-f", str(project / "pom.xml")]
                result = subprocess.run([*cmd, "package"], capture_output=True, text=True, check=False)
            if result.returncode != 0:
                output = (result.stdout + result.stderr)[-4000:]
                raise DevEnvError(f"could not build the dev schema registry:\n{output}")
            out = staging / "app"
            out.mkdir()
            shutil.move(project / "target" / _RUNNER, out / _RUNNER)
            shutil.move(project / "target" / "lib", out / "lib")
            (out / _COMPLETE_MARKER).write_text(f"built with {' '.join(cmd)} package\n")
            out.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def read_record(cluster_home: Path) -> LocalRegistry | None:
    path = registry_home(cluster_home) / _RECORD
    if not path.exists():
        return None
    return LocalRegistry(**json.loads(path.read_text()))


def _alive(registry: LocalRegistry) -> bool:
    """Whether the recorded process is still this folder's registry (pids are reused: its command line must name
    the folder)."""
    if registry.pid is None or not _pid_alive(registry.pid):
        return False
    try:
        cmdline = Path(f"/proc/{registry.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return registry.home in cmdline


def is_running(registry: LocalRegistry) -> bool:
    return _alive(registry) and _answers(registry)


def _answers(registry: LocalRegistry) -> bool:
    try:
        with urllib.request.urlopen(registry.url + "/subjects", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def start(cluster: str, cluster_home: Path, timeout: float = 120.0) -> LocalRegistry:
    """Starts the registry of `cluster` (a no-op when it runs) and waits until its Confluent API answers."""
    home = registry_home(cluster_home.resolve())
    previous = read_record(cluster_home.resolve())
    if previous is not None and is_running(previous):
        return previous
    if previous is not None and previous.pid is not None and _alive(previous):
        _terminate(previous.pid, grace=10)
    app = ensure_built()
    home.mkdir(parents=True, exist_ok=True)
    port = _pick_port(previous.port if previous else None)
    env = {**os.environ, "HTTP_PORT": str(port), "QUARKUS_HTTP_HOST": LOOPBACK}
    log = home / "registry.out"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                os.environ.get("KMIRROR_JAVA", "java"), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                f"-Dkmirror.registry.home={home}", "-jar", str(app / _RUNNER),
            ],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=home, env=env,
        )  # fmt: skip
    registry = LocalRegistry(cluster=cluster, home=str(home), port=port, pid=proc.pid, started_at=time.time())
    (home / _RECORD).write_text(json.dumps(asdict(registry), indent=2) + "\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DevEnvError(
                f"the schema registry of {cluster} exited with code {proc.returncode} while starting; see {log}:\n"
                f"{_tail(log)}"
            )
        if _answers(registry):
            return registry
        time.sleep(0.25)
    _terminate(proc.pid, grace=5)
    raise DevEnvError(f"the schema registry of {cluster} did not answer within {timeout:.0f}s; see {log}")


def stop(cluster_home: Path) -> bool:
    """Stops the registry of the cluster in `cluster_home`; returns whether it was running."""
    registry = read_record(cluster_home.resolve())
    if registry is None or registry.pid is None or not _alive(registry):
        return False
    with contextlib.suppress(ProcessLookupError):
        _terminate(registry.pid, grace=10)
    return True


def status(cluster_home: Path) -> dict[str, object] | None:
    """`{"url", "running"}` of the cluster's registry, or None when it was never started."""
    registry = read_record(cluster_home.resolve())
    if registry is None:
        return None
    return {"url": registry.url, "running": _alive(registry)}
