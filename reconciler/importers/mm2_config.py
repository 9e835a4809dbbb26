"""Translate MirrorMaker 2 configurations into a kmirror desired state.

Three inputs are understood, told apart by their content (`input_format`): a dedicated-mode
`connect-mirror-maker.properties` file (clusters, `A->B.enabled`, `A.bootstrap.servers`, `A->B.*` overrides of
top-level settings), Kafka Connect connector configs in JSON (MirrorSourceConnector, MirrorCheckpointConnector,
MirrorHeartbeatConnector; flat or wrapped as `{"name": .., "config": {..}}`), and Strimzi `KafkaMirrorMaker2`
resources (read by `strimzi.py`). Anything else is refused naming the file. The result keeps MM2's behaviour:
its defaults are written out where kmirror's differ (MM2 creates remote topics with replication factor 2), and
every property that has no kmirror equivalent is listed with the reason, in the YAML as comments and in
`ImportResult.notes`.

Secrets are never copied: a password, secret or JAAS line becomes `${env:<ALIAS>_<PROPERTY>}` and the note
says which variable to set. A JAAS line for PLAIN or SCRAM keeps its username and references the password.

Pure: works on texts and returns text; the CLI reads and writes the files.
Must not: read or write files, or copy a secret's value into the result.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ruamel.yaml import YAML

from reconciler.importers.documents import (
    ClusterDoc,
    DesiredStateDoc,
    FlowDoc,
    HeartbeatsDoc,
    NamingDoc,
    OffsetsDoc,
    ReplicationDoc,
    SelectorDoc,
    SyncDoc,
)
from reconciler.importers.strimzi import StrimziError, is_kubernetes_resource, parse_resources
from reconciler.spec.defaults import MM2_REPLICATION_FACTOR
from reconciler.spec.models import ALIAS_PATTERN
from reconciler.spec.secrets import is_sensitive_key

_MIRROR = "org.apache.kafka.connect.mirror."
SOURCE_CONNECTOR = "MirrorSourceConnector"
CHECKPOINT_CONNECTOR = "MirrorCheckpointConnector"
HEARTBEAT_CONNECTOR = "MirrorHeartbeatConnector"

# Client properties that belong to a cluster's connection (copied into clusters.<alias>.client).
_CLIENT_PREFIXES = ("security.", "sasl.", "ssl.", "client.dns.lookup", "socket.", "request.timeout.ms", "client.id")

# Properties kmirror does not need, with the reason shown to the user.
_NOT_NEEDED: list[tuple[str, str]] = [
    (r"(name|connector\.class|clusters|source\.cluster\.alias|target\.cluster\.alias)", ""),
    (r"(key|value|header)\.converter(\..*)?", "kmirror copies bytes as they are (MM2's ByteArrayConverter)"),
    (r"tasks\.max", "the Spark job's parallelism follows the source partitions and spark.master"),
    (
        r"refresh\.(topics|groups)\.(enabled|interval\.seconds)",
        "kmirror picks up new topics and partitions within seconds",
    ),
    (r"sync\.topic\.(configs|acls)\.interval\.seconds", "configs and ACLs are synced by each `kmirror apply`"),
    (
        r"(offset-syncs|heartbeats|checkpoints|heartbeat|checkpoint|offset-sync)\.topic\.replication\.factor",
        "kmirror creates its internal topics with the broker's default replication factor",
    ),
    (r"(config|offset|status)\.storage\..*", "kmirror runs no Kafka Connect worker, so has no Connect storage topics"),
    (r"consumer\.group\.id|group\.id", "the Spark job tracks its own source positions in its checkpoint"),
    (r"emit\.checkpoints\.enabled|sync\.group\.offsets\.interval\.seconds", ""),
]


@dataclass
class ImportResult:
    """The desired state as YAML text, the plain data behind it, and what could not be carried over."""

    yaml_text: str
    data: DesiredStateDoc
    notes: list[str] = field(default_factory=list)
    env_vars: list[str] = field(default_factory=list)


class MM2ImportError(ValueError):
    """An input could not be read as an MM2 configuration at all."""


# -- reading the inputs -------------------------------------------------------------------------------------


def parse_properties(text: str) -> tuple[dict[str, str], list[str]]:
    """Java `.properties` text to a dict (later keys win), plus notes about lines read generously.

    `A -> B.enabled = true` (spaces around the arrow, as some guides print it) is read as `A->B.enabled`, with a
    note: Java itself would end the key at the first space and MM2 would not see that setting.
    """
    props: dict[str, str] = {}
    notes: list[str] = []
    logical: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if not pending:
            start = number
        if _continues(line):
            pending += line[:-1]
            continue
        logical.append((start, pending + line))
        pending = ""
    if pending:
        logical.append((start, pending))
    arrow = re.compile(
        r"^([A-Za-z0-9_.-]+)\s+->\s*([A-Za-z0-9_.-]+)\s*[=:]\s*(.*)$|^([A-Za-z0-9_.-]+)\s*->\s+([A-Za-z0-9_.-]+)\s*[=:]\s*(.*)$"
    )
    for number, line in logical:
        spaced = arrow.match(line)
        if spaced:
            source, rest, value = spaced.group(1, 2, 3) if spaced.group(1) else spaced.group(4, 5, 6)
            key = f"{source}->{rest}"
            notes.append(
                f"line {number}: read '{line.strip()}' as '{key} = {value.strip()}'; MM2 (Java properties) "
                f"would read the key as '{source}' and ignore it, so check that this flow really ran"
            )
            props[key] = _unescape(value.strip())
            continue
        key, value = _split_property(line)
        props[_unescape(key)] = _unescape(value)
    return props, notes


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\":
            i += 2
            continue
        if char in "=: \t\f":
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest.rstrip()


def _unescape(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        char = match.group(1)
        if char.startswith("u"):
            return chr(int(char[1:], 16))
        return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(char, char)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", replace, text)


def parse_connector_json(text: str, origin: str) -> dict[str, str]:
    """One connector config: flat, or `{"name": .., "config": {..}}` as Connect's REST API takes it."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MM2ImportError(f"{origin}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise MM2ImportError(f"{origin}:1: expected a JSON object with the connector config")
    if isinstance(data.get("config"), dict):
        config = dict(data["config"])
        config.setdefault("name", data.get("name", ""))
    else:
        config = data
    return {str(k): str(v).strip() if not isinstance(v, str) else v.strip() for k, v in config.items()}


