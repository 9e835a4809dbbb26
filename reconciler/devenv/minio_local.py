"""A local S3 for `s3a://` checkpoint roots: MinIO, started by `kmirror dev up --s3` and by the tests.

MinIO ships no Maven or PyPI artifact, so it is built from its Go module (`MINIO_MODULE` at `MINIO_VERSION`, the
module proxy's newest, checked against the Go checksum database as `go install` does) once into the kmirror cache
(`$KMIRROR_CACHE/minio/<version>/minio`, ~150 MB; 2-5 minutes on 2 cores; the build lands in a temporary folder
and is renamed into place only when it succeeded). It needs Go 1.24+ (`go` on PATH).

Everything else sits in `home` (`<dev root>/s3`): `data/` (MinIO's single drive), `logs/minio.log`, `minio.json`
(pid, port, bucket) and `keys/` (0700): the root key pair generated for this dev environment, as
`access_key` and `secret_key` (for `${file:..}` references) and `aws.env` (`AWS_ACCESS_KEY_ID=..`,
`AWS_SECRET_ACCESS_KEY=..`, for a shell's `set -a; . aws.env`: S3A's default credential chain reads them from the
job's environment). MinIO gets its keys from its environment, never from its command line; `status()` names the
files, never the keys. One bucket, `kmirror`, is created at start.

Must not: be imported by production code (only `cli/` and the tests); bind anything but loopback; signal a process
that is not the MinIO of this `home` (its command line names `home`).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from reconciler.artifacts.jars import cache_lock, cache_root
from reconciler.devenv.kafka_local import LOOPBACK, _pick_port, _pid_alive, _tail, _terminate
from reconciler.devenv.s3_requests import S3Endpoint, S3RequestError, create_bucket
from reconciler.errors import DevEnvError

MINIO_MODULE = "github.com/minio/minio"
#: The module proxy's newest MinIO (its releases are not semver tags, so Go names them by commit).
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"
BUCKET = "kmirror"
REGION = "us-east-1"
PREFERRED_PORT = 19000
_RECORD = "minio.json"
_COMPLETE_MARKER = ".complete"


@dataclass(frozen=True)
class LocalS3:
    """The record of one started MinIO (`<home>/minio.json`)."""

    home: str
    pid: int
    port: int
    bucket: str = BUCKET

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def running(self) -> bool:
        return _pid_alive(self.pid) and _names_home(self.pid, Path(self.home))

    @property
    def keys(self) -> Path:
        return Path(self.home) / "keys"

    def client(self) -> S3Endpoint:
        """The endpoint and key pair, for the dev tooling's own requests (the keys read from `keys/`)."""
        return S3Endpoint(
            self.endpoint,
            (self.keys / "access_key").read_text().strip(),
            (self.keys / "secret_key").read_text().strip(),
            REGION,
        )

    def status(self) -> dict[str, object]:
        """What `kmirror dev status --format json` shows under "s3" (the key files' paths, never the keys)."""
        return {
            "endpoint": self.endpoint,
            "bucket": self.bucket,
            "region": REGION,
            "access_key_file": str(self.keys / "access_key"),
            "secret_key_file": str(self.keys / "secret_key"),
            "env_file": str(self.keys / "aws.env"),
            "running": self.running,
        }


def minio_binary() -> Path:
    """The MinIO server binary, built from its Go module the first time (needs `go`)."""
    target = cache_root() / "minio" / MINIO_VERSION
    if (target / _COMPLETE_MARKER).exists():
        return target / "minio"
    go = shutil.which("go")
    if go is None:
        raise DevEnvError(
            f"`kmirror dev up --s3` builds MinIO ({MINIO_MODULE}) once with Go, which is not on PATH: install Go 1.24+ "
            "(apt-get install golang-go; an older Go fetches the toolchain MinIO asks for)"
        )
    with cache_lock(cache_root() / ".minio.lock"):
        if (target / _COMPLETE_MARKER).exists():  # another process built it while this one waited
            return target / "minio"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(target, ignore_errors=True)  # no marker: an interrupted build
        staging = Path(tempfile.mkdtemp(prefix=".minio-", dir=target.parent))
        print(f"kmirror: building MinIO {MINIO_VERSION} with Go (once, 2-5 min; cached in {target})", file=sys.stderr)
        started = time.monotonic()
        env = {**os.environ, "GOBIN": str(staging), "GOTOOLCHAIN": os.environ.get("GOTOOLCHAIN", "auto")}
        result = subprocess.run(
            [go, "install", f"{MINIO_MODULE}@{MINIO_VERSION}"], env=env, capture_output=True, text=True, check=False
        )
        if result.returncode != 0 or not (staging / "minio").is_file():
            shutil.rmtree(staging, ignore_errors=True)
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
            raise DevEnvError(f"building MinIO with `go install {MINIO_MODULE}@{MINIO_VERSION}` failed:\n{tail}")
        took = time.monotonic() - started
        (staging / _COMPLETE_MARKER).write_text(f"go install {MINIO_MODULE}@{MINIO_VERSION}: {took:.0f} s\n")
        staging.rename(target)
    return target / "minio"


