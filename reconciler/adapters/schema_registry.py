"""The one adapter that talks to schema registries: the Confluent REST API (Confluent Schema Registry, Apicurio's
`/apis/ccompat/v7`, Karapace), plain HTTP with the standard library.

`RegistryClient` reads subjects, versions and compatibility levels, registers a version (the target gives it a new
id), or, where the target takes explicit ids (Confluent's IMPORT mode: `PUT /mode/<subject>` answers), registers
it with the source's id and version so records can be copied unchanged. `read_registries` reads what the planner
needs into `LiveState.schemas`: per flow with `sync.schemas`, the source registry's subjects of the flow's topics
and the target registry's subjects they map to. A registry that cannot be read is a warning, and its rows are not
planned (a blind spot is never planned from).

Every request carries a timeout; credentials travel only in headers, built from the spec's references when the
client is made (`spec.schema_registry.connection`). Must not: put a credential in a url, a message or a log, or
be imported by the planner (it gets `LiveState` values).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Required, TypedDict

from reconciler.errors import Diagnostic, KmirrorError
from reconciler.live.model import LiveState
from reconciler.live.schema_subjects import flow_subjects, schema_flows
from reconciler.live.schemas import RegistryState, SchemaReference, SchemaVersion
from reconciler.spec.models import DesiredState
from reconciler.spec.schema_registry import RegistryConnection, connection

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"

#: (method, url, headers, body, timeout) -> (status, body): how a request is sent (a fake one in unit tests).
Transport = Callable[[str, str, Mapping[str, str], bytes | None, float], tuple[int, bytes]]


class RegistryError(KmirrorError):
    """A schema registry refused a request or could not be reached."""


def _urllib_transport(conn: RegistryConnection) -> Transport:
    context: ssl.SSLContext | None = None
    if conn.url.startswith("https://"):
        context = ssl.create_default_context(cafile=conn.ca_file)
        if conn.cert_file:
            context.load_cert_chain(conn.cert_file, conn.key_file)

    def send(
        method: str, url: str, headers: Mapping[str, str], body: bytes | None, timeout: float
    ) -> tuple[int, bytes]:
        request = urllib.request.Request(url, data=body, method=method, headers=dict(headers))
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as e:
            return int(e.code), e.read()
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise RegistryError(f"schema registry {_origin(url)} could not be reached: {reason}") from None

    return send


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}"


class RegistryClient:
    """The Confluent REST API of one registry."""

    def __init__(self, conn: RegistryConnection, *, timeout: float = 10.0, transport: Transport | None = None) -> None:
        self.url = conn.url
        self._headers = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE, **dict(conn.headers)}
        self._timeout = timeout
        self._send = transport or _urllib_transport(conn)

    def __repr__(self) -> str:
        return f"RegistryClient({self.url!r})"

    def _call(self, method: str, path: str, body: object | None = None, ok: Sequence[int] = (200,)) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        status, raw = self._send(method, self.url + path, self._headers, data, self._timeout)
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")[:200]
        if status not in ok:
            message = parsed.get("message") if isinstance(parsed, dict) else parsed
            raise RegistryError(f"{method} {path} on {_origin(self.url)}: HTTP {status}: {message}")
        return status, parsed

    # -- reads --------------------------------------------------------------------------------------------------
    def subjects(self) -> list[str]:
        return [str(s) for s in self._call("GET", "/subjects")[1] or []]

    def versions(self, subject: str) -> tuple[SchemaVersion, ...]:
        """Every version of `subject`, oldest first (empty when the subject does not exist)."""
        status, numbers = self._call("GET", f"/subjects/{_q(subject)}/versions", ok=(200, 404))
        if status == 404:
            return ()
        out = []
        for number in sorted(int(n) for n in numbers):
            status, body = self._call("GET", f"/subjects/{_q(subject)}/versions/{number}", ok=(200, 404))
            if status == 200:  # 404: deleted between the two calls
                out.append(version_of(body))
        return tuple(out)

    def compatibility(self, subject: str) -> str | None:
        """The subject's own compatibility level (None: it follows the registry's default)."""
        status, body = self._call("GET", f"/config/{_q(subject)}?defaultToGlobal=false", ok=(200, 404))
        if status != 200 or not isinstance(body, dict):
            return None
        level = body.get("compatibilityLevel") or body.get("compatibility")
        return str(level) if level else None

    def supports_import(self) -> bool:
        """Whether the registry has modes (Confluent Schema Registry): then it takes explicit ids in IMPORT mode."""
        try:
            status, body = self._call("GET", "/mode", ok=(200, 404, 405, 501))
        except RegistryError:
            return False
        return status == 200 and isinstance(body, dict) and "mode" in body

    # -- writes -------------------------------------------------------------------------------------------------
    def register(self, subject: str, version: SchemaVersion) -> int:
        """Register `version`'s schema under `subject`; the target's id (an existing one when it holds the schema)."""
        _, body = self._call("POST", f"/subjects/{_q(subject)}/versions", _register_body(version))
        return int(body["id"])

    def import_version(self, subject: str, version: SchemaVersion) -> int:
        """Register `version` with its own id and version number (IMPORT mode on the subject for the call)."""
        self._call("PUT", f"/mode/{_q(subject)}", {"mode": "IMPORT"})
        try:
            body: RegisterBody = {**_register_body(version), "id": version.id, "version": version.version}
            _, answer = self._call("POST", f"/subjects/{_q(subject)}/versions", body)
        finally:
            self._call("PUT", f"/mode/{_q(subject)}", {"mode": "READWRITE"})
        return int(answer["id"])

    def set_compatibility(self, subject: str, level: str) -> None:
        self._call("PUT", f"/config/{_q(subject)}", {"compatibility": level})

    def delete_subject(self, subject: str) -> None:
        """Delete the subject (soft, then permanent: a later sync may register it afresh)."""
        self._call("DELETE", f"/subjects/{_q(subject)}", ok=(200, 404))
        self._call("DELETE", f"/subjects/{_q(subject)}?permanent=true", ok=(200, 404))


def _q(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


class ReferenceDoc(TypedDict):
    name: str
    subject: str
    version: int


class RegisterBody(TypedDict, total=False):
    """The Confluent API's body of `POST /subjects/<subject>/versions` (with `id` and `version` in IMPORT mode)."""

    schema: Required[str]
    schemaType: str
    references: list[ReferenceDoc]
    id: int
    version: int