def looks_like_json(text: str) -> bool:
    return text.lstrip().startswith("{")


# -- translation --------------------------------------------------------------------------------------------


@dataclass
class _Flow:
    source: str
    target: str
    settings: dict[str, str]
    has_source_connector: bool = True
    has_checkpoint_connector: bool = True
    has_heartbeat_connector: bool = True
    origin: str = ""


@dataclass
class _Translation:
    clusters: dict[str, ClusterDoc] = field(default_factory=dict)
    flows: list[FlowDoc] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    env_vars: list[str] = field(default_factory=list)


def import_properties(text: str, origin: str = "connect-mirror-maker.properties") -> ImportResult:
    """Translate a dedicated-mode MM2 properties file."""
    props, notes = parse_properties(text)
    out = _Translation(notes=[f"{origin}: {n}" for n in notes])
    aliases = _aliases(props, out, origin)
    for alias in aliases:
        out.clusters[alias] = _cluster(alias, _cluster_props(props, alias), out, origin)
    flows: list[_Flow] = []
    for source in aliases:
        for target in aliases:
            if source == target:
                continue
            prefix = f"{source}->{target}."
            overrides = {k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix)}
            if overrides.get("enabled", "false").strip().lower() != "true":
                continue
            settings = {
                k: v
                for k, v in props.items()
                if "->" not in k and not _is_cluster_key(k, aliases) and not k.startswith(_CLIENT_PREFIXES)
            }
            settings.update(overrides)
            settings.pop("enabled", None)
            # Cluster-level producer/consumer properties apply to this flow's clients.
            for key, value in _cluster_props(props, target).items():
                if key.startswith("producer."):
                    settings.setdefault(key, value)
            for key, value in _cluster_props(props, source).items():
                if key.startswith("consumer."):
                    settings.setdefault(key, value)
            flows.append(_Flow(source, target, settings, origin=origin))
    if not flows:
        out.notes.append(f"{origin}: no 'A->B.enabled = true' line, so there is no flow to import")
    for flow in flows:
        out.flows.append(_flow(flow, out))
    return _result(out, [origin])


