"""The standalone runner's pure parts: the REST request it sends (no resolved secret in it), the responses it
parses, and the states it reports; plus the driver wrapper's stop watcher. No JVM, no network."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest

from reconciler.jobcontract.layout import JobFolder
from reconciler.replication import standalone_entry
from reconciler.resources.deployments import StandaloneDeployment
from reconciler.runners import JobRunnerError, runner_for
from reconciler.runners.rest import PYTHON_RUNNER, DriverStatus, create_request, parse_created, parse_status
from reconciler.runners.standalone import ENTRY, STOP_FILE, ShippedJob, StandaloneRunner
from reconciler.spec.loader import load_text
from tests.conftest import process_state

pytestmark = pytest.mark.unit

SPEC = """
version: 1
clusters:
  a: {bootstrap_servers: "a:9092", client: {sasl.password: "${env:KM_TEST_SECRET}"}}
  b: {bootstrap_servers: "b:9092"}
state: {cluster: b}
spark:
  deploy: standalone
  master: spark://m:7077
  rest_url: http://m:6066/
  checkpoint_root: /shared/kmirror
  conf: {spark.executor.memory: 2g, spark.some.password: "${env:KM_TEST_SECRET}", spark.cores.max: 2}
flows:
  - {name: f, source: a, target: b, topics: {include: [orders]}}
"""


def test_create_request_runs_the_python_file_through_python_runner() -> None:
    body = create_request(
        app_name="kmirror-f",
        entry=Path("/opt/kmirror/standalone_entry.py"),
        app_args=["--spec", "/x/spec.json"],
        master="spark://m:7077",
        spark_properties={"spark.driver.memory": "1g"},
        environment={"PYSPARK_PYTHON": "/venv/bin/python"},
        spark_version="4.0.0",
    )
    assert body["action"] == "CreateSubmissionRequest"
    assert body["mainClass"] == PYTHON_RUNNER
    assert body["appResource"] == "file:///opt/kmirror/standalone_entry.py"
    assert body["appArgs"] == ["/opt/kmirror/standalone_entry.py", "", "--spec", "/x/spec.json"]
    assert body["clientSparkVersion"] == "4.0.0"
    props = body["sparkProperties"]
    assert props["spark.master"] == "spark://m:7077"
    assert props["spark.submit.deployMode"] == "cluster"
    assert props["spark.app.name"] == "kmirror-f"
    assert props["spark.driver.supervise"] == "true"  # the master launches a driver that died again
    assert props["spark.driver.memory"] == "1g"


def test_the_runners_request_holds_no_secret_and_sends_only_the_python_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "hunter2-do-not-leak"
    monkeypatch.setenv("KM_TEST_SECRET", secret)
    desired = load_text(SPEC).state.with_source_path(tmp_path / "kmirror.yaml")
    runner = runner_for(desired).primary
    assert isinstance(runner, StandaloneRunner)
    assert runner.rest.url == "http://m:6066"
    folder = runner.folder("f")
    assert folder == JobFolder(Path("/shared/kmirror/_kmirror.state/f"))  # keyed by state topic and flow
    body = runner.request("f", desired.spark, folder, desired.flow_digest("f"), "/shared/kmirror/_kmirror.state/f/cp")
    assert secret not in json.dumps(body)
    assert set(body["environmentVariables"]) == {"PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"}
    props = body["sparkProperties"]
    assert "spark.some.password" not in props  # a setting with a reference is resolved by the job, in memory
    assert props["spark.executor.memory"] == "2g" and props["spark.cores.max"] == "2"
    assert props["spark.pyspark.python"] == runner.python
    assert all(j.startswith("file:/") and j.endswith(".jar") for j in props["spark.jars"].split(","))
    log4j = f"-Dlog4j2.configurationFile=file:{folder.path / 'log4j2.properties'}"
    assert log4j in props["spark.driver.extraJavaOptions"]
    args = body["appArgs"]
    assert args[:2] == [str(ENTRY), ""]
    assert args[args.index("--kmirror-stop-file") + 1] == str(folder.path / STOP_FILE)
    assert args[args.index("--spec") + 1] == str(folder.path / "spec.json")
    assert "--resume-from-syncs" not in args
    assert args[args.index("--digest") + 1] == desired.flow_digest("f")


def test_parse_status_of_a_running_an_ended_and_an_unknown_driver() -> None:
    running = parse_status(
        "driver-1",
        {
            "action": "SubmissionStatusResponse",
            "driverState": "RUNNING",
            "serverSparkVersion": "4.0.0",
            "submissionId": "driver-1",
            "success": True,
            "workerHostPort": "10.0.0.7:42873",
            "workerId": "worker-x",
        },
    )
    assert running == DriverStatus("driver-1", True, "RUNNING", "10.0.0.7:42873")
    assert running.active and running.host == "10.0.0.7"
    failed = parse_status(
        "driver-2",
        {"action": "SubmissionStatusResponse", "driverState": "ERROR", "success": True, "message": "boom"},
    )
    assert not failed.active and failed.message == "boom"

    def state(name: str) -> DriverStatus:
        return parse_status("d", {"action": "SubmissionStatusResponse", "driverState": name, "success": True})

    assert all(state(s).active for s in ("SUBMITTED", "RELAUNCHING", "UNKNOWN"))
    assert not any(state(s).active for s in ("FINISHED", "KILLED", "FAILED"))
    unknown = parse_status("driver-9", {"action": "SubmissionStatusResponse", "success": False})
    assert not unknown.found and not unknown.active


def test_parse_created_gives_the_id_or_the_masters_refusal() -> None:
    ok = {"action": "CreateSubmissionResponse", "submissionId": "driver-20260101-0000", "success": True}
    assert parse_created(ok) == "driver-20260101-0000"
    with pytest.raises(JobRunnerError, match="Malformed request"):
        parse_created({"action": "ErrorResponse", "message": "Malformed request: appResource missing"})


def test_an_unreachable_rest_server_makes_the_job_status_unknown(tmp_path: Path) -> None:
    text = SPEC.replace("http://m:6066/", "http://127.0.0.1:9").replace("/shared/kmirror", str(tmp_path / "shared"))
    desired = load_text(text).state.with_source_path(tmp_path / "kmirror.yaml")
    runner = runner_for(desired)
    assert runner.status().known  # nothing deployed yet: nothing to ask
    # A driver submitted by an apply that died before recording it: found in the flow's shared folder.
    folder = tmp_path / "shared" / "_kmirror.state" / "f"
    folder.mkdir(parents=True)
    (folder / "runner.json").write_text(json.dumps({"submission_id": "driver-1", "rest_url": "http://127.0.0.1:9"}))
    assert not runner.status().known
    job = runner.job("f")
    assert job is not None and not job.running and "unreachable" in (job.state or "")
    with pytest.raises(JobRunnerError, match="cannot reach the Spark REST submission server"):
        runner.stop("f")


def test_the_wrapper_signals_itself_once_the_stop_file_appears(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    got: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    monkeypatch.setattr(standalone_entry, "POLL_SECONDS", 0.05)
    stop = tmp_path / STOP_FILE
    try:
        threading.Thread(target=standalone_entry.watch, args=(stop, os.getppid()), daemon=True).start()
        time.sleep(0.2)
        assert got == []
        stop.write_text("x")
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
        assert got == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_the_python_job_dies_with_its_parent_even_when_no_thread_of_it_runs(tmp_path: Path) -> None:
    """The driver JVM killed with SIGKILL: the kernel kills its Python child (PR_SET_PDEATHSIG), with no help
    from the child's own threads (here it runs none; a shutting-down interpreter runs none either)."""
    child = (
        "import sys, time; from reconciler.replication.standalone_entry import die_with_parent; "
        "ok = die_with_parent(); print(ok, flush=True); time.sleep(120)"
    )
    parent = (
        f"import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', {child!r}]); "
        "print(p.pid, flush=True); time.sleep(120)"
    )
    root = Path(standalone_entry.__file__).resolve().parents[2]
    jvm = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True, cwd=root)
    assert jvm.stdout is not None
    pid = int(jvm.stdout.readline())
    try:
        assert jvm.stdout.readline().strip() == "True"  # the child asked for it and runs
        assert Path(f"/proc/{pid}").exists()
        jvm.kill()
        jvm.wait()
        deadline = time.monotonic() + 5
        while (state := process_state(pid)) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert state is None, f"the child outlived its killed parent: {state}"
    finally:
        jvm.kill()
        if process_state(pid) is not None:
            os.kill(pid, signal.SIGKILL)


