"""The sentinel, for per-environment values (issue 35): one random secret read through `${file:}` as
`bootstrap_servers`, and through `${env:}` into `state.topic`, `spark.master` and `spark.checkpoint_root`;
every command, text and JSON, run as a user runs it (a process, its real stdout and stderr): the secret is in no
output and no file kmirror wrote, 0 occurrences.

Two desired states: one whose values are invalid (every command stops at load, and the messages must name the
references, `${file:key.pem}`, never the content: a private key read as bootstrap servers), one whose values are
valid but lead nowhere (127.0.0.1:1 and a host under `.invalid`), so plan, apply, status and the state commands
get as far as the clusters and report them by reference. No broker is needed.
(tests/e2e/test_tls_security.py is the sentinel for credentials, on real TLS clusters.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

KMIRROR = [sys.executable, "-m", "reconciler.cli"]


def _kmirror(cwd: Path, env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [*KMIRROR, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "NO_COLOR": "1", "KMIRROR_FILE_ROOTS": str(cwd / "run-secrets"), **env},
    )  # fmt: skip
    assert "bug in kmirror" not in result.stderr, result.stderr
    return result.stdout + result.stderr


def _written(folder: Path, inputs: set[Path]) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and p not in inputs]


def _commands(spec: str, *, reaches_clusters: bool) -> list[list[str]]:
    timeout = ["--timeout", "1"]
    commands = [
        ["validate", "-f", spec],
        ["validate", "-f", spec, "--format", "json"],
        ["plan", "-f", spec, *timeout],
        ["plan", "-f", spec, *timeout, "--format", "json"],
        ["plan", "-f", spec, *timeout, "--format", "markdown", "--out", "plan.json"],
        ["--debug", "plan", "-f", spec, *timeout],
        ["apply", "-f", spec, *timeout, "--auto-approve"],
        ["status", "-f", spec, *timeout],
        ["status", "-f", spec, *timeout, "--format", "json"],
        ["cutover", "-f", spec, "--flow", "f", "--check"],
    ]
    if not reaches_clusters:  # each of these waits 30 s for the state cluster when the file is valid
        commands += [
            ["state", "list", "-f", spec],
            ["state", "history", "-f", spec, "--format", "json"],
            ["state", "show", "-f", spec, "topic/b/a.orders"],
            ["import", "-f", spec, "topic/b/a.orders"],
            ["force-unlock", "-f", spec, "0123456789ab"],
        ]
    return commands


@pytest.mark.parametrize("valid", [False, True], ids=["invalid-values", "valid-values"])
def test_a_secret_in_a_per_environment_value_is_nowhere(tmp_path: Path, valid: bool) -> None:
    secret = f"sentinel{uuid.uuid4().hex}"
    (tmp_path / "run-secrets").mkdir()
    key = f"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\n{secret}\n-----END PRIVATE KEY-----\n"
    (tmp_path / "key.pem").write_text(key if not valid else f"{secret}.invalid:9092\n")
    spec = tmp_path / "kmirror.yaml"
    spec.write_text(
        textwrap.dedent(f"""\
            version: 1
            clusters:
              a: {{bootstrap_servers: "${{file:key.pem}}"}}
              b: {{bootstrap_servers: "127.0.0.1:1"}}
            state: {{cluster: b, topic: "{"_kmirror." if valid else ""}${{env:KM_SENTINEL}}{"" if valid else "x!"}"}}
            spark:
              deploy: {"local" if valid else "standalone"}
              master: "{"local[1]" if valid else "${env:KM_SENTINEL}"}"
              checkpoint_root: "{"/tmp/" if valid else ""}${{env:KM_SENTINEL}}/checkpoints"
            flows:
              - {{name: f, source: a, target: b, topics: {{include: ["orders"]}}}}
            """)
    )
    inputs = {spec, tmp_path / "key.pem"}
    outputs = [
        _kmirror(tmp_path, {"KM_SENTINEL": secret}, *command)
        for command in _commands(spec.name, reaches_clusters=valid)
    ]
    everything = "\n".join(outputs)
    assert everything.count(secret) == 0
    assert "MIIE" not in everything and "PRIVATE KEY" not in everything
    assert "${file:key.pem}" in everything  # the messages name the reference instead
    if not valid:
        assert "${env:KM_SENTINEL}" in everything
    for path in _written(tmp_path, inputs):
        assert secret.encode() not in path.read_bytes(), f"the secret was written to {path}"