def import_connectors(texts: Mapping[str, str]) -> ImportResult:
    """Translate Kafka Connect connector configs (any mix of the three MM2 connectors, one or more flows)."""
    out = _Translation()
    by_pair: dict[tuple[str, str], dict[str, tuple[str, dict[str, str]]]] = {}
    for origin, text in texts.items():
        config = parse_connector_json(text, origin)
        kind = config.get("connector.class", "").removeprefix(_MIRROR)
        if kind not in (SOURCE_CONNECTOR, CHECKPOINT_CONNECTOR, HEARTBEAT_CONNECTOR):
            raise MM2ImportError(
                f"{origin}: connector.class {config.get('connector.class')!r} is not an MM2 connector (expected "
                f"{SOURCE_CONNECTOR}, {CHECKPOINT_CONNECTOR} or {HEARTBEAT_CONNECTOR})"
            )
        source = config.get("source.cluster.alias", "source")
        target = config.get("target.cluster.alias", "target")
        by_pair.setdefault((source, target), {})[kind] = (origin, config)
    for (source, target), connectors in by_pair.items():
        for alias, side in ((source, "source"), (target, "target")):
            props: dict[str, str] = {}
            for _, config in connectors.values():
                prefix = f"{side}.cluster."
                props.update(
                    {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix) and k != prefix + "alias"}
                )
            origins = ", ".join(o for o, _ in connectors.values())
            cluster = _cluster(alias, props, out, origins)
            if alias in out.clusters and out.clusters[alias] != cluster:
                out.notes.append(f"cluster '{alias}' is configured differently in two connectors; kept the first")
            out.clusters.setdefault(alias, cluster)
        settings: dict[str, str] = {}
        for kind in (HEARTBEAT_CONNECTOR, CHECKPOINT_CONNECTOR, SOURCE_CONNECTOR):  # the source connector wins
            if kind in connectors:
                _, config = connectors[kind]
                settings.update(
                    {k: v for k, v in config.items() if not k.startswith(("source.cluster.", "target.cluster."))}
                )
        flow = _Flow(
            source,
            target,
            settings,
            has_source_connector=SOURCE_CONNECTOR in connectors,
            has_checkpoint_connector=CHECKPOINT_CONNECTOR in connectors,
            has_heartbeat_connector=HEARTBEAT_CONNECTOR in connectors,
            origin=", ".join(o for o, _ in connectors.values()),
        )
        out.flows.append(_flow(flow, out))
    return _result(out, list(texts))


def import_strimzi(texts: Mapping[str, str]) -> ImportResult:
    """Translate Strimzi `KafkaMirrorMaker2` resources (one or more, in one or more manifests)."""
    out = _Translation()
    for origin, text in texts.items():
        try:
            resources = parse_resources(text, origin)
        except StrimziError as exc:
            raise MM2ImportError(str(exc)) from None
        for resource in resources:
            out.notes.extend(resource.notes)
            out.env_vars.extend(resource.env_vars)
            for alias, props in resource.clusters.items():
                cluster = _cluster(alias, props, out, origin)
                if alias in out.clusters and out.clusters[alias] != cluster:
                    out.notes.append(f"cluster '{alias}' is declared differently in two resources; kept the first")
                out.clusters.setdefault(alias, cluster)
            for mirror in resource.mirrors:
                flow = _Flow(
                    mirror.source,
                    mirror.target,
                    mirror.settings,
                    has_source_connector=SOURCE_CONNECTOR in mirror.connectors,
                    has_checkpoint_connector=CHECKPOINT_CONNECTOR in mirror.connectors,
                    has_heartbeat_connector=HEARTBEAT_CONNECTOR in mirror.connectors,
                    origin=mirror.origin,
                )
                out.flows.append(_flow(flow, out))
    return _result(out, list(texts))


FORMATS = {
    "properties": "MM2 properties (connect-mirror-maker.properties)",
    "connector": "Kafka Connect connector JSON",
    "strimzi": "a Strimzi KafkaMirrorMaker2 resource",
}


