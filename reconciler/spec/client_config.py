"""Turn a cluster of the desired state into a confluent-kafka (librdkafka) client configuration.

This is what the admin adapter, the state store and the offset writer call; it is the only place where
secrets are resolved for Kafka clients. The returned dict holds resolved secrets: hand it to a client and
drop it; never log, print or store it.

No I/O except reading `${file:..}` secrets at call time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from reconciler.spec.models import ClusterSpec
from reconciler.spec.secrets import resolve_properties

# Java-client properties librdkafka does not know. A JAAS line's username/password are carried over instead.
_JAVA_ONLY = frozenset({"sasl.jaas.config", "ssl.truststore.type", "ssl.keystore.type"})
# librdkafka properties the Java client does not know; turned into a JAAS line for Java.
_LIBRDKAFKA_ONLY = frozenset({"sasl.username", "sasl.password"})
_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def kafka_client_config(
    cluster: ClusterSpec,
    *,
    alias: str = "cluster",
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, str | int | float | bool] | None = None,
) -> dict[str, str | int | float | bool]:
    """`{"bootstrap.servers": ..., **client}` with every `${env:..}`/`${file:..}` resolved.

    Raises `SecretResolutionError` naming each `clusters.<alias>.client.<key>` that could not be resolved.
    `overrides` (e.g. a client.id or group.id chosen by the caller) win over the spec's client properties.
    """
    resolved = resolve_properties(
        cluster.client, context=f"clusters.{alias}.client", base_dir=base_dir, environ=environ
    )
    config: dict[str, str | int | float | bool] = {"bootstrap.servers": cluster.bootstrap_servers}
    jaas = resolved.get("sasl.jaas.config")
    if isinstance(jaas, str) and "sasl.username" not in resolved:
        for key, value in _JAAS_FIELD.findall(jaas):
            config[f"sasl.{key}"] = value
    config.update({k: v for k, v in resolved.items() if k not in _JAVA_ONLY})
    if overrides:
        config.update(overrides)
    return config


def java_client_properties(
    cluster: ClusterSpec,
    *,
    alias: str = "cluster",
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The same cluster as Java client properties (for Spark's `kafka.` options), values as strings.

    librdkafka's `sasl.username`/`sasl.password` become a `sasl.jaas.config` line for the mechanism.
    """
    resolved = resolve_properties(
        cluster.client, context=f"clusters.{alias}.client", base_dir=base_dir, environ=environ
    )
    props = {"bootstrap.servers": cluster.bootstrap_servers}
    props.update({k: _java_string(v) for k, v in resolved.items() if k not in _LIBRDKAFKA_ONLY})
    username, password = resolved.get("sasl.username"), resolved.get("sasl.password")
    if "sasl.jaas.config" not in props and username is not None and password is not None:
        mechanism = str(resolved.get("sasl.mechanism", resolved.get("sasl.mechanisms", "PLAIN"))).upper()
        module = _JAAS_MODULES.get(mechanism, _JAAS_MODULES["PLAIN"])
        props["sasl.jaas.config"] = (
            f'{module} required username="{_jaas_escape(username)}" password="{_jaas_escape(password)}";'
        )
    return props


def _jaas_escape(value: str | int | float | bool) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"')


def _java_string(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
