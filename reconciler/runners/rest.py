"""The Spark standalone master's REST submission server: the request that runs a Python driver, the answers.

`create_request` builds a `CreateSubmissionRequest` running a Python file through `PythonRunner` as a
cluster-mode driver; `parse_status` and `parse_created` read the answers; `RestClient` sends them (create, status,
kill). The driver's state (SUBMITTED, RUNNING, RELAUNCHING, UNKNOWN: active; FINISHED, KILLED, FAILED, ERROR: over)
is the runner's truth about whether a job runs.

Authentication: a master whose REST server runs Spark's `JWSFilter` (`spark.master.rest.filters`) wants
`Authorization: Bearer <JWS>` on every request, an HS256 token signed with the filter's base64url key.
`RestClient(signing_key=...)` signs a fresh token valid for five minutes per request (`jws_token`); the key
stays in memory and neither it nor a token is ever logged.

Must not: decide anything about a flow; put a resolved secret in a request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.runners.common import JobRunnerError

PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"
#: Driver states in which the driver is (or will again be) running on a worker.
ACTIVE_STATES = frozenset({"SUBMITTED", "RUNNING", "RELAUNCHING", "UNKNOWN"})


@dataclass(frozen=True)
class DriverStatus:
    """One driver as the master's REST server reports it."""

    submission_id: str
    found: bool
    state: str | None = None
    worker: str | None = None  # host:port
    message: str | None = None

    @property
    def active(self) -> bool:
        return self.found and self.state in ACTIVE_STATES

    @property
    def host(self) -> str | None:
        return self.worker.rpartition(":")[0] if self.worker else None


# -- the protocol ---------------------------------------------------------------------------


def create_request(
    *,
    app_name: str,
    entry: Path | str,
    app_args: Sequence[str],
    master: str,
    spark_properties: Mapping[str, str],
    environment: Mapping[str, str],
    spark_version: str,
    python_file: str | None = None,
) -> dict[str, Any]:
    """The body of `POST /v1/submissions/create` running `entry` (a Python file, or its URI) as a cluster-mode driver.

    `python_file`: the path PythonRunner runs, by default `entry`'s own; `{{USER_JAR}}` is the worker's copy of
    `entry` (the appResource, which the worker downloads into the driver's folder and substitutes there)."""
    props = {
        **spark_properties,
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.submit.deployMode": "cluster",
    }
    props.setdefault("spark.driver.supervise", "true")
    return {
        "action": "CreateSubmissionRequest",
        "appResource": entry if isinstance(entry, str) else entry.as_uri(),
        "mainClass": PYTHON_RUNNER,
        # PythonRunner's arguments: the Python file, its comma-separated py-files (none), then the app's own.
        "appArgs": [python_file or str(entry), "", *app_args],
        "clientSparkVersion": spark_version,
        "environmentVariables": dict(environment),
        "sparkProperties": props,
    }


def parse_status(submission_id: str, payload: Mapping[str, Any]) -> DriverStatus:
    """A `SubmissionStatusResponse`: success false means the master knows no such driver."""
    if payload.get("action") != "SubmissionStatusResponse" or not payload.get("success"):
        return DriverStatus(submission_id, False, message=_text(payload.get("message")))
    return DriverStatus(
        submission_id,
        True,
        _text(payload.get("driverState")),
        _text(payload.get("workerHostPort")),
        _text(payload.get("message")),
    )


def parse_created(payload: Mapping[str, Any]) -> str:
    """The submission id of a `CreateSubmissionResponse`; `JobRunnerError` with the master's message if refused."""
    sid = payload.get("submissionId")
    if payload.get("action") != "CreateSubmissionResponse" or not payload.get("success") or not isinstance(sid, str):
        why = _text(payload.get("message")) or json.dumps(dict(payload))[:500]
        raise JobRunnerError(f"the Spark master refused the driver: {why}")
    return sid


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


#: How long a signed token is valid (each request signs a new one).
TOKEN_SECONDS = 300


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def jws_token(key: str, now: float, seconds: int = TOKEN_SECONDS) -> str:
    """An HS256 JWS (`header.payload.signature`) that Spark's JWSFilter accepts for the base64url `key`."""
    try:
        secret = base64.urlsafe_b64decode(key + "=" * (-len(key) % 4))
    except ValueError as exc:
        raise JobRunnerError("spark.rest_jws_secret_key is not base64url text (the JWSFilter's secretKey)") from exc
    if len(secret) < 32:
        raise JobRunnerError("spark.rest_jws_secret_key must decode to at least 32 bytes (HS256 needs 256 bits)")
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = {"sub": "kmirror", "iat": int(now), "exp": int(now) + seconds}
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    signature = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64url(signature)}"


class RestClient:
    """The master's REST submission server: create, status, kill. Connection errors are `JobRunnerError`."""

    def __init__(self, url: str, timeout: float = 10.0, *, signing_key: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._signing_key = signing_key

    def create(self, request: Mapping[str, Any]) -> str:
        return parse_created(self._call("POST", "/v1/submissions/create", request))

    def status(self, submission_id: str) -> DriverStatus:
        return parse_status(submission_id, self._call("GET", f"/v1/submissions/status/{submission_id}"))

    def kill(self, submission_id: str) -> bool:
        return bool(self._call("POST", f"/v1/submissions/kill/{submission_id}").get("success"))

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json;charset=UTF-8"}
        if self._signing_key is not None:
            headers["Authorization"] = f"Bearer {jws_token(self._signing_key, time.time())}"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise JobRunnerError(
                    f"the Spark REST submission server {self.url} refused the request (HTTP {exc.code}): "
                    + (
                        "the token kmirror signed was not accepted; is spark.rest_jws_secret_key the key of the "
                        "master's JWSFilter (its param.secretKey)?"
                        if self._signing_key is not None
                        else "it requires authentication; set spark.rest_jws_secret_key to a reference to the key of "
                        "its JWSFilter (its param.secretKey), e.g. ${env:SPARK_REST_JWS_KEY}"
                    )
                ) from None
            raw = exc.read()  # the server's other error responses are JSON too
        except (OSError, ValueError) as exc:
            raise JobRunnerError(
                f"cannot reach the Spark REST submission server {self.url} ({exc}); is the master running with "
                "spark.master.rest.enabled=true, and is spark.rest_url its REST port (6066 by default)?"
            ) from exc
        try:
            payload = json.loads(raw)
        except ValueError:
            raise JobRunnerError(f"{self.url}{path} answered something that is not JSON: {raw[:200]!r}") from None
        return payload if isinstance(payload, dict) else {}