def input_format(name: str, text: str) -> str:
    """ "properties", "connector" or "strimzi"; `MM2ImportError` naming the file when it is none of them."""
    if looks_like_json(text):
        return "connector"
    if is_kubernetes_resource(text):
        return "strimzi"
    unknown = f"{name}: unknown input format: it is not " + ", not ".join(FORMATS.values()).replace(
        ", not a", ", nor a"
    )
    if _is_structured_yaml(text):
        raise MM2ImportError(f"{unknown} (a YAML document without apiVersion and kind; is it a kmirror.yaml already?)")
    props, _ = parse_properties(text)
    if not any(k == "clusters" or "->" in k or k.endswith(".bootstrap.servers") for k in props):
        raise MM2ImportError(f"{unknown} (no 'clusters = ...', 'A->B.enabled' or 'A.bootstrap.servers' line)")
    return "properties"


def _is_structured_yaml(text: str) -> bool:
    try:
        data = YAML(typ="safe").load(text)
    except Exception:  # any YAML error: not YAML, so perhaps properties
        return False
    return isinstance(data, dict) and any(isinstance(v, dict | list) for v in data.values())


def import_files(texts: Mapping[str, str]) -> ImportResult:
    """Properties, connector JSON or Strimzi resource files, told apart by their content (one format at a time)."""
    if not texts:
        raise MM2ImportError("no input file given")
    kinds = {name: input_format(name, text) for name, text in texts.items()}
    if len(set(kinds.values())) > 1:
        raise MM2ImportError(
            "give files of one format at a time, got: "
            + "; ".join(f"{name} ({FORMATS[kind]})" for name, kind in kinds.items())
        )
    kind = next(iter(kinds.values()))
    if kind == "strimzi":
        return import_strimzi(texts)
    if kind == "connector":
        return import_connectors(texts)
    if len(texts) > 1:
        raise MM2ImportError("give one connect-mirror-maker properties file at a time")
    ((name, text),) = texts.items()
    return import_properties(text, name)


# -- pieces -------------------------------------------------------------------------------------------------


def _aliases(props: Mapping[str, str], out: _Translation, origin: str) -> list[str]:
    listed = [a.strip() for a in props.get("clusters", "").split(",") if a.strip()]
    valid = [a for a in listed if re.fullmatch(ALIAS_PATTERN, a)]
    if valid and len(valid) == len(listed):
        return valid
    inferred = sorted(
        {k.split(".", 1)[0] for k in props if k.endswith(".bootstrap.servers") and "->" not in k}
        | {k.split("->", 1)[0] for k in props if "->" in k}
        | {k.split("->", 1)[1].split(".", 1)[0] for k in props if "->" in k}
    )
    inferred = [a for a in inferred if re.fullmatch(ALIAS_PATTERN, a)]
    out.notes.append(
        f"{origin}: 'clusters = {props.get('clusters', '')}' does not list valid aliases; "
        f"used the aliases the other properties name: {', '.join(inferred) or '(none)'}"
    )
    return inferred


def _is_cluster_key(key: str, aliases: list[str]) -> bool:
    return any(key.startswith(alias + ".") for alias in aliases)


def _cluster_props(props: Mapping[str, str], alias: str) -> dict[str, str]:
    prefix = alias + "."
    merged = {k: v for k, v in props.items() if k.startswith(_CLIENT_PREFIXES) and "->" not in k}
    merged.update({k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix) and "->" not in k})
    return merged