def _register_body(version: SchemaVersion) -> RegisterBody:
    body: RegisterBody = {"schema": version.schema}
    if version.schema_type != "AVRO":
        body["schemaType"] = version.schema_type
    if version.references:
        body["references"] = [{"name": r.name, "subject": r.subject, "version": r.version} for r in version.references]
    return body


def version_of(body: Mapping[str, Any]) -> SchemaVersion:
    return SchemaVersion(
        version=int(body["version"]),
        id=int(body["id"]),
        schema=str(body["schema"]),
        schema_type=str(body.get("schemaType") or "AVRO"),
        references=tuple(
            SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in body.get("references") or ()
        ),
    )


def _unread(cluster: str, e: RegistryError) -> Diagnostic:
    return Diagnostic.warning(None, f"the schema registry of cluster '{cluster}' could not be read: {e}")


def registry_clients(desired: DesiredState, timeout: float = 10.0) -> dict[str, RegistryClient]:
    """A client per cluster a flow with sync.schemas names (secret references resolved now, into headers): a
    registry that no flow syncs with is never contacted, and its references are never resolved."""
    used = {alias for flow in schema_flows(desired) for alias in (flow.source, flow.target)}
    return {
        name: RegistryClient(connection(cluster.schema_registry, desired.base_dir), timeout=timeout)
        for name, cluster in desired.clusters.items()
        if cluster.schema_registry is not None and name in used
    }


def read_registries(
    desired: DesiredState, live: LiveState, clients: Mapping[str, RegistryClient] | None = None
) -> LiveState:
    """`live` with `schemas` read: for each flow with sync.schemas, its topics' subjects on both registries."""
    flows = schema_flows(desired)
    if not flows:
        return live
    clients = clients if clients is not None else registry_clients(desired)
    wanted: dict[str, set[str]] = {}
    listed: dict[str, list[str]] = {}
    warnings: list[Diagnostic] = []
    unreadable: set[str] = set()

    def subjects_of(cluster: str) -> list[str] | None:
        if cluster in unreadable:
            return None
        if cluster not in listed:
            try:
                listed[cluster] = clients[cluster].subjects()
            except RegistryError as e:
                unreadable.add(cluster)
                warnings.append(
                    Diagnostic.warning(None, f"the schema registry of cluster '{cluster}' could not be read: {e}")
                )
                return None
        return listed[cluster]

    for flow in flows:
        if flow.source not in live.clusters or flow.target not in live.clusters:
            continue
        source_subjects = subjects_of(flow.source)
        target_subjects = subjects_of(flow.target)
        if source_subjects is None or target_subjects is None:
            continue
        mapping = flow_subjects(flow, flow.remote_topics(live.clusters[flow.source].topics), source_subjects)
        wanted.setdefault(flow.source, set()).update(mapping)
        present = set(target_subjects)
        wanted.setdefault(flow.target, set()).update(t for t in mapping.values() if t in present)
    states: dict[str, RegistryState] = {}
    for cluster, subjects in wanted.items():
        client = clients[cluster]
        try:
            versions = {s: client.versions(s) for s in sorted(subjects)}
            levels = {s: level for s in sorted(subjects) if (level := client.compatibility(s)) is not None}
            states[cluster] = RegistryState(versions, levels, client.supports_import())
        except RegistryError as e:
            warnings.append(
                Diagnostic.warning(None, f"the schema registry of cluster '{cluster}' could not be read: {e}")
            )
    return replace(live, schemas={**live.schemas, **states}, warnings=(*live.warnings, *warnings))