def test_the_rest_token_is_an_hs256_jws_the_jwsfilter_verifies_and_expires() -> None:
    import base64
    import hashlib
    import hmac

    from reconciler.runners.rest import jws_token

    key_bytes = bytes(range(32))
    key = base64.urlsafe_b64encode(key_bytes).rstrip(b"=").decode()
    token = jws_token(key, 1_000_000.0)
    header, payload, signature = token.split(".")

    def decode(part: str) -> bytes:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))

    assert json.loads(decode(header)) == {"alg": "HS256", "typ": "JWT"}
    claims = json.loads(decode(payload))
    assert claims["exp"] - claims["iat"] == 300 and claims["iat"] == 1_000_000
    expected = hmac.new(key_bytes, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    assert decode(signature) == expected
    with pytest.raises(JobRunnerError, match="at least 32 bytes"):
        jws_token(base64.urlsafe_b64encode(b"short").decode(), 0)


def test_an_inline_rest_signing_key_is_refused_and_a_reference_is_resolved_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reconciler.spec.issues import SpecError

    inline = SPEC.replace("  checkpoint_root:", "  rest_jws_secret_key: c2VjcmV0\n  checkpoint_root:")
    with pytest.raises(SpecError, match="signing key is written inline"):
        load_text(inline)
    monkeypatch.setenv("KM_REST_KEY", "k" * 43)
    ref = SPEC.replace("  checkpoint_root:", '  rest_jws_secret_key: "${env:KM_REST_KEY}"\n  checkpoint_root:')
    desired = load_text(ref).state.with_source_path(tmp_path / "kmirror.yaml")
    runner = runner_for(desired).primary
    assert isinstance(runner, StandaloneRunner)
    assert "k" * 43 not in json.dumps(desired.model_dump(mode="json"))
    assert runner.rest._signing_key == "k" * 43


def test_a_shipped_job_runs_the_workers_copy_of_the_entry_with_the_packed_environment(tmp_path: Path) -> None:
    desired = load_text(SPEC).state.with_source_path(tmp_path / "kmirror.yaml")
    runner = runner_for(desired).primary
    assert isinstance(runner, StandaloneRunner)
    shared = tmp_path / "shared" / "_kmirror" / "envs" / "k"
    shipped = ShippedJob(
        archive=shared / "kmirror-env.tar.gz",
        entry=shared / "standalone_entry.py",
        jars=(shared / "jars" / "a.jar",),
        python="/usr/bin/python3.11",
    )
    folder = runner.folder("f")
    body = runner.request("f", desired.spark, folder, "d", "/shared/cp", shipped=shipped)
    assert body["appResource"] == shipped.entry.as_uri()  # the worker downloads it into the driver's folder
    args = body["appArgs"]
    assert args[:2] == ["{{USER_JAR}}", ""]  # ... and PythonRunner runs that copy
    assert args[args.index("--kmirror-env") + 1] == str(shipped.archive)
    props = body["sparkProperties"]
    assert props["spark.jars"] == (shared / "jars" / "a.jar").as_uri()  # nothing from this machine's cache
    assert props["spark.archives"] == f"{shipped.archive.as_uri()}#kmirror-env"
    assert props["spark.pyspark.driver.python"] == "/usr/bin/python3.11"
    assert props["spark.pyspark.python"] == "./kmirror-env/bin/python"
    assert body["environmentVariables"] == {
        "PYSPARK_PYTHON": "./kmirror-env/bin/python",
        "PYSPARK_DRIVER_PYTHON": "/usr/bin/python3.11",
    }


def test_the_entry_unpacks_the_environment_once_and_puts_it_first_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
    archive = tmp_path / "env.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in (("pyvenv.cfg", b"home = /usr/bin\n"), (f"{site}/kmirror_probe_mod.py", b"X = 1\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("bin/python")
        link.type, link.linkname = tarfile.SYMTYPE, "/usr/bin/python3"
        tar.addfile(link)
    driver = tmp_path / "driver-1"
    driver.mkdir()
    monkeypatch.setattr(sys, "path", list(sys.path))
    packages = standalone_entry.use_environment(archive.as_uri(), driver)
    assert packages == driver / "kmirror-env" / site and sys.path[0] == str(packages)
    assert (packages / "kmirror_probe_mod.py").read_text() == "X = 1\n"
    assert not (driver / "kmirror-env" / "bin" / "python").exists()  # the driver already runs the base Python
    archive.unlink()  # a relaunched driver reuses what its folder has
    assert standalone_entry.use_environment(str(archive), driver) == packages
    other = tmp_path / "other.tar.gz"
    with tarfile.open(other, "w:gz") as tar:
        info = tarfile.TarInfo("pyvenv.cfg")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(SystemExit, match="packed for another Python"):
        standalone_entry.use_environment(str(other), tmp_path / "driver-2")


def test_a_job_with_its_folder_on_hdfs_reads_its_spec_and_writes_its_status_there(tmp_path: Path) -> None:
    desired = load_text(SPEC.replace("checkpoint_root: /shared/kmirror", "checkpoint_root: hdfs://nn:8020/k"))
    desired = desired.state.with_source_path(tmp_path / "kmirror.yaml")
    runner = runner_for(desired).primary
    assert isinstance(runner, StandaloneRunner)
    remote = "hdfs://nn:8020/k/_kmirror.state/f"
    assert runner.remote_folder("f", StandaloneDeployment()) == remote
    folder = runner.folder("f", StandaloneDeployment(folder=remote))  # this host's copy of its status
    assert "hdfs" not in str(folder.path)
    base = "hdfs://nn:8020/k/_kmirror/envs/k"
    shipped = ShippedJob(f"{base}/kmirror-env.tar.gz", f"{base}/standalone_entry.py", (f"{base}/jars/a.jar",), "/p")
    body = runner.request("f", desired.spark, folder, "d", f"{remote}/checkpoint", shipped=shipped, remote=remote)
    assert body["appResource"] == f"{base}/standalone_entry.py"
    args = body["appArgs"]
    assert args[args.index("--kmirror-folder") + 1] == remote
    assert args[args.index("--spec") + 1] == f"{remote}/spec.json"
    assert "--kmirror-log" not in args and "--kmirror-stop-file" not in args
    props = body["sparkProperties"]
    assert props["spark.jars"] == f"{base}/jars/a.jar"
    assert props["spark.archives"] == f"{base}/kmirror-env.tar.gz#kmirror-env"
    assert "log4j2.configurationFile" not in props.get("spark.driver.extraJavaOptions", "")