def _env_name(alias: str, key: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", f"{alias}_{key}".upper()).strip("_")


def _cluster(alias: str, props: Mapping[str, str], out: _Translation, origin: str) -> ClusterDoc:
    servers = props.get("bootstrap.servers", "")
    if ";" in servers:
        out.notes.append(f"clusters.{alias}.bootstrap_servers: ';' between brokers replaced by ','")
        servers = ",".join(s.strip() for s in servers.split(";") if s.strip())
    if not servers:
        out.notes.append(f"cluster '{alias}' has no bootstrap.servers in {origin}; fill in bootstrap_servers")
        servers = "CHANGE-ME:9092"
    client: dict[str, str] = {}
    for key, value in sorted(props.items()):
        if key == "bootstrap.servers" or not key.startswith(_CLIENT_PREFIXES):
            if key != "bootstrap.servers" and not key.startswith(("producer.", "consumer.", "admin.")):
                _note_unused(f"{alias}.{key}", out)
            elif key.startswith("admin."):
                out.notes.append(f"{alias}.{key}: admin-client overrides are not carried over")
            continue
        if key == "sasl.jaas.config":
            client.update(_jaas(alias, value, out))
        elif is_sensitive_key(key):
            variable = _env_name(alias, key)
            client[key] = "${env:" + variable + "}"
            out.env_vars.append(variable)
            out.notes.append(f"clusters.{alias}.client.{key}: secret not copied; set {variable}")
        else:
            client[key] = value
    _pem_for_librdkafka(alias, client, out)
    cluster: ClusterDoc = {"bootstrap_servers": servers}
    if client:
        cluster["client"] = client
    return cluster


def _pem_for_librdkafka(alias: str, client: dict[str, str], out: _Translation) -> None:
    """MM2 configs name Java keystores, which librdkafka (kmirror's CLI) cannot read: point librdkafka at PEM or
    PKCS12 files made from them (the note says how), and keep the Java keys for the Spark job."""
    truststore = client.get("ssl.truststore.location")
    if (
        truststore
        and str(client.get("ssl.truststore.type", "JKS")).upper() != "PEM"
        and "ssl.ca.location" not in client
    ):
        ca = str(Path(str(truststore)).with_suffix("")) + "-ca.pem"
        client["ssl.ca.location"] = ca
        out.notes.append(
            f"clusters.{alias}.client.ssl.ca.location: kmirror's CLI cannot read the truststore {truststore}; create "
            f"{ca} from it: keytool -exportcert -rfc -alias CA_ALIAS -keystore {truststore} -file {ca}"
        )
    keystore = client.get("ssl.keystore.location")
    if keystore and str(client.get("ssl.keystore.type", "JKS")).upper() in ("JKS", "JCEKS"):
        p12 = str(Path(str(keystore)).with_suffix(".p12"))
        client["ssl.keystore.location"] = p12
        client["ssl.keystore.type"] = "PKCS12"
        out.notes.append(
            f"clusters.{alias}.client.ssl.keystore.location: kmirror's CLI cannot read the JKS keystore {keystore}; "
            f"convert it: keytool -importkeystore -srckeystore {keystore} -destkeystore {p12} -deststoretype PKCS12"
        )


_JAAS_MODULE = re.compile(r"^\s*(\S+)\s+required\b(.*?);?\s*$", re.S)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _jaas(alias: str, value: str, out: _Translation) -> dict[str, str]:
    match = _JAAS_MODULE.match(value)
    options = dict(_JAAS_OPTION.findall(match.group(2))) if match else {}
    module = match.group(1) if match else ""
    if module.endswith(("PlainLoginModule", "ScramLoginModule")) and "username" in options:
        variable = _env_name(alias, "sasl.password")
        out.env_vars.append(variable)
        out.notes.append(
            f"clusters.{alias}.client: sasl.jaas.config split into sasl.username and sasl.password; "
            f"password not copied, set {variable}"
        )
        return {"sasl.username": options["username"], "sasl.password": "${env:" + variable + "}"}
    variable = _env_name(alias, "sasl.jaas.config")
    out.env_vars.append(variable)
    out.notes.append(f"clusters.{alias}.client.sasl.jaas.config: not copied (it may hold secrets); set {variable}")
    return {"sasl.jaas.config": "${env:" + variable + "}"}


def _note_unused(key: str, out: _Translation) -> None:
    bare = key.split(".", 1)[1] if "." in key else key
    for pattern, reason in _NOT_NEEDED:
        if re.fullmatch(pattern, bare) or re.fullmatch(pattern, key):
            if reason:
                out.notes.append(f"{key}: {reason}")
            return
    out.notes.append(f"{key}: the importer does not know this property; check whether you need it")


def _bool(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    return value.strip().lower() == "true"


def _list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _seconds(value: str, key: str, out: _Translation) -> str | None:
    try:
        seconds = float(value)
    except ValueError:
        out.notes.append(f"{key} = {value}: not a number of seconds; kmirror's default used")
        return None
    if seconds <= 0:
        out.notes.append(f"{key} = {value}: disabled in MM2; see the flow's comments")
        return None
    return f"{int(seconds)}s" if seconds == int(seconds) else f"{int(seconds * 1000)}ms"


def _flow(flow: _Flow, out: _Translation) -> FlowDoc:
    s = dict(flow.settings)
    used: set[str] = set()

    def take(*keys: str) -> str | None:
        for key in keys:
            if key in s:
                used.add(key)
                return s[key]
        return None

    name = f"{flow.source}-to-{flow.target}"
    spec: FlowDoc = {"name": name, "source": flow.source, "target": flow.target}
    if not flow.has_source_connector:
        spec["enabled"] = False
        out.notes.append(f"flow {name}: no MirrorSourceConnector given, so the flow is imported disabled")

    topics: SelectorDoc = {}
    if (value := take("topics", "topics.whitelist")) is not None:
        topics["include"] = _list(value)
    if (value := take("topics.exclude", "topics.blacklist")) is not None:
        topics["exclude"] = _list(value)
    if topics:
        spec["topics"] = topics
    groups: SelectorDoc = {}
    if (value := take("groups", "groups.whitelist")) is not None:
        groups["include"] = _list(value)
    if (value := take("groups.exclude", "groups.blacklist")) is not None:
        groups["exclude"] = _list(value)
    if groups:
        spec["groups"] = groups

    spec["naming"] = _naming(take("replication.policy.class"), take("replication.policy.separator"), name, out)
    if take("replication.policy.internal.topic.separator.enabled") == "false":
        out.notes.append(
            f"flow {name}: replication.policy.internal.topic.separator.enabled=false is not supported; "
            "internal topics use the separator"
        )

    replication_factor = take("replication.factor")
    try:
        rf = int(replication_factor) if replication_factor is not None else MM2_REPLICATION_FACTOR
    except ValueError:
        rf = MM2_REPLICATION_FACTOR
        out.notes.append(f"flow {name}: replication.factor = {replication_factor} is not a number; used 2")
    spec["topic_defaults"] = {"replication_factor": rf}

    sync: SyncDoc = {
        "configs": _bool(take("sync.topic.configs.enabled"), True),
        "acls": _bool(take("sync.topic.acls.enabled"), True),
        "group_offsets": _bool(take("sync.group.offsets.enabled"), False),
    }
    if (value := take("config.properties.exclude", "config.properties.blacklist")) is not None:
        sync["config_exclude"] = _list(value)
    spec["sync"] = sync

    replication: ReplicationDoc = {}
    producer = {
        k.removeprefix("producer.override.").removeprefix("producer."): v
        for k, v in s.items()
        if k.startswith("producer.")
    }
    consumer = {k.removeprefix("consumer."): v for k, v in s.items() if k.startswith("consumer.")}
    used.update(k for k in s if k.startswith(("producer.", "consumer.")))
    if consumer.pop("group.id", None) is not None:
        out.notes.append(f"flow {name}: consumer.group.id not carried over: the Spark job tracks its own positions")
    reset = consumer.pop("auto.offset.reset", None)
    if reset == "latest":
        replication["start_from"] = "latest"
    for props, kind in ((producer, "producer"), (consumer, "consumer")):
        for key in list(props):
            if is_sensitive_key(key):
                variable = _env_name(name, f"{kind}.{key}")
                props[key] = "${env:" + variable + "}"
                out.env_vars.append(variable)
                out.notes.append(f"flow {name}: {kind} property {key} not copied; set {variable}")
    if producer:
        replication["producer"] = producer
    if consumer:
        replication["consumer"] = consumer
    if replication:
        spec["replication"] = replication

    offsets: OffsetsDoc = {}
    emit_checkpoints = _bool(take("emit.checkpoints.enabled"), True) and flow.has_checkpoint_connector
    if not flow.has_checkpoint_connector:
        out.notes.append(f"flow {name}: no MirrorCheckpointConnector given, so checkpoints are off")
    if (value := take("offset.lag.max")) is not None:
        offsets["offset_lag_max"] = int(value) if value.strip().isdigit() else 100
    interval = take("emit.checkpoints.interval.seconds")
    if interval is not None and (parsed := _seconds(interval, "emit.checkpoints.interval.seconds", out)):
        offsets["checkpoint_interval"] = parsed
    elif interval is not None:
        emit_checkpoints = False
    offsets["emit_checkpoints"] = emit_checkpoints
    sync_interval = take("sync.group.offsets.interval.seconds")
    if sync_interval is not None and sync_interval != (interval or "60"):
        out.notes.append(
            f"flow {name}: sync.group.offsets.interval.seconds = {sync_interval} not carried over: kmirror writes "
            "translated offsets at every checkpoint (offsets.checkpoint_interval)"
        )
    if (value := take("offset-syncs.topic.location")) is not None:
        offsets["syncs_location"] = value if value in ("source", "target") else "source"
    if sync["group_offsets"] and not emit_checkpoints:
        sync["group_offsets"] = False
        out.notes.append(f"flow {name}: group offsets cannot be synced without checkpoints; turned off")
    spec["offsets"] = offsets

    heartbeats: HeartbeatsDoc = {
        "enabled": _bool(take("emit.heartbeats.enabled"), True) and flow.has_heartbeat_connector
    }
    if not flow.has_heartbeat_connector:
        out.notes.append(f"flow {name}: no MirrorHeartbeatConnector given, so heartbeats are off")
    hb_interval = take("emit.heartbeats.interval.seconds")
    if hb_interval is not None:
        parsed = _seconds(hb_interval, "emit.heartbeats.interval.seconds", out)
        if parsed:
            heartbeats["interval"] = parsed
        else:
            heartbeats["enabled"] = False
    spec["heartbeats"] = heartbeats

    take("emit.checkpoints.enabled", "emit.heartbeats.enabled")
    for key in sorted(set(s) - used):
        _note_unused(key, out)
    return spec


_POLICIES: dict[str, Literal["prefix", "identity"]] = {
    "DefaultReplicationPolicy": "prefix",
    "IdentityReplicationPolicy": "identity",
}


def _naming(policy_class: str | None, separator: str | None, name: str, out: _Translation) -> NamingDoc:
    naming: NamingDoc = {"policy": "prefix"}
    if policy_class:
        simple = policy_class.strip().rsplit(".", 1)[-1]
        if simple in _POLICIES:
            naming["policy"] = _POLICIES[simple]
        elif "identity" in simple.lower() or "legacy" in simple.lower():
            naming["policy"] = "identity"
            out.notes.append(
                f"flow {name}: custom policy {policy_class} imported as identity naming (its name suggests it "
                "keeps topic names); check this"
            )
        else:
            out.notes.append(
                f"flow {name}: custom replication.policy.class {policy_class} is not supported; imported as "
                "prefix naming (a template policy may express it: naming: {policy: template, template: ...})"
            )
    if separator is not None and separator != "." and naming["policy"] != "identity":
        if re.fullmatch(r"[._-]{1,5}", separator):
            naming["separator"] = separator
        else:
            out.notes.append(f"flow {name}: separator {separator!r} is not supported by kmirror; '.' used")
    return naming


def _result(out: _Translation, origins: list[str]) -> ImportResult:
    state_cluster = out.flows[0]["target"] if out.flows else next(iter(out.clusters), "CHANGE-ME")
    data: DesiredStateDoc = {
        "version": 1,
        "clusters": out.clusters,
        "state": {"cluster": state_cluster},
        "flows": out.flows,
    }
    notes = list(dict.fromkeys(out.notes))
    yaml = YAML(typ="rt")
    yaml.default_flow_style = False
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    header = [
        f"# Imported from MirrorMaker 2 configuration: {', '.join(origins)}",
        "# Review before applying: `kmirror validate -f <this file>`, then `kmirror plan`.",
    ]
    if out.env_vars:
        header.append("# Secrets were not copied. Set: " + ", ".join(dict.fromkeys(out.env_vars)))
    if notes:
        header.append("#")
        header.append("# Not carried over, or changed on the way:")
        header.extend(f"#   - {note}" for note in notes)
    text = "\n".join(header) + "\n" + buffer.getvalue()
    return ImportResult(text, data, notes, list(dict.fromkeys(out.env_vars)))