def read_record(home: Path) -> LocalS3 | None:
    try:
        data = json.loads((home / _RECORD).read_text())
        return LocalS3(home=str(home), pid=int(data["pid"]), port=int(data["port"]), bucket=str(data["bucket"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def start(home: Path, *, timeout: float = 60.0) -> LocalS3:
    """Start MinIO in `home` with this dev environment's keys and the `kmirror` bucket (or return the running one)."""
    home = home.resolve()
    previous = read_record(home)
    if previous is not None and previous.running:
        return previous
    binary = minio_binary()
    access, secret = ensure_keys(home / "keys")
    (home / "logs").mkdir(parents=True, exist_ok=True)
    (home / "data").mkdir(parents=True, exist_ok=True)
    port = _pick_port(previous.port if previous is not None else PREFERRED_PORT)
    log = home / "logs" / "minio.log"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MINIO_", "AWS_"))},
        "MINIO_ROOT_USER": access,
        "MINIO_ROOT_PASSWORD": secret,
        "MINIO_BROWSER": "off",
        "MINIO_UPDATE": "off",
        "MINIO_REGION": REGION,
    }
    cmd = [str(binary), "server", str(home / "data"), "--address", f"{LOOPBACK}:{port}", "--quiet"]
    with log.open("ab") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=home, env=env,
            start_new_session=True,
        )  # fmt: skip
    record = LocalS3(home=str(home), pid=proc.pid, port=port)
    (home / _RECORD).write_text(json.dumps({"pid": proc.pid, "port": port, "bucket": BUCKET}) + "\n")
    try:
        deadline = time.monotonic() + timeout
        _wait_live(record, proc, timeout)
        _create_bucket_once_initialised(record, deadline)
    except (DevEnvError, S3RequestError) as e:
        stop(home)
        raise DevEnvError(f"the local S3 (MinIO) did not start: {e}\n{_tail(log)}") from None
    except BaseException:
        stop(home)
        raise
    return record


def stop(home: Path, grace: float = 15.0) -> bool:
    """Stop this home's MinIO; whether it was running. Its data and keys stay (a restart sees the same bucket)."""
    record = read_record(home.resolve())
    if record is None or not record.running:
        return False
    _terminate(record.pid, grace)
    return True


def ensure_keys(folder: Path) -> tuple[str, str]:
    """This dev environment's key pair, generated once into `folder` (0700; files 0600)."""
    access_file, secret_file = folder / "access_key", folder / "secret_key"
    if access_file.is_file() and secret_file.is_file():
        return access_file.read_text().strip(), secret_file.read_text().strip()
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    access, secret = f"kmirror-{secrets.token_hex(6)}", secrets.token_urlsafe(30)
    for path, text in (
        (access_file, access),
        (secret_file, secret),
        (folder / "aws.env", f"AWS_ACCESS_KEY_ID={access}\nAWS_SECRET_ACCESS_KEY={secret}\nAWS_REGION={REGION}\n"),
    ):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
    return access, secret


def _names_home(pid: int, home: Path) -> bool:
    try:
        return str(home).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _create_bucket_once_initialised(record: LocalS3, deadline: float) -> None:
    """Create the bucket, retried while MinIO answers 503 XMinioServerNotInitialized: its health/live endpoint
    answers as soon as the process serves HTTP, its object layer (formatting the data folder) comes later, slower
    on a loaded machine."""
    while True:
        try:
            create_bucket(record.client(), BUCKET)
            return
        except S3RequestError as e:
            if "XMinioServerNotInitialized" not in str(e) or time.monotonic() >= deadline:
                raise
        time.sleep(0.3)


def _wait_live(record: LocalS3, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DevEnvError(f"MinIO exited with code {proc.returncode} while starting")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{record.endpoint}/minio/health/live", timeout=3) as response,
        ):
            if response.status == 200:
                return
        time.sleep(0.3)
    raise DevEnvError(f"MinIO did not answer {record.endpoint}/minio/health/live within {timeout:.0f}s")
