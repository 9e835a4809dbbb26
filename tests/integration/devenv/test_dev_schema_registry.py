"""`kmirror dev up --schema-registry`: one real Apicurio Registry per local cluster, its Confluent API answering on
the url `dev status --format json` names, stopped by `dev down` (about 40 s; the registry is built once)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _kmirror(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "reconciler.cli", *args], capture_output=True, text=True, check=False, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _call(method: str, url: str, body: object | None = None) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/vnd.schemaregistry.v1+json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_dev_up_starts_one_registry_per_cluster_and_down_stops_them(tmp_path: Path) -> None:
    root = tmp_path / "dev"
    try:
        _kmirror("dev", "up", "--schema-registry", "--root", str(root))
        clusters = json.loads(_kmirror("dev", "status", "--format", "json", "--root", str(root)))["clusters"]
        urls = {name: c["schema_registry"]["url"] for name, c in clusters.items()}
        assert set(urls) == {"source", "target"} and len(set(urls.values())) == 2
        assert all(u.startswith("http://127.0.0.1:") and u.endswith("/apis/ccompat/v7") for u in urls.values())
        text = _kmirror("dev", "status", "--root", str(root))
        assert all(f"schema registry {u}  running" in text for u in urls.values()), text

        # Two registries, not one: a subject registered on the source is unknown to the target.
        schema = {"schema": json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})}
        status, body = _call("POST", urls["source"] + "/subjects/orders-value/versions", schema)
        assert status == 200 and isinstance(body, dict) and isinstance(body["id"], int)
        assert _call("GET", urls["source"] + "/subjects")[1] == ["orders-value"]
        assert _call("GET", urls["target"] + "/subjects")[1] == []
        # The registry kmirror's end-to-end tests run against has no IMPORT mode: the translation path is the one.
        assert _call("PUT", urls["target"] + "/mode", {"mode": "IMPORT"})[0] == 404
    finally:
        out = _kmirror("dev", "down", "--root", str(root))
    assert "stopped the schema registry of source" in out and "stopped the schema registry of target" in out
    after = json.loads(_kmirror("dev", "status", "--format", "json", "--root", str(root)))["clusters"]
    assert not any(c["schema_registry"]["running"] for c in after.values())
