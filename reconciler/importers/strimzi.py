"""Translate Strimzi `KafkaMirrorMaker2` resources into the pieces `mm2_config` turns into a desired state.

Both layouts of the resource are read: `kafka.strimzi.io/v1beta2` (`spec.clusters`, `spec.connectCluster`,
`mirrors[].sourceCluster/targetCluster`) and `v1` (`spec.target` or `spec.targetCluster`, `spec.sourceClusters`,
`mirrors[].sourceCluster` or `mirrors[].source`). What maps is translated: bootstrap servers, TLS and SASL
authentication (secrets become `${env:..}` references naming the Kubernetes secret they lived in), the
connectors' `config`, `topicsPattern`/`groupsPattern` and their exclude patterns. What does not map
(replicas, resources, templates, metrics, `tasksMax`, a connector's `state`, ...) is named in a note each.
Errors name the input file and the line.

Must not: read files, talk to Kubernetes, or copy a secret's value (it never has one: Strimzi references secrets).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

KIND = "KafkaMirrorMaker2"
API_GROUP = "kafka.strimzi.io/"

# spec fields that configure the Kubernetes deployment of MM2 (Connect workers), with no kmirror equivalent.
_DEPLOYMENT_FIELDS = (
    "version", "replicas", "image", "resources", "livenessProbe", "readinessProbe", "jvmOptions", "jmxOptions",
    "logging", "metricsConfig", "tracing", "template", "externalConfiguration", "rack", "clientRackInitImage",
    "connectCluster", "plugins", "build",
)  # fmt: skip
_CONNECTORS = {
    "sourceConnector": "MirrorSourceConnector",
    "checkpointConnector": "MirrorCheckpointConnector",
    "heartbeatConnector": "MirrorHeartbeatConnector",
}
_SASL = {"scram-sha-512": "SCRAM-SHA-512", "scram-sha-256": "SCRAM-SHA-256", "plain": "PLAIN"}


class StrimziError(ValueError):
    """The resource cannot be translated; the message starts with `file:line:`."""


@dataclass
class StrimziMirror:
    """One mirror of a resource: its two aliases, its connectors' merged config (source connector wins), which
    connectors it has, and where it is (for notes)."""

    source: str
    target: str
    settings: dict[str, str]
    connectors: frozenset[str]
    origin: str


@dataclass
class StrimziResource:
    clusters: dict[str, dict[str, str]]  # alias -> MM2 cluster properties (bootstrap.servers, security, config)
    mirrors: list[StrimziMirror]
    notes: list[str]
    env_vars: list[str]


def is_kubernetes_resource(text: str) -> bool:
    """Does `text` look like a Kubernetes manifest (a YAML mapping with apiVersion and kind)?"""
    try:
        docs = [d for d in YAML(typ="safe").load_all(text) if d is not None]
    except (YAMLError, ValueError):
        return False
    return bool(docs) and all(isinstance(d, dict) and "kind" in d and "apiVersion" in d for d in docs)


def parse_resources(text: str, origin: str) -> list[StrimziResource]:
    """Every `KafkaMirrorMaker2` in a (multi-document) manifest; other kinds are refused, naming them."""
    try:
        docs = [d for d in YAML(typ="rt").load_all(io.StringIO(text)) if d is not None]
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        raise StrimziError(f"{origin}:{line}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    resources = []
    for doc in docs:
        kind, api = doc.get("kind"), str(doc.get("apiVersion", ""))
        if kind != KIND or not api.startswith(API_GROUP):
            hint = (
                " (MirrorMaker 1 is not supported; kmirror imports MirrorMaker 2)" if kind == "KafkaMirrorMaker" else ""
            )
            raise StrimziError(
                f"{origin}:{_line(doc)}: kind {kind!r} (apiVersion {api!r}) is not a Strimzi {KIND} resource{hint}"
            )
        resources.append(_resource(doc, origin))
    return resources


def _resource(doc: CommentedMap, origin: str) -> StrimziResource:
    name = (doc.get("metadata") or {}).get("name", "?")
    where = f"{origin} ({KIND} {name})"
    spec = doc.get("spec")
    if not isinstance(spec, CommentedMap):
        raise StrimziError(f"{origin}:{_line(doc)}: {KIND} {name} has no spec")
    notes: list[str] = []
    for key in spec:
        if key in _DEPLOYMENT_FIELDS:
            notes.append(f"{where}: spec.{key}: configures the Kubernetes deployment of MM2; kmirror has no equivalent")
    clusters: dict[str, dict[str, str]] = {}
    cluster_lines: dict[str, int] = {}
    listed: list[tuple[str, Any]] = [("spec.clusters", c) for c in _seq(spec.get("clusters"))]
    listed += [("spec.sourceClusters", c) for c in _seq(spec.get("sourceClusters"))]
    default_target = None
    for key in ("target", "targetCluster"):
        if isinstance(spec.get(key), CommentedMap):
            target = spec[key]
            default_target = str(target.get("alias") or "target")
            listed.append((f"spec.{key}", target if "alias" in target else {**target, "alias": default_target}))
            for field in ("groupId", "configStorageTopic", "statusStorageTopic", "offsetStorageTopic"):
                if field in target:
                    notes.append(f"{where}: spec.{key}.{field}: a Kafka Connect setting; kmirror runs no Connect")
    for path, cluster in listed:
        if not isinstance(cluster, dict) or not cluster.get("alias"):
            raise StrimziError(f"{origin}:{_line(cluster, spec)}: {path}: every cluster needs an alias")
        alias = str(cluster["alias"])
        clusters[alias] = _cluster_properties(alias, cluster, where, notes)
        cluster_lines[alias] = _line(cluster, spec)
    if not clusters:
        raise StrimziError(f"{origin}:{_line(spec)}: {KIND} {name} declares no cluster (spec.clusters is empty)")
    mirrors = []
    for index, mirror in enumerate(_seq(spec.get("mirrors"))):
        mirrors.append(_mirror(mirror, index, default_target, clusters, origin, where, notes))
    if not mirrors:
        raise StrimziError(f"{origin}:{_line(spec)}: {KIND} {name} has no mirrors, so there is no flow to import")
    env_vars = [m for props in clusters.values() for v in props.values() for m in re.findall(r"\$\{env:(\w+)\}", v)]
    return StrimziResource(clusters, mirrors, notes, env_vars)


def _cluster_properties(alias: str, cluster: Any, where: str, notes: list[str]) -> dict[str, str]:
    props: dict[str, str] = {"bootstrap.servers": str(cluster.get("bootstrapServers", ""))}
    tls = cluster.get("tls")
    auth = cluster.get("authentication") or {}
    if tls is not None:
        certs = [f"{c.get('secretName')}/{c.get('certificate') or c.get('pattern')}" for c in _seq(
            tls.get("trustedCertificates"))]  # fmt: skip
        props["ssl.ca.location"] = "${env:" + _env(alias, "ssl.ca.location") + "}"
        notes.append(
            f"{where}: clusters.{alias}: TLS trusted certificates from Kubernetes secret "
            f"{', '.join(certs) or '(none listed)'}: mount the CA file and set {_env(alias, 'ssl.ca.location')} "
            "to its path"
        )
    kind = str(auth.get("type", "")) if isinstance(auth, dict) else ""
    if kind in _SASL:
        props["security.protocol"] = "SASL_SSL" if tls is not None else "SASL_PLAINTEXT"
        props["sasl.mechanism"] = _SASL[kind]
        props["sasl.username"] = str(auth.get("username", ""))
        secret = auth.get("passwordSecret") or {}
        props["sasl.password"] = "from Kubernetes secret"  # never a value: becomes a ${env:..} reference
        notes.append(
            f"{where}: clusters.{alias}: the {kind} password is in Kubernetes secret "
            f"{secret.get('secretName')}/{secret.get('password')}"
        )
    elif kind == "tls":
        props["security.protocol"] = "SSL"
        cert = auth.get("certificateAndKey") or {}
        props["ssl.certificate.location"] = "${env:" + _env(alias, "ssl.certificate.location") + "}"
        props["ssl.key.location"] = "${env:" + _env(alias, "ssl.key.location") + "}"
        notes.append(
            f"{where}: clusters.{alias}: mTLS client certificate in Kubernetes secret {cert.get('secretName')} "
            f"({cert.get('certificate')}, {cert.get('key')}): mount them and set "
            f"{_env(alias, 'ssl.certificate.location')} and {_env(alias, 'ssl.key.location')}"
        )
    elif kind:
        notes.append(
            f"{where}: clusters.{alias}: authentication type {kind!r} is not translated; set the client "
            "properties (sasl.*, e.g. for OAUTHBEARER) by hand"
        )
    elif tls is not None:
        props["security.protocol"] = "SSL"
    for key, value in (cluster.get("config") or {}).items():
        props[str(key)] = _text(value)
    return props


def _mirror(
    mirror: Any, index: int, default_target: str | None, clusters: dict[str, dict[str, str]], origin: str, where: str,
    notes: list[str],
) -> StrimziMirror:  # fmt: skip
    path = f"spec.mirrors[{index}]"
    line = _line(mirror)
    source_ref = mirror.get("sourceCluster") if isinstance(mirror, dict) else None
    source_field = "sourceCluster"
    if isinstance(mirror, dict) and isinstance(mirror.get("source"), dict):
        source_ref, source_field = mirror["source"].get("alias"), "source.alias"
    source = str(source_ref) if source_ref else None
    target_ref = mirror.get("targetCluster", default_target) if isinstance(mirror, dict) else None
    target = str(target_ref) if target_ref else None
    for role, alias in ((source_field, source), ("targetCluster", target)):
        if alias is None:
            raise StrimziError(f"{origin}:{line}: {path}.{role}: missing")
        if alias not in clusters:
            raise StrimziError(
                f"{origin}:{line}: {path}.{role}: {alias!r} is not a declared cluster "
                f"(declared: {', '.join(sorted(clusters))})"
            )
    assert source is not None and target is not None
    settings: dict[str, str] = {}
    connectors = []
    for key in ("heartbeatConnector", "checkpointConnector", "sourceConnector"):  # the source connector wins
        connector = mirror.get(key)
        if connector is None:
            continue
        connectors.append(_CONNECTORS[key])
        for field in connector:
            if field == "tasksMax":
                notes.append(f"{where}: {path}.{key}.tasksMax: the Spark job's parallelism follows the partitions")
            elif field in ("state", "pause"):
                notes.append(f"{where}: {path}.{key}.{field}: a flow is paused with `enabled: false`")
            elif field == "autoRestart":
                notes.append(f"{where}: {path}.{key}.autoRestart: `kmirror apply` restarts a dead job")
            elif field != "config":
                notes.append(f"{where}: {path}.{key}.{field}: not translated")
        settings.update({str(k): _text(v) for k, v in (connector.get("config") or {}).items()})
    for field, prop in (
        ("topicsPattern", "topics"), ("topicsExcludePattern", "topics.exclude"),
        ("topicsBlacklistPattern", "topics.exclude"), ("groupsPattern", "groups"),
        ("groupsExcludePattern", "groups.exclude"), ("groupsBlacklistPattern", "groups.exclude"),
    ):  # fmt: skip
        if field in mirror:
            settings[prop] = _text(mirror[field])
    return StrimziMirror(source, target, settings, frozenset(connectors), f"{origin}:{line}")


def _seq(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | CommentedSeq) else []


def _line(node: Any, parent: Any = None) -> int:
    for candidate in (node, parent):
        lc = getattr(candidate, "lc", None)
        if lc is not None and lc.line is not None:
            return int(lc.line) + 1
    return 1


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _env(alias: str, key: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", f"{alias}_{key}".upper()).strip("_")
